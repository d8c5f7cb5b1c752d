"""Commands that make and inspect runs: ``run``, ``resume``, ``runs``, ``preview``, ``demo``, ``scripted-server``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from webgen_agent.apps.cli.agent_flags import BUDGET_FLAGS, RUN_FLAGS, AgentFlags, with_agent_flags
from webgen_agent.apps.cli.base import CommandApp, console, errors, fail, run_async
from webgen_agent.apps.cli.common import (
    budget_note,
    check_before_run,
    cost_changes,
    existing_db,
    make_context,
    print_result,
    print_stop,
    recorded_run,
    resolve_db,
)
from webgen_agent.apps.cli.library_logs import library_logs
from webgen_agent.apps.cli.model_flags import db_option, with_model_flags
from webgen_agent.apps.cli.out_paths import check_out_folder
from webgen_agent.apps.cli.recorded_models import with_recorded_models
from webgen_agent.apps.cli.run_checks import (
    announce_new_database,
    require_new_run_id,
    require_resumable,
    require_start_folder,
)

if TYPE_CHECKING:
    from webgen_agent.core.context import Settings
    from webgen_agent.graph.api import RunResult

app = CommandApp()


@app.command()
@with_model_flags
@with_agent_flags(*RUN_FLAGS, "from_dir", "review", *BUDGET_FLAGS)
def run(
    requirement: Annotated[str, typer.Argument(help="The website requirement, in natural language.")],
    run_id: Annotated[str | None, typer.Option(help="Name the run (default: generated).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ./webgen-runs/RUN_ID).")] = None,
    group_id: Annotated[str, typer.Option(help="Group (instruction id) recorded with the run.")] = "",
    *,
    settings: Settings,
    agent: AgentFlags,
) -> None:
    """Generate a website for REQUIREMENT."""
    from webgen_agent.apps.review import run_with_review
    from webgen_agent.core.errors import ResumableStop
    from webgen_agent.graph.api import run_requirement
    from webgen_agent.tools.models import ModelCallError

    if not requirement.strip():
        fail('the requirement is empty: say what website to build, e.g. "A todo list with due dates"')

    settings = agent.sampled(settings)
    context = make_context(settings, **agent.sandbox(), **agent.context_fields(), **agent.budgets)
    check_out_folder(out or Path(context.runs_dir))
    require_new_run_id(resolve_db(settings.db), run_id)
    context = require_start_folder(context, out, resolve_db(settings.db))
    check_before_run(context, resolve_db(settings.db))
    announce_new_database(resolve_db(settings.db))
    from webgen_agent.checkpoints.runs import new_run_id

    run_id = run_id or new_run_id()
    console.print(f"run id: [bold]{run_id}[/bold]")
    library_logs(out or Path(context.runs_dir) / run_id)
    try:
        result = run_async(
            run_with_review(
                console,
                f"run {run_id}{budget_note(context)}",
                lambda on_event, reviewer: run_requirement(
                    requirement,
                    context=context,
                    run_id=run_id,
                    out_dir=out,
                    group_id=group_id,
                    db_path=resolve_db(settings.db),
                    on_progress=on_event,
                    reviewer=reviewer,
                ),
            ),
            run_id=run_id,
        )
    except ResumableStop as exc:
        fail(f"{exc} (the run is saved; `webgen-agent resume {run_id}` continues it)", code=1)
    except (ModelCallError, ValueError) as exc:
        fail(f"{exc} (the run is saved; `webgen-agent resume {run_id}` continues it)", code=1)
    finish(result)


@app.command()
@with_model_flags
@with_agent_flags("no_sandbox", "allow_host", "review", *BUDGET_FLAGS)
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    answer: Annotated[
        str | None,
        typer.Option(help='Answer the review the run waits for, as JSON: {"action": "approve"|"edit"|"reject", ...}.'),
    ] = None,
    no_budget: Annotated[
        bool,
        typer.Option(
            "--no-budget",
            help="Continue without the run's budget (one that cannot be kept: an endpoint that sends no token counts).",
        ),
    ] = False,
    *,
    settings: Settings,
    agent: AgentFlags,
) -> None:
    """Continue an interrupted or failed run, or one stopped at its budget (give a larger one), from its last
    checkpoint (a run waiting for review is asked again)."""
    from webgen_agent.core.views import review_decision

    # The flags first (they need nothing), then the run they name, before the agent loads.
    try:
        decision = review_decision(json.loads(answer)) if answer is not None else None
    except (ValueError, json.JSONDecodeError) as exc:
        fail(f"--answer: {exc}")
    database = existing_db(settings.db)
    record = recorded_run(database, run_id)
    require_resumable(record)
    from webgen_agent.apps.review import run_with_review
    from webgen_agent.core.errors import ResumableStop
    from webgen_agent.graph.api import continued_context, resume_run
    from webgen_agent.tools.models import ModelCallError

    # The run keeps its recorded settings (resume_run restores them); flags (and price variables)
    # given now beat its prices and budgets, and --review its review points.
    recorded = record.recorded_settings()
    changes = cost_changes(settings, recorded, **agent.budgets)
    if no_budget:
        if any(value is not None for value in agent.budgets.values()):
            fail("--no-budget and a budget flag contradict each other")
        changes.update(budget_usd=None, budget_tokens=None)
    points = agent.review()
    if points is not None:
        changes["review"] = points
    # The recorded run's models where nothing given now names one (no model flags needed again).
    host = make_context(with_recorded_models(settings, recorded), **agent.sandbox())
    try:
        context = continued_context(host, recorded, changes)  # what the run goes on with
    except ValueError as exc:
        fail(str(exc))
    check_before_run(context, None)  # the endpoints: existing_db has checked the database
    library_logs(record.out_dir)
    try:
        result = run_async(
            run_with_review(
                console,
                f"resume {run_id}{budget_note(context)}",
                lambda on_event, reviewer: resume_run(
                    run_id,
                    context=host,
                    changes=changes,
                    db_path=database,
                    on_progress=on_event,
                    reviewer=reviewer,
                    answer=decision,
                ),
            ),
            run_id=run_id,
        )
    except (ModelCallError, ValueError, ResumableStop) as exc:
        fail(str(exc), code=1)
    finish(result)


WAITING_EXIT_CODE = 3  # the run waits for review (docs/review.md)


def finish(result: RunResult) -> None:
    """The step table; a run left waiting for review says so and how to answer, and exits with 3; a run
    stopped at its budget says what it spent and how to continue, and exits with 4."""
    from rich.markup import escape

    from webgen_agent.apps.review import waiting_line

    print_result(result)
    if result.review is not None:
        errors.print(f"[yellow]{escape(waiting_line(result.review))}[/yellow]", soft_wrap=True)
        raise typer.Exit(WAITING_EXIT_CODE)
    print_stop(result)


@app.command()
def preview(
    folder: Annotated[
        Path, typer.Argument(help="A project folder (package.json or index.html).", exists=True, file_okay=False)
    ],
    screenshot: Annotated[Path, typer.Option(help="Where to save the PNG.")] = Path("preview.png"),
    width: int = 1280,
    height: int = 800,
    timeout: Annotated[float, typer.Option(help="Start deadline in seconds.")] = 60.0,
) -> None:
    """Run any project folder with the executor and save a screenshot of its landing page."""
    from webgen_agent.apps.preview import preview_folder

    report = run_async(preview_folder(folder, screenshot, viewport=(width, height), start_timeout_s=timeout))
    console.print_json(json.dumps(report))
    if not report["ok"]:
        raise typer.Exit(1)


@app.command("scripted-server")
def scripted_server(
    scenario: Annotated[Path, typer.Option(help="Scenario JSON file.", exists=True, dir_okay=False)],
    host: str = "127.0.0.1",
    # Not 8000: that is where vLLM and most local model servers listen.
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8011,
) -> None:
    """Serve the scripted OpenAI-compatible model server (for tests and offline demos)."""
    from webgen_agent.apps.scripted.server import serve
    from webgen_agent.apps.scripted.views import ScenarioError

    try:
        serve(scenario, host=host, port=port)
    except ScenarioError as exc:
        fail(str(exc))


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ./webgen-runs/demo-<time>).")] = None,
    db: Annotated[str | None, db_option()] = None,
    prepare: Annotated[
        bool,
        typer.Option(
            "--prepare",
            help="Only install the demo's npm packages into the dependency cache (scripts/setup.sh does), then exit.",
        ),
    ] = False,
    unconfined: Annotated[
        bool,
        typer.Option(
            "--no-sandbox",
            help="With --prepare: run npm without the sandbox (an image build, where user namespaces are refused).",
        ),
    ] = False,
) -> None:
    """Fully offline demo: a scripted model builds a real Vite + React todo app over four steps."""
    if unconfined and not prepare:
        fail("--no-sandbox goes with --prepare only: the demo's runs keep the sandbox")
    if prepare:
        from webgen_agent.apps.demo_deps import prepare_demo

        installed = run_async(prepare_demo(resolve_db(db), sandbox=not unconfined))
        if installed.error:
            fail(f"could not cache the demo's packages: {installed.error.splitlines()[0]}", code=1)
        console.print(f"the demo's packages are in the dependency cache ({installed.seconds:.1f} s)")
        return
    from webgen_agent.apps.demo import run_demo
    from webgen_agent.apps.report.model import REPORT_NAME
    from webgen_agent.tools.site.registry import registry_unreachable

    result = run_async(run_demo(out_dir=out, db_path=resolve_db(db), console=console))
    print_result(result)
    console.print(f"report: {Path(result.out_dir) / REPORT_NAME}", soft_wrap=True, highlight=False)
    unreachable = next(
        (s.execution_error for s in result.summary.steps if registry_unreachable(s.execution_error)), None
    )
    if unreachable is not None and not any(s.execution_ok for s in result.summary.steps):
        fail(
            f"the demo installs its packages (React, Vite) from npm's registry the first time: {unreachable} "
            "Run it once with the network (scripts/setup.sh does); later runs take them from the dependency cache.",
            code=1,
        )
    if result.status != "finished":
        raise typer.Exit(1)


@app.command()
def runs(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """List the runs in the database with status, requirement and best scores."""
    from webgen_agent.apps.cli.tables import fitted_table
    from webgen_agent.checkpoints.runs import RunIndex
    from webgen_agent.core.money import usd_text

    database = existing_db(db)
    records = RunIndex(database).list()
    if json_output:
        for record in records:
            row = {name: value for name, value in record.row().items() if name != "settings"}
            sys.stdout.write(json.dumps(row, separators=(",", ":")) + "\n")
        return
    rows = [
        [
            r.run_id,
            r.status,
            str(r.steps),
            str(r.chosen_step if r.chosen_step is not None else "-"),
            f"{r.best_screenshot}/5",
            f"{r.best_gui}/5",
            f"{r.tokens:,}",
            usd_text(r.cost_usd),
            r.group_id,
            r.requirement[:60],
        ]
        for r in records
    ]
    columns = ("run id", "status", "steps", "chosen", "screenshot", "gui", "tokens", "cost", "group", "requirement")
    table = fitted_table(
        f"runs in {database}",
        columns,
        rows,
        width=console.width,
        ids=("run id",),
        drop_first=("group", "chosen", "tokens", "steps", "screenshot", "gui", "cost", "requirement"),
    )
    console.print(table)
