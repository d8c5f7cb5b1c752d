"""What every command of the ``webgen-agent`` command line shares: consoles, model flags, errors, run helpers."""

from __future__ import annotations

import functools
import inspect
import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer._coercion import PassThroughRuntimeParam
from typer.core import TyperCommand, TyperGroup, TyperOption

from webgen_agent.core.loops.rules import LoopName
from webgen_agent.core.names import DEFAULT_DB, CriticMode
from webgen_agent.core.profiles.rules import Profile

# What a command needs only once it runs (the settings models, the database) is imported inside the
# functions below: the command line must start (``--help``, ``runs``) without pydantic-settings and
# the agent's modules (docs/performance.md, "Command-line start"; tests/test_cli_start.py).
if TYPE_CHECKING:
    from webgen_agent.checkpoints.database import Database
    from webgen_agent.core.context import AgentContext, SandboxSettings, Settings


def _light_params(params: list[Any]) -> list[Any]:
    """The command's parameters, made cheap to start with.

    Flags show no type in help: a flag takes no value, yet Typer's rich help prints ``<bool>``
    beside it (its plain help leaves it out); an empty metavar fills that column with nothing.

    Typer builds a pydantic ``TypeAdapter`` for every parameter it processes, given or not, so any
    command imported pydantic (about 0.1 s of a 0.3 s start) before it did anything. Typer's own flags
    (``--help``, the completion flags) default to None, which is not a bool: not given is off either
    way, so False. A plain ``str`` parameter gets Typer's own pass-through coercion, which accepts a
    ``str`` as it is (what click hands over from the command line or the environment) and builds no
    adapter; every other type keeps Typer's. Typer keeps the coercion in a private attribute: if a
    later Typer drops it, parameters keep Typer's coercion and only the start is slower
    (tests/test_cli_start.py says so)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        if param.name in _TYPER_FLAGS and param.default is None:
            param.default = False
        described = getattr(param, "type_descriptor", None)
        if described is not None and described.annotation is str and getattr(param, "_runtime_param", 0) is None:
            if described.parameter_info.parser is None and described.choices is None:
                param._runtime_param = PassThroughRuntimeParam(parameter_info=described.parameter_info, annotation=str)
    return params


_TYPER_FLAGS = frozenset({"help", "install_completion", "show_completion"})


class Command(TyperCommand):
    """A command of this command line (``CommandApp`` makes every command one)."""

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the click Context Typer ships
        return _light_params(super().get_params(ctx))


class Group(TyperGroup):
    """The ``webgen-agent`` group itself (its ``--help`` and ``--version``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _light_params(super().get_params(ctx))


class CommandApp(typer.Typer):
    """``typer.Typer`` for this command line: its group and commands are ``Group`` and ``Command``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=kwargs.pop("cls", Group), **kwargs)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or Command, **kwargs)


# Logs and CI have no terminal: use a readable width there instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)

# Flags every command that talks to models accepts; explicit flags beat the environment.
_MODEL_FLAGS: list[tuple[str, str]] = [
    ("base_url", "OpenAI-compatible endpoint for all roles (default: OPENAI_BASE_URL)."),
    ("model", "Model name for all roles (default: WEBGEN_MODEL)."),
    ("coder_model", "Coder model (Generator, Refiner)."),
    ("vlm_model", "Vision model (Screenshot-Judge, GUI agent)."),
    ("feedback_model", "Feedback model (GUI test and verdict, llm Critic)."),
    ("coder_base_url", "Endpoint of the coder model."),
    ("vlm_base_url", "Endpoint of the vision model."),
    ("feedback_base_url", "Endpoint of the feedback model."),
    ("fallback_model", "Model every role falls back to once its endpoint stays down for the patience."),
    ("fallback_base_url", "Endpoint of the fallback model (default: the role's own endpoint)."),
    ("patience", "Seconds one model call waits out 429, 5xx, timeouts and dropped connections (default 180)."),
    ("model_timeout", "Seconds before a hanging model call is cut and retried (default 600)."),
]

_SECONDS_FLAGS = frozenset({"patience", "model_timeout"})

# Prices in USD per million tokens (docs/costs.md); unknown unless given (flag or WEBGEN_<NAME>).
_PRICE_FLAGS: list[tuple[str, str]] = [
    ("price_in", "USD per million input tokens, every role (default: WEBGEN_PRICE_IN; unknown if unset)."),
    ("price_out", "USD per million output tokens, every role (default: WEBGEN_PRICE_OUT)."),
    ("coder_price_in", "Coder model: USD per million input tokens."),
    ("coder_price_out", "Coder model: USD per million output tokens."),
    ("vlm_price_in", "Vision model (judge, GUI agent): USD per million input tokens."),
    ("vlm_price_out", "Vision model (judge, GUI agent): USD per million output tokens."),
    ("feedback_price_in", "Feedback model: USD per million input tokens."),
    ("feedback_price_out", "Feedback model: USD per million output tokens."),
]


def with_model_flags(fn: Any) -> Any:
    """Add the model flags to a command; the command receives them as ``settings: Settings``."""
    signature = inspect.signature(fn)
    # Resolve the string annotations (postponed evaluation) so typer sees the Annotated options;
    # ``settings`` is left out (its type is imported only when the command runs).
    params = [
        p.replace(annotation=_resolved(p.annotation, fn)) for p in signature.parameters.values() if p.name != "settings"
    ]
    for name, help_text in _MODEL_FLAGS:
        seconds = name in _SECONDS_FLAGS
        option = typer.Option(help=help_text, rich_help_panel="Models", min=0 if seconds else None)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[float | None, option] if seconds else Annotated[str | None, option],
            )
        )
    for name, help_text in _PRICE_FLAGS:
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[float | None, typer.Option(min=0, help=help_text, rich_help_panel="Prices")],
            )
        )
    params.append(
        inspect.Parameter(
            "db",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[str | None, typer.Option(help=f"Run database (default: WEBGEN_DB or {DEFAULT_DB}).")],
        )
    )

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        explicit = {name: kwargs.pop(name) for name, _ in [*_MODEL_FLAGS, *_PRICE_FLAGS]}
        explicit["db"] = kwargs.pop("db")
        from webgen_agent.core.context import Settings

        try:
            settings = Settings(**{k: v for k, v in explicit.items() if v is not None})
        except Exception as exc:  # pydantic-settings validation: show one line
            fail(f"invalid settings: {exc}")
        return fn(*args, settings=settings, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer also reads the type hints: the resolved ones, without ``settings``.
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def _resolved(annotation: Any, fn: Any) -> Any:
    """A parameter's annotation as an object (``from __future__ import annotations`` leaves a string)."""
    if not isinstance(annotation, str):
        return annotation
    # What typing.get_type_hints does per annotation; done here one parameter at a time.
    return eval(annotation, fn.__globals__)  # the command's own source text


def db_option() -> Any:
    return typer.Option(help=f"Run database (default: WEBGEN_DB or {DEFAULT_DB}).")


def resolve_db(db: str | None) -> Database:
    """The --db value (or WEBGEN_DB, or the default file) as a run database; a bad value is a one-line error."""
    from webgen_agent.checkpoints.database import Database
    from webgen_agent.core.errors import ConfigError
    from webgen_agent.core.names import database_from_environment

    try:
        return Database.of(db or database_from_environment())
    except ConfigError as exc:
        fail(str(exc))


def existing_db(db: str | None) -> Database:
    """The run database of a command that reads runs: it must exist (nothing is created); one line otherwise."""
    import asyncio

    from webgen_agent.apps.checks import database_check

    database = resolve_db(db)
    if not database.is_postgres and not database.path.exists():
        fail(f"no database at {database.path}: no run was recorded there (pass --db or set WEBGEN_DB)")
    check = asyncio.run(database_check(database))
    if not check.ok:
        fail(check.line())
    return database


def recorded_run(database: Database, run_id: str) -> Any:
    """The runs-table record of ``run_id``; an unknown id is one line naming where it was looked for."""
    from webgen_agent.checkpoints.runs import RunIndex

    record = RunIndex(database).get(run_id)
    if record is None:
        fail(f"no run {run_id} in {database} (`webgen-agent runs` lists the runs there)")
    return record


RAY_LOCAL = "local"
RAY_HELP = (
    "Run on Ray: --ray alone (or --ray local) starts a Ray instance on this machine for the command; "
    "--ray auto or --ray HOST:PORT joins an existing cluster."
)


class RayCommand(Command):
    """A command whose ``--ray`` takes an optional value: ``--ray`` alone means a local Ray instance.

    Click's options with an optional value (``is_flag=False, flag_value=...``) did not come along
    into the parser Typer ships, so a bare ``--ray`` (last, or followed by another option) is given
    its value here before parsing. The commands using this class take no positional arguments, so a
    word after ``--ray`` is always its address.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: the click Context Typer ships
        filled: list[str] = []
        for position, arg in enumerate(args):
            filled.append(arg)
            following = args[position + 1] if position + 1 < len(args) else None
            if arg == "--ray" and (following is None or following.startswith("-")):
                filled.append(RAY_LOCAL)
        return super().parse_args(ctx, filled)


# The Ray flags of ``rollout`` and ``bench`` (commands declared with ``cls=RayCommand``).
RayFlag = Annotated[str | None, typer.Option(metavar="[ADDRESS]", help=RAY_HELP, rich_help_panel="Ray")]
ActorsFlag = Annotated[
    int | None,
    typer.Option(
        min=1, help="Ray actors to start (default: as many as the cluster's CPUs hold).", rich_help_panel="Ray"
    ),
]
RunsPerActorFlag = Annotated[
    int, typer.Option(min=1, help="Runs each Ray actor drives at the same time.", rich_help_panel="Ray")
]
CpusPerRunFlag = Annotated[
    float,
    typer.Option(
        min=0.01, help="CPUs a Ray actor reserves per run (a run keeps about one core busy).", rich_help_panel="Ray"
    ),
]


def ray_settings(address: str | None, *, actors: int | None, runs_per_actor: int, cpus_per_run: float) -> Any:
    """``RaySettings`` for ``--ray [ADDRESS]`` (None without --ray); checks Ray is installed."""
    if address is None:
        return None
    from webgen_agent.apps.cluster.settings import RaySettings, import_ray
    from webgen_agent.core.errors import ConfigError

    try:
        import_ray()
    except ConfigError as exc:
        fail(str(exc))
    address = address.strip()
    return RaySettings(
        address="" if address.lower() == RAY_LOCAL else address,
        actors=actors,
        runs_per_actor=runs_per_actor,
        cpus_per_run=cpus_per_run,
    )


def split_values(values: list[str] | None) -> list[str]:
    """Repeated options and comma-separated lists both work: ``--ids a,b --ids c``."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def fail(message: str, code: int = 2) -> NoReturn:
    # Unwrapped (one line stays one line in logs) and escaped (a log tail may hold [brackets]).
    errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


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


def make_context(
    settings: Settings,
    *,
    no_sandbox: bool = False,
    allow_hosts: list[str] | None = None,
    check_sandbox: bool = True,
    **overrides: Any,
) -> AgentContext:
    """The run context from settings and flags; a missing setting or an unusable sandbox ends the command."""
    from webgen_agent.core.errors import ConfigError
    from webgen_agent.tools.sandbox import require_sandbox

    sandbox = sandbox_settings(no_sandbox, allow_hosts, recorded=overrides.get("sandbox"))
    if sandbox is not None:
        overrides["sandbox"] = sandbox
    try:
        context = settings.to_context(**{k: v for k, v in overrides.items() if v is not None})
        if context.sandbox.enabled and check_sandbox:
            require_sandbox()
    except ConfigError as exc:
        fail(str(exc))
    return context


def check_before_run(context: AgentContext, database: Database | None) -> None:
    """The fast checks (``apps/doctor.py``): an unreachable endpoint or database ends the command in one line.

    Runs before anything is recorded; a warning (a model its endpoint does not list) is printed and
    the command goes on.
    """
    import asyncio

    from webgen_agent.apps.checks import first_failure
    from webgen_agent.apps.doctor import preflight

    checks = asyncio.run(preflight(context, database))
    failure = first_failure(checks)
    if failure is not None:
        fail(f"{failure.line()}; `webgen-agent doctor` checks everything")
    for check in checks:
        if not check.ok:
            errors.print(f"[yellow]warning:[/yellow] {escape(check.line())}", soft_wrap=True)


def sandbox_settings(
    no_sandbox: bool, allow_hosts: list[str] | None, *, recorded: Any = None
) -> SandboxSettings | None:
    """The sandbox ``--no-sandbox`` / ``--allow-host`` ask for, over a continued run's ``recorded``
    one (else the defaults); None without those flags. A bad host ends the command with one line."""
    from webgen_agent.core.errors import ConfigError

    if not (no_sandbox or allow_hosts):
        return None
    try:
        return _sandbox_flags(recorded, no_sandbox, allow_hosts or [])
    except ConfigError as exc:
        fail(str(exc))


def _sandbox_flags(recorded: Any, no_sandbox: bool, allow_hosts: list[str]) -> SandboxSettings:
    """The sandbox settings (a resumed run's recorded ones, else the defaults) with the flags applied."""
    from pydantic import ValidationError

    from webgen_agent.core.context import SandboxSettings
    from webgen_agent.core.errors import ConfigError

    try:
        sandbox = SandboxSettings.model_validate(recorded or {})
        return SandboxSettings.model_validate(
            {
                **sandbox.model_dump(),
                "enabled": sandbox.enabled and not no_sandbox,
                "allow_hosts": [*sandbox.allow_hosts, *allow_hosts],
            }
        )
    except ValidationError as exc:
        raise ConfigError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None


def run_async(coro: Any) -> Any:
    import asyncio

    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted[/yellow]: servers stopped; continue with `webgen-agent resume RUN_ID`.")
        raise typer.Exit(130) from None


def print_result(result: Any) -> None:
    from webgen_agent.apps.progress import step_table

    console.print(step_table(result.summary))
    console.print(f"output folder: {result.out_dir}")
    if result.site_dir:
        console.print(f"site: {result.site_dir} (step {result.chosen_step})")


# Exit code of ``run``/``resume`` when the run stopped at its budget (resumable with a larger one).
BUDGET_EXIT_CODE = 4  # (3: a run waiting for review)


def print_stop(result: Any) -> None:
    """For a run stopped at its budget: what it spent and how to continue; exits with BUDGET_EXIT_CODE."""
    if result.status != "budget":
        return
    from webgen_agent.core.money import usd_text

    summary = result.summary
    errors.print(
        f"[yellow]budget spent[/yellow]: stopped after step {len(summary.steps) - 1} "
        f"({usd_text(summary.cost_usd)}, {summary.input_tokens + summary.output_tokens:,} tokens); "
        f"`webgen-agent resume {result.run_id} --budget-usd MORE` (or --budget-tokens MORE) continues it.",
        soft_wrap=True,
    )
    raise typer.Exit(BUDGET_EXIT_CODE)


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


def cost_changes(settings: Settings, recorded: dict[str, Any], **budgets: float | int | None) -> dict[str, Any]:
    """What continuing a run (``resume``, ``fork``) changes of its recorded costs: prices given now
    (flags or variables) beat the recorded ones, and so do the budgets given now."""
    from webgen_agent.core.context import Prices

    changes: dict[str, Any] = {
        "prices": settings.prices().over(Prices.model_validate(recorded.get("prices") or {})),
    }
    changes.update({name: value for name, value in budgets.items() if value is not None})
    return changes


def with_recorded(settings: Settings, recorded: dict[str, Any], **budgets: float | int | None) -> dict[str, Any]:
    """A run's recorded settings for continuing it, with this command's ``cost_changes``."""
    return {**recorded, **cost_changes(settings, recorded, **budgets)}


def budget_note(context: AgentContext) -> str:
    """`` (budget $0.50, 200,000 tokens)`` for a run with a budget (its progress view's title), else ""."""
    from webgen_agent.core.money import usd_text

    parts = [usd_text(context.budget_usd)] if context.budget_usd is not None else []
    if context.budget_tokens is not None:
        parts.append(f"{context.budget_tokens:,} tokens")
    return f" (budget {', '.join(parts)})" if parts else ""


def whole_budget(budget_usd: float | None, budget_tokens: int | None, context: AgentContext) -> Any:
    """The ``Spending`` of a command with a budget for all its runs (None without one); a budget in
    USD with an unknown price ends the command with one line."""
    from webgen_agent.core.context import require_prices
    from webgen_agent.core.costs import Budget, Spending
    from webgen_agent.core.errors import ConfigError

    if budget_usd is None and budget_tokens is None:
        return None
    if budget_usd is not None and budget_usd <= 0:
        fail("--budget-usd must be more than 0")
    if budget_usd is not None:
        try:
            require_prices(context.prices, "--budget-usd")
        except ConfigError as exc:
            fail(str(exc))
    return Spending(Budget(budget_usd=budget_usd, budget_tokens=budget_tokens))


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


def warn_unconfined() -> None:
    """One line for a command that runs many sites with ``--no-sandbox`` (each run's run.json says it too)."""
    from webgen_agent.tools.sandbox import UNCONFINED_WARNING

    errors.print(f"[yellow]warning:[/yellow] {escape(UNCONFINED_WARNING)}", soft_wrap=True)


def with_sampling(settings: Settings, temperature: float | None, top_p: float | None) -> Settings:
    """The settings with ``--temperature`` / ``--top-p`` as the coder's sampling (given ones only)."""
    sampling = {"coder_temperature": temperature, "coder_top_p": top_p}
    return settings.model_copy(update={k: v for k, v in sampling.items() if v is not None})
