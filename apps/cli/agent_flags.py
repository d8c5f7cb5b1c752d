"""The flags of a run's behaviour (loop, limits, critic, sampling, sandbox, budget, review): one registry.

``AGENT_FLAGS`` declares each flag once; ``with_agent_flags("max_steps", ...)`` adds the named ones
to a command, which receives them as one ``AgentFlags`` (``agent``) and builds its context from it.
Help texts show the defaults of the run settings (``core/names.py``'s ``RUN_DEFAULTS``, which
``AgentContext`` takes its defaults from), of the profiles' rules and of ``rollout``. docs/cli.md's
table says which command takes which flag; tests/test_cli_flags.py checks the table, the shared
help and that each flag reaches the run's context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer

from webgen_agent.apps.cli.base import fail
from webgen_agent.apps.cli.flags import Flag, FlagValues, with_flags
from webgen_agent.apps.rollout.settings import ROLLOUT_MAX_STEPS, ROLLOUT_TEMPERATURE, ROLLOUT_TOP_P
from webgen_agent.core.loops import LOOPS, LoopName
from webgen_agent.core.names import RUN_DEFAULTS, CriticMode
from webgen_agent.core.profiles import PROFILES, Profile

if TYPE_CHECKING:
    from webgen_agent.core.context import Settings


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
_D = RUN_DEFAULTS


def _agent(*decls: str, **kwargs: Any) -> Any:
    return typer.Option(*decls, rich_help_panel=AGENT_PANEL, **kwargs)


def _by_profile(rule: str, on: str = "on", off: str = "off") -> str:
    """``default: on, upstream: off``: a profile rule's value under each profile."""
    return ", ".join(f"{name}: {on if getattr(rules, rule) else off}" for name, rules in PROFILES.items())


def _viewports() -> str:
    return ", ".join(
        f"{name} at {w}x{h}" for name, rules in PROFILES.items() if rules.viewport for w, h in [rules.viewport]
    )


PROFILE_HELP = (
    "upstream: WebGen-Agent's rules step for step (GUI test only on screenshot_validated, 1024x768, "
    "its grading, feedback and reward pools); default: this project's (docs/fidelity.md)."
)


AGENT_FLAGS: dict[str, Flag] = {
    "max_steps": Flag(
        Annotated[
            int | None,
            _agent(
                min=1,
                help=f"Coder steps before the run stops (default {_D.max_steps}; rollout: {ROLLOUT_MAX_STEPS}; "
                "a fork counts the steps before it too).",
            ),
        ]
    ),
    "error_limit": Flag(
        Annotated[int | None, _agent(min=1, help=f"Errored steps before backtracking (default {_D.error_limit}).")]
    ),
    "stall_steps": Flag(
        Annotated[
            int | None,
            _agent(
                min=0,
                help="Loop governor: steps without a better score before the run goes back to its best step, then "
                f"stops (default {_D.stall_steps}; 0: off; the profile's rule: {_by_profile('loop_governor')}).",
            ),
        ]
    ),
    "critic": Flag(
        Annotated[
            CriticMode | None,
            _agent(
                help=f"{' or '.join(get_args(CriticMode))} (default {_D.critic}; llm: a model critiques each "
                "step, and rollout exports its critiques)."
            ),
        ]
    ),
    "allow_shell": Flag(
        Annotated[bool, _agent("--allow-shell", help="Run shell actions the coder writes (in the sandbox).")], False
    ),
    "gui_max_actions": Flag(
        Annotated[
            int | None, _agent(min=1, help=f"GUI agent action budget per GUI test (default {_D.gui_max_actions}).")
        ]
    ),
    "temperature": Flag(
        Annotated[
            float | None,
            _agent(
                min=0,
                help=f"Coder sampling temperature (default {_D.coder_temperature}; rollout: {ROLLOUT_TEMPERATURE}).",
            ),
        ]
    ),
    "top_p": Flag(
        Annotated[
            float | None,
            _agent(min=0, max=1, help=f"Coder nucleus sampling (default: the endpoint's; rollout: {ROLLOUT_TOP_P})."),
        ]
    ),
    "replay_tests": Flag(
        Annotated[
            bool | None,
            _agent(
                "--replay-tests/--no-replay-tests",
                help="Record passing GUI tests as Playwright tests and replay them after each later edit "
                f"(docs/replay.md); default: the profile's rule ({_by_profile('replay_tests')}), on for "
                "rollout --reward *-replay.",
            ),
        ]
    ),
    "profile": Flag(
        Annotated[
            Profile,
            _agent(help=f"{PROFILE_HELP} bench: a profile's own viewport is the evaluation's too ({_viewports()})."),
        ],
        "default",
    ),
    "prompts_from": Flag(
        Annotated[
            str | None,
            _agent(
                "--prompts-from",
                metavar="PATH",
                help="With --profile upstream: WebGen-Agent's own prompts, read from your checkout of it (its "
                "prompt modules parsed as data, never run); a prompt the profile needs that is missing ends the "
                "command (docs/fidelity.md).",
            ),
        ]
    ),
    "no_sandbox": Flag(Annotated[bool, no_sandbox_option(AGENT_PANEL)], False),
    "allow_host": Flag(Annotated[list[str] | None, allow_host_option(AGENT_PANEL)]),
    "loop": Flag(
        Annotated[LoopName | None, _agent("--loop", help=f"{', '.join(LOOPS)} (default {_D.loop}; docs/loops.md).")]
    ),
    "critique_rounds": Flag(
        Annotated[int | None, _agent(min=1, help=f"webloop: Critic + Refiner rounds (default {_D.critique_rounds}).")]
    ),
    "shared_policy": Flag(Annotated[bool, _agent(help="webloop: the coder model answers as Critic too.")], False),
    "scaffold": Flag(
        Annotated[str | None, _agent(help="Start from this project scaffold: react-router, static-pages.")]
    ),
    "from_dir": Flag(
        Annotated[
            str | None,
            _agent(
                "--from",
                metavar="DIR",
                help="Start from this project folder: step 0 is its files as they are, run and judged with no "
                "coder call, and the loop improves them toward the requirement (symbolic links are not followed; "
                "node_modules, .git and build folders are left out).",
            ),
        ]
    ),
    "max_pages": Flag(
        Annotated[
            int | None, _agent(min=1, help=f"Pages captured per step, landing page included (default {_D.max_pages}).")
        ]
    ),
    "offline_pages": Flag(
        Annotated[
            bool,
            _agent(
                "--offline-pages",
                help="Captured and tested pages reach the site's own origin only (no CDN scripts, styles, fonts "
                "or remote images); local and private addresses are refused either way.",
            ),
        ],
        False,
    ),
    "review": Flag(ReviewFlag),
    "budget_usd": Flag(BudgetUsdFlag),
    "budget_tokens": Flag(BudgetTokensFlag),
}

# The settings of a new run (``run``, ``rollout``, ``bench``); docs/cli.md says why the others take fewer.
RUN_FLAGS = (
    "max_steps",
    "error_limit",
    "stall_steps",
    "critic",
    "allow_shell",
    "gui_max_actions",
    "temperature",
    "top_p",
    "replay_tests",
    "profile",
    "prompts_from",
    "no_sandbox",
    "allow_host",
    "loop",
    "critique_rounds",
    "shared_policy",
    "scaffold",
    "max_pages",
    "offline_pages",
)
BUDGET_FLAGS = ("budget_usd", "budget_tokens")
# What a fork may change of the recorded run's settings (the rest made the recorded conversation).
FORK_FLAGS = (
    "max_steps",
    "error_limit",
    "stall_steps",
    "critic",
    "gui_max_actions",
    "temperature",
    "top_p",
    "replay_tests",
)

# Flags a command passes on to the context as they are (None: not given); the others are read by name.
_CONTEXT_FIELDS = (
    "max_steps",
    "error_limit",
    "stall_steps",
    "critic",
    "gui_max_actions",
    "replay_tests",
    "profile",
    "prompts_from",
    "loop",
    "critique_rounds",
    "max_pages",
)
_SWITCHES = ("allow_shell", "offline_pages", "shared_policy")  # off: the context's own value


class AgentFlags(FlagValues):
    """The agent flags one command was given (``with_agent_flags``)."""

    @property
    def budgets(self) -> dict[str, Any]:
        return {"budget_usd": self.get("budget_usd"), "budget_tokens": self.get("budget_tokens")}

    def review(self) -> list[Any] | None:
        """``--review``'s points (None: not given); a bad one ends the command with one line."""
        from webgen_agent.apps.review import review_points

        try:
            return review_points(self.get("review"))
        except ValueError as exc:
            fail(f"--review: {exc}")

    def context_fields(self) -> dict[str, Any]:
        """The context fields the flags given set; an unknown scaffold ends the command with one line."""
        fields = {name: self.values[name] for name in _CONTEXT_FIELDS if self.get(name) is not None}
        fields.update({name: True for name in _SWITCHES if self.get(name)})
        if self.get("from_dir"):
            fields["start_from"] = self.get("from_dir")
        scaffold = self.get("scaffold")
        if scaffold:
            from webgen_agent.tools.scaffolds import ScaffoldError, load_scaffold

            try:
                load_scaffold(scaffold)
            except ScaffoldError as exc:
                fail(str(exc))
            fields["scaffold"] = scaffold
        if "review" in self.values and (points := self.review()) is not None:
            fields["review"] = points
        return fields

    def sandbox(self) -> dict[str, Any]:
        """``make_context``'s sandbox arguments."""
        return {"no_sandbox": bool(self.get("no_sandbox")), "allow_hosts": self.get("allow_host")}

    def sampled(self, settings: Settings) -> Settings:
        """The settings with ``--temperature`` / ``--top-p`` as the coder's sampling (given ones only)."""
        sampling = {"coder_temperature": self.get("temperature"), "coder_top_p": self.get("top_p")}
        return settings.model_copy(update={k: v for k, v in sampling.items() if v is not None})


def with_agent_flags(*names: str, defaults: dict[str, Any] | None = None, own: dict[str, Flag] | None = None) -> Any:
    """Add the agent flags ``names`` (keys of ``AGENT_FLAGS``) to a command, which receives them as
    ``agent: AgentFlags``. ``defaults``: a command's own default of a flag (rollout's profile);
    ``own``: a command's own flag of that name (rollout's ``--shared-policy/--separate-critic``)."""
    return with_flags({name: AGENT_FLAGS[name] for name in names} | (own or {}), "agent", AgentFlags, defaults)
