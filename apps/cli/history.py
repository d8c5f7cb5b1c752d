"""Time travel from the CLI: ``history`` (steps and their checkpoints) and ``fork`` (branch a run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from webgen_agent.apps.cli.agent_flags import BUDGET_FLAGS, FORK_FLAGS, AgentFlags, with_agent_flags
from webgen_agent.apps.cli.base import CommandApp, console, fail, run_async
from webgen_agent.apps.cli.common import (
    check_before_run,
    existing_db,
    make_context,
    recorded_run,
    with_recorded,
)
from webgen_agent.apps.cli.library_logs import library_logs, recorded_library_warning
from webgen_agent.apps.cli.model_flags import db_option, with_model_flags
from webgen_agent.apps.cli.out_paths import check_out_folder
from webgen_agent.apps.cli.recorded_models import with_recorded_models
from webgen_agent.apps.cli.run import finish
from webgen_agent.apps.cli.run_checks import require_new_run_id, require_step

if TYPE_CHECKING:
    from webgen_agent.core.context import Settings

app = CommandApp()


@app.command()
def history(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """One row per step (scores, errored, checkpoint id, parent, time, tokens, cost) and the backtracks."""
    from webgen_agent.apps.cli.tables import fitted_table
    from webgen_agent.checkpoints.outputs import event_line
    from webgen_agent.checkpoints.runs import RunIndex
    from webgen_agent.core.money import add_costs, usd_text
    from webgen_agent.graph.history import recorded_tests, run_history

    database = existing_db(db)
    record = recorded_run(database, run_id)
    try:
        rows, events = run_async(run_history(run_id, db_path=database))
    except ValueError as exc:
        fail(str(exc))
    title = f"run {run_id} ({record.status})"
    if record and record.parent_run:
        title += f", forked from {record.parent_run} at step {record.fork_step}"
    cells = [
        [
            str(row.index),
            row.role,
            row.action,
            "-" if row.parent is None else str(row.parent),
            f"{row.screenshot_score}/5",
            f"{row.gui_score}/5" + (" pass" if row.gui_passed else ""),
            row.replay,
            "yes" if row.errored else "",
            row.checkpoint_id,
            f"{row.wall_seconds:.1f}",
            str(row.total_tokens),
            usd_text(row.cost_usd),
        ]
        for row in rows
    ]
    columns = ("step", "role", "action", "parent", "screenshot", "gui", "replay", "errored", "checkpoint")
    table = fitted_table(
        title,
        (*columns, "seconds", "tokens", "cost"),
        cells,
        width=console.width,
        ids=("checkpoint",),
        drop_first=("replay", "parent", "seconds", "tokens", "role", "errored", "cost", "action"),
    )
    console.print(table)
    for row in rows:
        if row.judge_error:  # a grade of 0 that says nothing about the page
            console.print(f"step {row.index}: the screenshot judge failed: {row.judge_error}", soft_wrap=True)
    if rows:
        total = add_costs(row.cost_usd for row in rows)
        console.print(f"spent: {sum(row.total_tokens for row in rows):,} tokens, {usd_text(total)}")
    for event in events:
        console.print(event_line(event))
    for test in run_async(recorded_tests(run_id, db_path=database)):
        console.print(
            f"recorded test {test.name}: from step {test.recorded_at_step}, {test.actions} actions, "
            f"{test.assertions} assertions" + ("" if test.covers_all else " (covers part of the GUI test)"),
            soft_wrap=True,
        )
    forks = [r for r in RunIndex(database).list() if r.parent_run == run_id]
    for fork in forks:
        console.print(f"fork: {fork.run_id} from step {fork.fork_step} ({fork.status})")
    if noise := recorded_library_warning(record.out_dir):
        console.print(f"warning: {noise}", soft_wrap=True, highlight=False)


@app.command()
@with_model_flags
@with_agent_flags(*FORK_FLAGS, "review", "no_sandbox", "allow_host", *BUDGET_FLAGS)
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to branch from.")],
    step: Annotated[int, typer.Option(help="Continue from this step's checkpoint.")],
    note: Annotated[str, typer.Option(help="A note added to the coder's feedback.")] = "",
    new_run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the new run.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder of the new run.")] = None,
    *,
    settings: Settings,
    agent: AgentFlags,
) -> None:
    """Start a new run from step N of RUN_ID; the original run stays intact.

    The new run keeps the recorded run's settings; the flags given change them for the new run."""
    database = existing_db(settings.db)
    record = recorded_run(database, run_id)  # an unknown run is answered before the agent loads
    from webgen_agent.apps.review import run_with_review
    from webgen_agent.graph.api import fork_run, new_run_id_suffix
    from webgen_agent.tools.models import ModelCallError

    settings = with_recorded_models(settings, record.recorded_settings())  # flags given now win
    recorded = with_recorded(settings, record.recorded_settings(), **agent.budgets)
    recorded.pop("models", None)  # the models are the settings' now
    recorded.update(agent.context_fields())
    context = make_context(agent.sampled(settings), **agent.sandbox(), **recorded)
    check_out_folder(out or Path(context.runs_dir))
    require_step(database, run_id, step)
    new_run_id = new_run_id or f"{run_id}-fork{step}-{new_run_id_suffix()}"
    require_new_run_id(database, new_run_id)
    check_before_run(context, None)  # the endpoints: existing_db has checked the database
    library_logs(out or Path(context.runs_dir) / new_run_id)
    try:
        result = run_async(
            run_with_review(
                console,
                f"fork of {run_id} at step {step}",
                lambda on_event, reviewer: fork_run(
                    run_id,
                    step=step,
                    note=note,
                    context=context,
                    new_run_id=new_run_id,
                    out_dir=out,
                    db_path=database,
                    on_progress=on_event,
                    reviewer=reviewer,
                ),
            ),
            run_id=new_run_id,
        )
    except (ModelCallError, ValueError) as exc:
        fail(str(exc), code=1)
    finish(result)
