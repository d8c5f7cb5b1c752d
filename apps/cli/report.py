"""``webgen-agent report RUN_ID``: one self-contained HTML page about a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from webgen_agent.apps.cli.base import CommandApp, console, fail, run_async
from webgen_agent.apps.cli.common import existing_db
from webgen_agent.apps.cli.model_flags import db_option
from webgen_agent.apps.cli.out_paths import check_out_file

app = CommandApp()


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="The run to report on.")],
    out: Annotated[Path | None, typer.Option(help="HTML file to write (default: <run folder>/report.html).")] = None,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """Write an HTML report: requirement, settings, score timeline, tokens/cost/time plots, and per
    step the screenshot, grades with reasons, code diff, coder reply, GUI test frames, feedback and
    cost; images embedded, nothing fetched when opened."""
    from webgen_agent.apps.report.html import write_report

    database = existing_db(db)
    if out is not None:
        check_out_file(out)
    try:
        path = run_async(write_report(run_id, db_path=database, out=out))
    except ValueError as exc:
        fail(str(exc))
    console.print(f"report: {path}", soft_wrap=True, highlight=False)
