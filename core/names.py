"""Names and defaults the run settings use, kept free of pydantic: the command line declares its
options with them when it starts, before any settings model is imported (docs/performance.md,
"Command-line start"). ``core/context.py`` builds the settings on them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from webgen_agent.core.loops.rules import LoopName

CriticMode = Literal["template", "llm"]
# The three model roles (``AgentContext.coder``, ``.vlm``, ``.feedback``), in their order everywhere.
Role = Literal["coder", "vlm", "feedback"]
ROLES: tuple[Role, ...] = ("coder", "vlm", "feedback")

DEFAULT_DB = Path(".webgen") / "webgen.db"
# The settings file in the working folder (read by the settings model, and by Studio via langgraph.json).
DOTENV = ".env"


# Defaults of a run's settings: ``AgentContext``'s fields (and ``Settings.coder_temperature``) take
# them from here, and the command line's help shows them (apps/cli/agent_flags.py) without
# importing the settings models.
@dataclass(frozen=True)
class RunDefaults:
    max_steps: int = 20
    error_limit: int = 5
    stall_steps: int = 5
    critic: CriticMode = "template"
    gui_max_actions: int = 15
    loop: LoopName = "webgen-agent"
    critique_rounds: int = 2
    max_pages: int = 4
    coder_temperature: float = 0.5


RUN_DEFAULTS = RunDefaults()


def database_from_environment() -> str:
    """``WEBGEN_DB`` (any case, as the settings model reads it), else the default file: the run
    database a command reads when no ``--db`` is given, known without importing the settings model."""
    given = {name.upper(): value for name, value in os.environ.items()}
    if "WEBGEN_DB" not in given and Path(DOTENV).is_file():
        from dotenv import dotenv_values  # python-dotenv, pydantic-settings' own reader of .env

        given = {name.upper(): value or "" for name, value in dotenv_values(DOTENV).items()}
    return given.get("WEBGEN_DB") or str(DEFAULT_DB)
