"""What the commands that run the agent share: the run database, the run context and its checks, results, budgets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from webgen_agent.apps.cli.base import console, errors, fail

# What a command needs only once it runs (the settings models, the database) is imported inside the
# functions below: the command line must start (``--help``, ``runs``) without pydantic-settings and
# the agent's modules (docs/performance.md, "Command-line start"; tests/test_cli_start.py).
if TYPE_CHECKING:
    from webgen_agent.checkpoints.database import Database
    from webgen_agent.core.context import AgentContext, SandboxSettings, Settings


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
        f"({usd_text(summary.cost_usd)}, {summary.input_tokens + summary.output_tokens:,} tokens: "
        f"{result.budget_reason or 'its budget is spent'}); `webgen-agent resume {result.run_id} --budget-usd MORE` "
        "(or --budget-tokens MORE, or --no-budget) continues it.",
        soft_wrap=True,
    )
    raise typer.Exit(BUDGET_EXIT_CODE)


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


def warn_unconfined() -> None:
    """One line for a command that runs many sites with ``--no-sandbox`` (each run's run.json says it too)."""
    from webgen_agent.tools.sandbox import UNCONFINED_WARNING

    errors.print(f"[yellow]warning:[/yellow] {escape(UNCONFINED_WARNING)}", soft_wrap=True)
