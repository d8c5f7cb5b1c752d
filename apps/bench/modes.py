"""The evaluation's verdict modes, kept free of pydantic so that ``bench --verdict`` can offer them
at start-up (``apps/bench/config.py`` holds the settings that use them)."""

from __future__ import annotations

from typing import Literal

# webgen-bench: WebGen-Bench's compute_acc rule ("YES" anywhere in the final answer, else "PARTIAL",
# else NO); strict: the answer must start with the word, else the feedback model judges the run;
# feedback: the feedback model always judges.
VerdictMode = Literal["webgen-bench", "strict", "feedback"]
