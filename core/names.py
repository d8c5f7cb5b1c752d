"""Names and defaults the run settings use, kept free of pydantic: the command line declares its
options with them when it starts, before any settings model is imported (docs/performance.md,
"Command-line start"). ``core/context.py`` builds the settings on them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

CriticMode = Literal["template", "llm"]

DEFAULT_DB = Path(".webgen") / "webgen.db"
