"""The export formats: one registry entry each, everything else derived from it.

An entry names its builder (``(trajectories, texts, options) -> records``), its record type
(``checkpoints/views.py``), whether ``--text`` renders it (prompt-completion records) and its help
line. ``export --format``'s choices and help, ``export_trajectories``, the docs check and the test
that writes and reloads every format (tests/test_export_formats.py) all read ``FORMATS``.

Builder and record type are named as ``module:attribute`` and imported when used
(``pkgutil.resolve_name``): the command line offers the formats at start-up, before pydantic and
the export code are imported (tests/test_cli_start.py). tests/test_export_formats.py resolves
every name, so a wrong one fails the fast suite.

Adding a format: one entry here, its record type and builder, its section in docs/exports.md.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

_VIEWS = "webgen_agent.checkpoints.views"
_EXPORT = "webgen_agent.checkpoints.export"


@dataclass(frozen=True)
class ExportFormatEntry:
    name: str
    help: str  # a few words: what one record is
    record: str  # its record type, "module:Class"
    builder: str  # "module:function" (trajectories, texts, options) -> Iterator[record]
    text: bool = False  # prompt and completion are message lists: --text renders them as strings
    # Its records' messages are trained whole (every assistant turn): a run started from a folder,
    # whose first assistant turn is the user's project, is left out (docs/exports.md).
    whole_messages: bool = False

    def build(self) -> Any:
        return pkgutil.resolve_name(self.builder)

    def record_type(self) -> Any:
        return pkgutil.resolve_name(self.record)


FORMATS: dict[str, ExportFormatEntry] = {
    entry.name: entry
    for entry in (
        ExportFormatEntry(
            "step-grpo",
            "a coder step with its reward and advantage",
            record=f"{_VIEWS}:StepGrpoRecord",
            builder=f"{_EXPORT}:step_grpo_records",
            text=True,
        ),
        ExportFormatEntry(
            "trajectory",
            "a trajectory, credit per coder turn",
            record=f"{_VIEWS}:TrajectoryRecord",
            builder=f"{_EXPORT}:trajectory_records",
        ),
        ExportFormatEntry(
            "sft",
            "a trajectory up to its chosen step",
            record=f"{_VIEWS}:SftRecord",
            builder=f"{_EXPORT}:sft_records",
            whole_messages=True,
        ),
        ExportFormatEntry(
            "critic",
            "an llm critique and its reward gain",
            record=f"{_VIEWS}:CriticRecord",
            builder=f"{_EXPORT}:critic_records",
            text=True,
        ),
        ExportFormatEntry(
            "rewards",
            "a trajectory's rewards and scores",
            record=f"{_VIEWS}:RewardsRecord",
            builder=f"{_EXPORT}:rewards_records",
        ),
        ExportFormatEntry(
            "webloop",
            "a WebLoop turn (coder or Critic)",
            record=f"{_VIEWS}:WebloopRecord",
            builder="webgen_agent.checkpoints.export_webloop:webloop_records",
            text=True,
        ),
        ExportFormatEntry(
            "verl",
            "a trajectory in verl's layout (--parquet)",
            record=f"{_VIEWS}:VerlRecord",
            builder=f"{_EXPORT}:verl_records",
            whole_messages=True,
        ),
    )
}

# A format's name: to type checkers a str, at run time the Literal of the registry's names (the
# choices Typer offers for --format, and what pydantic accepts in ExportReport).
if TYPE_CHECKING:
    ExportFormat = str
else:
    ExportFormat = Literal[tuple(FORMATS)]
TEXT_FORMATS: tuple[str, ...] = tuple(name for name, entry in FORMATS.items() if entry.text)


def format_entry(name: str) -> ExportFormatEntry:
    entry = FORMATS.get(name)
    if entry is None:
        raise ValueError(f"unknown export format {name!r}: one of {', '.join(FORMATS)}")
    return entry


def formats_help() -> str:
    """``--format``'s help: what one record of each format is."""
    return "One record per: " + "; ".join(f"{name}: {entry.help}" for name, entry in FORMATS.items()) + "."


def text_formats_words() -> str:
    """``step-grpo, critic and webloop``: the formats ``--text`` renders, for messages."""
    return f"{', '.join(TEXT_FORMATS[:-1])} and {TEXT_FORMATS[-1]}"
