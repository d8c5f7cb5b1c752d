"""The ``webgen-agent`` command line: one Typer app made of each subsystem's commands."""

from __future__ import annotations

from typing import Annotated

import typer

from webgen_agent.apps.cli import bench, doctor, export, history, report, run, ship, train
from webgen_agent.apps.cli.base import CommandApp

app = CommandApp(
    name="webgen-agent",
    help="Generate working websites with a LangGraph agent loop, and export its trajectories.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
for commands in (run.app, history.app, bench.app, report.app, export.app, ship.app, train.app, doctor.app):
    app.add_typer(commands)


def _show_version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        typer.echo(f"webgen-agent {version('webgen-agent')}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Generate working websites with a LangGraph agent loop, and export its trajectories."""
