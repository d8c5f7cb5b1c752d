"""The export formats' names, kept free of pydantic so that the command line can offer them as
choices at start-up (``checkpoints/views.py`` holds the records of each)."""

from __future__ import annotations

from typing import Literal

ExportFormat = Literal["step-grpo", "sft", "critic", "rewards", "webloop", "trajectory", "verl"]
TEXT_FORMATS: tuple[ExportFormat, ...] = (
    "step-grpo",
    "critic",
    "webloop",
)  # the prompt-completion formats --text renders
