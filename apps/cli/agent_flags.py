"""The flags of a run's behaviour (loop, limits, critic, sampling, sandbox, budget, review), one definition each."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from webgen_agent.apps.cli.base import fail
from webgen_agent.core.loops.rules import LoopName
from webgen_agent.core.names import CriticMode
from webgen_agent.core.profiles.rules import Profile

PROFILE_HELP = (
    "upstream: WebGen-Agent's rules step for step (GUI test only on screenshot_validated, 1024x768, "
    "its grading, feedback and reward pools); default: this project's (docs/fidelity.md)."
)


def no_sandbox_option(panel: str | None = None) -> Any:
    return typer.Option(
        "--no-sandbox",
        rich_help_panel=panel,
        help="Run generated code (npm install scripts, dev server, shell actions) unconfined, without bubblewrap.",
    )


def allow_host_option(panel: str | None = None) -> Any:
    return typer.Option(
        "--allow-host",
        rich_help_panel=panel,
        metavar="HOST",
        help="A host installs and shell actions may reach through the agent's proxy besides npm's registry "
        "(repeat for more). Generated code reaches no other host.",
    )


# Budgets (docs/costs.md): per run for ``run``/``resume``, for the whole command for ``rollout``/``bench``.
BudgetUsdFlag = Annotated[
    float | None,
    typer.Option(
        min=0,
        help="Stop at a step boundary once this many USD are spent (needs every price).",
        rich_help_panel="Budget",
    ),
]


BudgetTokensFlag = Annotated[
    int | None,
    typer.Option(min=1, help="Stop at a step boundary once this many tokens are used.", rich_help_panel="Budget"),
]


# ``--review`` of ``run``, ``resume`` and ``fork`` (apps/review.py reads its values).
ReviewFlag = Annotated[
    list[str] | None,
    typer.Option(
        "--review",
        help="Stop for a human at these points (repeat or comma list): plan, critique, shell, finalize; "
        "'none' clears the recorded ones (resume, fork). See docs/review.md.",
    ),
]


# Where ``--help`` lists the flags of a run's behaviour (below) in every command that takes them.
AGENT_PANEL = "Agent"


# Flags of the loop a run takes (docs/loops.md), shared by ``run``, ``rollout`` and ``bench``.
LoopFlag = Annotated[
    LoopName | None,
    typer.Option("--loop", help="webgen-agent (default), webloop or single.", rich_help_panel=AGENT_PANEL),
]


RoundsFlag = Annotated[
    int | None,
    typer.Option(min=1, help="webloop: Critic + Refiner rounds (default 2).", rich_help_panel=AGENT_PANEL),
]


SharedPolicyFlag = Annotated[
    bool, typer.Option(help="webloop: the coder model answers as Critic too.", rich_help_panel=AGENT_PANEL)
]


ScaffoldFlag = Annotated[
    str | None,
    typer.Option(help="Start from this project scaffold: react-router, static-pages.", rich_help_panel=AGENT_PANEL),
]


MaxPagesFlag = Annotated[
    int | None,
    typer.Option(
        min=1, help="Pages captured per step, landing page included (default 4).", rich_help_panel=AGENT_PANEL
    ),
]


OfflinePagesFlag = Annotated[
    bool,
    typer.Option(
        "--offline-pages",
        help="Captured and tested pages reach the site's own origin only (no CDN scripts, styles, fonts or "
        "remote images); local and private addresses are refused either way.",
        rich_help_panel=AGENT_PANEL,
    ),
]


def loop_overrides(
    loop: LoopName | None, critique_rounds: int | None, shared_policy: bool, scaffold: str | None, max_pages: int | None
) -> dict[str, Any]:
    """Context overrides from the loop flags; an unknown scaffold ends the command with one line."""
    from webgen_agent.tools.scaffolds import ScaffoldError, load_scaffold

    if scaffold:
        try:
            load_scaffold(scaffold)
        except ScaffoldError as exc:
            fail(str(exc))
    return {
        "loop": loop,
        "critique_rounds": critique_rounds,
        "shared_policy": shared_policy or None,
        "scaffold": scaffold,
        "max_pages": max_pages,
    }


# The flags of a run's behaviour (AgentContext fields and the coder's sampling), one definition each,
# so that every command taking a flag shows the same help; a command's own default (rollout's) is
# in the help, the value None standing for it. docs/cli.md lists which command takes which, and why
# the others do not; tests/test_cli_flags.py checks both and that each flag reaches the context.
MaxStepsFlag = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Coder steps before the run stops (default 20; rollout: 5; a fork counts the steps before it too).",
        rich_help_panel=AGENT_PANEL,
    ),
]


ErrorLimitFlag = Annotated[
    int | None,
    typer.Option(min=1, help="Errored steps before backtracking (default 5).", rich_help_panel=AGENT_PANEL),
]


StallStepsFlag = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Loop governor (default profile): steps without a better score before the run goes back to its "
        "best step, then stops (default 5; 0: off).",
        rich_help_panel=AGENT_PANEL,
    ),
]


CriticFlag = Annotated[
    CriticMode | None,
    typer.Option(
        help="template (default) or llm (a model critiques each step; rollout exports its critiques).",
        rich_help_panel=AGENT_PANEL,
    ),
]


AllowShellFlag = Annotated[
    bool,
    typer.Option(
        "--allow-shell", help="Run shell actions the coder writes (in the sandbox).", rich_help_panel=AGENT_PANEL
    ),
]


GuiMaxActionsFlag = Annotated[
    int | None,
    typer.Option(min=1, help="GUI agent action budget per GUI test (default 15).", rich_help_panel=AGENT_PANEL),
]


TemperatureFlag = Annotated[
    float | None,
    typer.Option(min=0, help="Coder sampling temperature (default 0.5; rollout: 1.0).", rich_help_panel=AGENT_PANEL),
]


TopPFlag = Annotated[
    float | None,
    typer.Option(
        min=0,
        max=1,
        help="Coder nucleus sampling (default: the endpoint's; rollout: 0.95).",
        rich_help_panel=AGENT_PANEL,
    ),
]


ReplayTestsFlag = Annotated[
    bool | None,
    typer.Option(
        "--replay-tests/--no-replay-tests",
        help="Record passing GUI tests as Playwright tests and replay them after each later edit (docs/replay.md); "
        "default: the profile's rule (default: on, upstream: off), on for rollout --reward *-replay.",
        rich_help_panel=AGENT_PANEL,
    ),
]


ProfileFlag = Annotated[
    Profile,
    typer.Option(
        help=PROFILE_HELP + " bench: upstream also evaluates at WebGen-Bench's 1024x768.", rich_help_panel=AGENT_PANEL
    ),
]


NoSandboxFlag = Annotated[bool, no_sandbox_option(AGENT_PANEL)]


AllowHostFlag = Annotated[list[str] | None, allow_host_option(AGENT_PANEL)]
