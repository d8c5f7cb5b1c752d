"""Names and defaults the run settings use, kept free of pydantic: the command line declares its
options with them when it starts, before any settings model is imported (docs/performance.md,
"Command-line start"). ``core/context.py`` builds the settings on them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

CriticMode = Literal["template", "llm"]

DEFAULT_DB = Path(".webgen") / "webgen.db"


def database_from_environment() -> str:
    """``WEBGEN_DB`` (any case, as the settings model reads it), else the default file: the run
    database a command reads when no ``--db`` is given, known without importing the settings model."""
    given = {name.upper(): value for name, value in os.environ.items()}
    return given.get("WEBGEN_DB", str(DEFAULT_DB))
