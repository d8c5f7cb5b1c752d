"""``webgen-agent doctor``: every check a run needs, with a fix for each failing line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from webgen_agent.apps.cli.agent_flags import no_sandbox_option
from webgen_agent.apps.cli.base import CommandApp, console
from webgen_agent.apps.cli.common import make_context, resolve_db
from webgen_agent.apps.cli.model_flags import with_model_flags

if TYPE_CHECKING:
    from webgen_agent.core.context import Settings

app = CommandApp()


@app.command()
@with_model_flags
def doctor(
    no_sandbox: Annotated[bool, no_sandbox_option()] = False,
    *,
    settings: Settings,
) -> None:
    """Check the model endpoints (reachable, models listed, images, structured output), the database,
    Chromium, Node, npm and its registry, and the sandbox; exit 1 when a run could not work."""
    import asyncio

    from rich.markup import escape
    from rich.table import Table

    from webgen_agent.apps.checks import first_failure
    from webgen_agent.apps.doctor import doctor as run_checks

    context = make_context(settings, no_sandbox=no_sandbox, check_sandbox=False)
    checks = asyncio.run(run_checks(context, resolve_db(settings.db)))
    table = Table(title="webgen-agent doctor")
    table.add_column("check")
    table.add_column("result")
    table.add_column("details")
    table.add_column("fix")
    for check in checks:
        result = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]" if check.blocking else "[yellow]warn[/yellow]"
        table.add_row(check.name, result, check.detail, check.fix)
    console.print(table)
    # The failing lines again, unwrapped: a log or a terminal copy keeps each on one line.
    for check in checks:
        if not check.ok:
            console.print(f"{'FAIL' if check.blocking else 'warn'} {escape(check.line())}", soft_wrap=True)
    if first_failure(checks) is not None:
        raise typer.Exit(1)
