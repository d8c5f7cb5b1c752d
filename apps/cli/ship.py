"""``webgen-agent ship RUN_ID --out FILE.zip``: a step's site as a zip, sources or built and checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from webgen_agent.apps.cli.agent_flags import no_sandbox_option
from webgen_agent.apps.cli.base import CommandApp, console, fail, run_async
from webgen_agent.apps.cli.common import existing_db, recorded_run
from webgen_agent.apps.cli.model_flags import db_option
from webgen_agent.apps.cli.out_paths import check_out_file

app = CommandApp()


@app.command()
def ship(
    run_id: Annotated[str, typer.Argument(help="The run to ship.")],
    out: Annotated[Path, typer.Option("--out", help="Zip file to write.")],
    step: Annotated[int | None, typer.Option(help="Step to ship (default: the run's chosen step).")] = None,
    build: Annotated[
        bool,
        typer.Option(
            "--build",
            help="Install, run the `build` script, check the built index.html in Chromium, pack the static output.",
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds the build script may run.")] = 300.0,
    chromium: Annotated[
        str | None, typer.Option(help="Chromium executable (default: WEBGEN_CHROMIUM or PATH).")
    ] = None,
    no_sandbox: Annotated[bool, no_sandbox_option()] = False,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """Pack a step's site into a zip: its source files without node_modules, or with --build the
    built static output, packed only after its index.html loaded in Chromium with no page errors."""
    database = existing_db(db)
    recorded_run(database, run_id)  # an unknown run is answered before the site tools load
    check_out_file(out)
    from webgen_agent.apps.ship import ShipError, ship_run
    from webgen_agent.core.context import Settings
    from webgen_agent.core.errors import ConfigError

    try:
        result = run_async(
            ship_run(
                run_id,
                out=out.resolve(),
                db_path=database,
                step=step,
                build=build,
                chromium=chromium or Settings().chromium,
                timeout_s=timeout,
                sandbox=not no_sandbox,
            )
        )
    except (ShipError, ConfigError) as exc:
        fail(str(exc))
    what = f"built output {result.output_dir}/" if result.built else "sources"
    if result.checked_url:
        what += f", index.html rendered in Chromium ({result.page_title or 'untitled'})"
    console.print(
        f"shipped step {result.step} of {result.run_id}: {result.files} files, {result.bytes:,} bytes ({what})",
        soft_wrap=True,
        highlight=False,
    )
    console.print(f"zip: {result.zip_path}", soft_wrap=True, highlight=False)
