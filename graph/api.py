"""Running the workflow from Python: one requirement in, a result out; resume an interrupted run.

This is what the CLI calls and what host applications embed. Each run is one checkpoint thread
(``thread_id`` = ``run_id``) in the SQLite database; ``group_id`` (e.g. a benchmark instruction id)
travels in the run metadata so trajectories of one instruction can be found together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt
from pydantic import BaseModel

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.folder_import import read_project_folder
from webgen_agent.checkpoints.outage import listen as database_outages
from webgen_agent.checkpoints.outputs import RunSummary, write_run_outputs
from webgen_agent.checkpoints.pregel import with_runtime_context
from webgen_agent.checkpoints.recording import row_fields
from webgen_agent.checkpoints.runs import RunIndex, RunRecord, new_run_id
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.core.context import DEFAULT_DB, ROLES, AgentContext, ModelSettings
from webgen_agent.core.costs import Budget, Spending, budget_spent_by, spent
from webgen_agent.core.errors import POSTGRES_SERVER, DatabaseUnavailable, DiskFull, no_space
from webgen_agent.core.events import ProgressEvent
from webgen_agent.core.money import add_costs
from webgen_agent.core.state import InputState
from webgen_agent.core.views import ReviewDecision, ReviewRequest
from webgen_agent.graph.builder import compile_graph
from webgen_agent.nodes.local_dirs import agent_paths
from webgen_agent.nodes.resources import Resources, bound_resources, use_resources
from webgen_agent.tools.browser_command import browser_unconfined_warning
from webgen_agent.tools.limits import limit_warnings
from webgen_agent.tools.netns import shared_network_warning
from webgen_agent.tools.sandbox import UNCONFINED_WARNING, require_sandbox

ProgressCallback = Callable[[dict[str, Any]], None]

# AgentContext fields of the machine and endpoints a run happens to use: whoever continues a run
# gives them anew. Every other field shapes the run's behaviour: a run setting, recorded (no secret
# is among them) so that resume and fork keep it; a new field is one unless it is listed here.
HOST_SETTINGS = frozenset(
    {
        "coder",
        "vlm",
        "feedback",
        "install_timeout_s",
        "start_timeout_s",
        "page_timeout_s",
        "gui_timeout_s",
        "chromium",
        "runs_dir",
        "sandbox",
    }
)
RUN_SETTINGS = tuple(name for name in AgentContext.model_fields if name not in HOST_SETTINGS)

# Of each role's endpoint, what a run records (under "models") so that resume and fork need no model
# flags again (apps/cli/recorded_models.py): never an API key.
RECORDED_MODEL_FIELDS = frozenset({"model", "base_url", "temperature", "top_p", "fallback_model", "fallback_base_url"})


def recorded_settings(context: AgentContext) -> dict[str, Any]:
    """What a run records of its context: its run settings, and its models without their keys."""
    models = {role: getattr(context, role).model_dump(include=RECORDED_MODEL_FIELDS) for role in ROLES}
    return {**context.model_dump(include=set(RUN_SETTINGS)), "models": models}


# What a run may spend (docs/costs.md): recorded with the settings, but the command that continues a
# run decides them anew (a larger budget, prices given again).
COST_SETTINGS = ("prices", "budget_usd", "budget_tokens")


class RunResult(BaseModel):
    run_id: str
    status: str
    out_dir: str
    site_dir: str | None
    chosen_step: int | None
    summary: RunSummary
    review: ReviewRequest | None = None  # status "review": what the run waits for an answer to
    budget_reason: str | None = None  # status "budget": why the budget is spent, in one line


# Answers a review request (docs/review.md); None leaves the run waiting (status "review").
Reviewer = Callable[[ReviewRequest], Awaitable[ReviewDecision | None]]


def pending_review(interrupts: Sequence[Interrupt]) -> ReviewRequest | None:
    """The review request a stopped run waits on, if any (other interrupts are not reviews)."""
    for pending in interrupts:
        if isinstance(pending.value, dict) and pending.value.get("kind") == "review":
            return ReviewRequest.model_validate(pending.value)
    return None


def run_config(run_id: str, group_id: str = "") -> RunnableConfig:
    return {
        "configurable": {"thread_id": run_id},
        "metadata": {"run_id": run_id, "group_id": group_id},
        "recursion_limit": 10_000,
    }


@contextlib.asynccontextmanager
async def run_resources(db_path: Database, context: AgentContext) -> AsyncIterator[Resources]:
    """The resources already bound by the caller, or a fresh set closed at the end."""
    existing = bound_resources()
    if existing is not None:
        yield existing
        return
    fresh = await asyncio.to_thread(Resources, db_path, chromium=context.chromium)  # opens the database
    async with use_resources(fresh) as resources:
        yield resources


async def _drive(graph_input: InputState | None, *, on_progress: ProgressCallback | None, **how: Any) -> RunResult:
    """``_drive_run``, saying once per outage that the run waits for its database (checkpoints/outage.py)."""

    def database_wait(line: str) -> None:
        if line and on_progress is not None:
            on_progress(ProgressEvent(node="run", phase="wait", message=line).model_dump())

    with database_outages(database_wait):
        try:
            return await _drive_run(graph_input, on_progress=on_progress, **how)
        except Exception as exc:
            full = no_space(exc)
            if full is None:
                raise
            record, database = how["record"], how["db_path"]
            if full == POSTGRES_SERVER:  # its disk is the server's, maybe on another machine
                raise DiskFull(
                    f"no space left on the PostgreSQL server's disk ({database}): free space on the server, "
                    "then continue from the last checkpoint"
                ) from exc
            places = [Path(record.out_dir)] + ([] if database.is_postgres else [database.path])
            raise DiskFull(disk_full_line(full, places)) from exc


_NEARLY_FULL = 4 * 1024 * 1024  # bytes free under which a disk counts as the one that filled up


def disk_full_line(what: str, places: Sequence[Path]) -> str:
    """One line naming the disk that filled up: the mount point of the file refused, else of the run's
    folder or database file that has (next to) no space left."""
    full = [Path(what)] if what.startswith("/") else []
    for place in places:
        with contextlib.suppress(OSError):
            existing = next(p for p in (place, *place.parents) if p.exists())
            if shutil.disk_usage(existing).free < _NEARLY_FULL:
                full.append(place)
    if not full:
        return f"no space left for {what}: free space, then continue from the last checkpoint"
    mount = next(p for p in (full[0], *full[0].parents) if p.exists())
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return (
        f"no space left on the disk mounted at {mount} (writing {what if full[0] == Path(what) else full[0]}): "
        "free space, then continue from the last checkpoint"
    )


async def _run_warnings(context: AgentContext) -> list[str]:
    """What this host cannot confine or cap for the run (shown as it starts and kept in run.json); an
    unusable sandbox ends the run here, before anything is recorded (it would stop at its first install)."""
    warnings: list[str] = []
    browser_warning = await asyncio.to_thread(browser_unconfined_warning)
    if browser_warning is not None:
        warnings.append(browser_warning)
    if context.sandbox.enabled:
        await asyncio.to_thread(require_sandbox)
        warnings += await asyncio.to_thread(limit_warnings, context.sandbox)  # what this host cannot cap
        if shared := await asyncio.to_thread(shared_network_warning, context.sandbox):
            warnings.append(shared)
    else:
        warnings.append(UNCONFINED_WARNING)
    from webgen_agent.nodes.feedback import observation_cut_warning  # the model clients: only a run needs them

    if (cut := await observation_cut_warning(context.coder, context.rules.environment)) is not None:
        warnings.append(cut)
    return warnings


async def _drive_run(
    graph_input: InputState | None,
    *,
    record: RunRecord,
    context: AgentContext,
    db_path: Database,
    on_progress: ProgressCallback | None,
    reviewer: Reviewer | None = None,
    answer: ReviewDecision | None = None,
) -> RunResult:
    warnings = await _run_warnings(context)
    for warning in warnings:
        if on_progress is not None:
            on_progress(ProgressEvent(node="run", warning=warning).model_dump())
    runs = await asyncio.to_thread(RunIndex, db_path)
    await runs.astart(record)
    config = run_config(record.run_id, record.group_id)
    # What this invocation spends, from the nodes' progress events: a run that fails still shows it.
    tally = Spending(Budget())
    before = (0.0, 0) if graph_input is not None else (record.cost_usd, record.tokens)

    def progress(event: dict[str, Any]) -> None:
        tally.add(event)
        if on_progress is not None:
            on_progress(event)

    async with run_resources(db_path, context) as resources, open_checkpointer(db_path, record_runs=False) as saver:
        graph = compile_graph(saver)
        next_input: InputState | Command | None = graph_input
        if answer is not None:
            next_input = Command(resume=answer.model_dump())
        while True:
            try:
                async for mode, chunk in graph.astream(
                    next_input, config, context=context, stream_mode=["custom", "updates"]
                ):
                    if mode == "custom" and isinstance(chunk, dict) and "webgen" in chunk:
                        progress(chunk["webgen"])
            except DatabaseUnavailable:
                raise  # the database is gone: nothing can be recorded; the row's dead process says interrupted
            except BaseException as exc:
                # Ctrl-C or cancellation: resumable; anything else: failed (the checkpoints stay).
                interrupted = isinstance(exc, (KeyboardInterrupt, GeneratorExit)) or isinstance(
                    exc, asyncio.CancelledError
                )
                status = "interrupted" if interrupted else "failed"
                # Not awaited in a thread: a cancelled task must still record this before it unwinds.
                spent_now = {"cost_usd": add_costs([before[0], tally.usd]), "tokens": before[1] + tally.tokens}
                runs.update(record.run_id, status=status, error=str(exc)[:2000], **spent_now)
                raise
            snapshot = await graph.aget_state(config)
            request = pending_review(snapshot.interrupts)
            if request is None:
                break
            # Recorded before anyone is asked: a process that dies while waiting leaves it waiting.
            usd, tokens = spent(snapshot.values.get("steps") or [])
            await runs.aupdate(record.run_id, status="review", error="", cost_usd=usd, tokens=tokens)
            decision = await reviewer(request) if reviewer is not None else None
            if decision is None:
                summary = await asyncio.to_thread(
                    write_run_outputs,
                    Path(record.out_dir),
                    {**snapshot.values, "status": "review"},  # run.json says what the run waits for
                    resources.store,
                    warnings=warnings,
                )
                return RunResult(
                    run_id=record.run_id,
                    status="review",
                    out_dir=record.out_dir,
                    site_dir=None,
                    chosen_step=None,
                    summary=summary,
                    review=request,
                )
            await runs.astart(record)
            next_input = Command(resume=decision.model_dump())
        state = snapshot.values
        # Paused before the budget node: stopped at a step boundary with its budget spent (resumable).
        status = "budget" if "budget" in snapshot.next else state.get("status", "finished")
        summary = await asyncio.to_thread(
            write_run_outputs, Path(record.out_dir), state, resources.store, warnings=warnings, status=status
        )
    await runs.aupdate(record.run_id, **row_fields(state, status=status))
    return RunResult(
        run_id=record.run_id,
        status=status,
        out_dir=record.out_dir,
        site_dir=state.get("site_dir"),
        chosen_step=summary.chosen_step,
        summary=summary,
        budget_reason=budget_spent_by(state.get("steps") or [], context) if status == "budget" else None,
    )


async def run_requirement(
    requirement: str,
    *,
    context: AgentContext,
    run_id: str | None = None,
    out_dir: str | Path | None = None,
    group_id: str = "",
    db_path: str | Path | Database = DEFAULT_DB,
    on_progress: ProgressCallback | None = None,
    requirements: Sequence[Mapping[str, str]] | None = None,
    reviewer: Reviewer | None = None,
) -> RunResult:
    """Run the whole workflow for one requirement and return where the site is.

    ``requirements`` (``{"task", "expected_result"}`` each, e.g. a WebGen-Bench record's test cases)
    are what the requirement checks test; without them the feedback model writes them once per
    requirement text. At the review points ``context.review`` names, ``reviewer`` is asked; without
    one (or when it returns None) the run stops with status ``review`` and ``result.review`` says
    what it waits for (``resume_run`` continues it).
    """
    if not requirement.strip():
        raise ValueError("the requirement is empty")
    run_id = run_id or new_run_id()
    out = Path(out_dir) if out_dir else Path(context.runs_dir) / run_id
    record = RunRecord(
        run_id=run_id,
        group_id=group_id,
        requirement=requirement,
        out_dir=str(out.resolve()),
        settings=json.dumps(recorded_settings(context)),
    )
    if await asyncio.to_thread(lambda: RunIndex(db_path).get(run_id)) is not None:
        raise ValueError(f"run {run_id} already exists; resume it or choose another --run-id")
    if context.start_from:  # a folder the run cannot start from: FolderRefused, before anything is recorded
        leave_out = agent_paths(db_path, context.runs_dir, out)
        await asyncio.to_thread(
            read_project_folder, context.start_from, cap_mb=context.sandbox.workspace_mb, leave_out=leave_out
        )
    graph_input: InputState = {
        "requirement": requirement,
        "run_id": run_id,
        "out_dir": record.out_dir,
        "group_id": group_id,
    }
    if requirements:
        graph_input["requirements"] = [
            {"task": r["task"], "expected_result": r["expected_result"]} for r in requirements
        ]
    return await _drive(
        graph_input,
        record=record,
        context=context,
        db_path=Database.of(db_path),
        on_progress=on_progress,
        reviewer=reviewer,
    )


def continued_context(
    context: AgentContext, recorded: Mapping[str, Any], changes: Mapping[str, Any] | None = None
) -> AgentContext:
    """The context a run goes on with: ``context`` (the host's endpoints, timeouts, sandbox and
    paths), the run's ``recorded`` run settings over it, and this continuation's ``changes`` (a
    larger budget, other prices, review points) over those."""
    kept = {name: value for name, value in recorded.items() if name in RUN_SETTINGS}
    # The model roles pass as they are: a dump leaves their API keys out.
    roles: dict[str, ModelSettings] = {role: getattr(context, role) for role in ROLES}
    rest = context.model_dump(exclude=set(roles))
    return AgentContext.model_validate({**rest, **roles, **kept, **(changes or {})})


async def resume_run(
    run_id: str,
    *,
    context: AgentContext,
    changes: Mapping[str, Any] | None = None,
    db_path: str | Path | Database = DEFAULT_DB,
    on_progress: ProgressCallback | None = None,
    reviewer: Reviewer | None = None,
    answer: ReviewDecision | None = None,
) -> RunResult:
    """Continue an interrupted or failed run, or one stopped at its budget (give a larger one in
    ``changes``), from its last checkpoint, into the same folder, with the settings it was started
    with (``continued_context``: ``context`` gives the host's, ``changes`` what this continuation
    changes, e.g. ``{"budget_usd": 2.0}``).

    A run waiting for review is asked again (``reviewer``), or answered with ``answer``.
    """
    runs = await asyncio.to_thread(RunIndex, db_path)
    record = await runs.aget(run_id)
    if record is None:
        raise ValueError(f"no run {run_id} in {Database.of(db_path)}")
    context = continued_context(context, json.loads(record.settings or "{}"), changes)
    if record.status == "running":
        raise ValueError(f"run {run_id} is still running (pid {record.pid})")
    if record.status in ("finished", "rejected"):
        raise ValueError(f"run {run_id} already {record.status}")
    if answer is not None and record.status != "review":
        raise ValueError(f"run {run_id} does not wait for review (status {record.status})")
    if record.status == "budget":
        from webgen_agent.checkpoints.history import final_state

        why = budget_spent_by((await final_state(db_path, run_id)).get("steps") or [], context)
        if why:
            raise ValueError(
                f"run {run_id} stopped at its budget and is still over it ({why}); give a larger one, or none"
            )
    # The dead process's servers and browser may still be running.
    await asyncio.to_thread(Resources.reap_orphans, db_path)
    return await _drive(
        None,
        record=record,
        context=context,
        db_path=Database.of(db_path),
        on_progress=on_progress,
        reviewer=reviewer,
        answer=answer,
    )


async def fork_run(
    run_id: str,
    *,
    step: int,
    context: AgentContext,
    note: str = "",
    new_run_id: str | None = None,
    out_dir: str | Path | None = None,
    db_path: str | Path | Database = DEFAULT_DB,
    on_progress: ProgressCallback | None = None,
    reviewer: Reviewer | None = None,
) -> RunResult:
    """Start a new run from the checkpoint after ``step`` of ``run_id``; the original stays intact.

    The new run continues with a Refiner turn answering step ``step``'s feedback (plus ``note``).
    """
    from webgen_agent.checkpoints.history import saved_states, step_checkpoints
    from webgen_agent.nodes.feedback import step_feedback
    from webgen_agent.nodes.profile import context_prompts

    runs = await asyncio.to_thread(RunIndex, db_path)
    original = await runs.aget(run_id)
    if original is None:
        raise ValueError(f"no run {run_id} in {Database.of(db_path)}")
    new_run_id = new_run_id or f"{run_id}-fork{step}-{new_run_id_suffix()}"
    if await runs.aget(new_run_id) is not None:
        raise ValueError(f"run {new_run_id} already exists")
    out = Path(out_dir) if out_dir else Path(context.runs_dir) / new_run_id
    async with (
        run_resources(Database.of(db_path), context) as resources,
        open_checkpointer(db_path, record_runs=False) as saver,
    ):
        graph = compile_graph(saver)
        saved = step_checkpoints(await saved_states(saver, run_id)).get(step)
        if saved is None:
            raise ValueError(f"run {run_id} has no step {step}")
        values = dict(saved.values)
        blobs = resources.store
        forked_step = values["steps"][step]
        tested = values["steps"][values["edit_step"]] if values.get("edit_step") is not None else None
        if values.get("feedback"):
            feedback = await blobs.aget_text(values["feedback"])
        else:  # the step ended the run (finish, passed test): described as the run's critic would
            concerned = tested if forked_step["action"] != "edit" else None
            say = context_prompts(context).feedback
            feedback = await step_feedback(values, forked_step, concerned, context.rules, say, coder=context.coder)  # type: ignore[arg-type]
        if note.strip():
            feedback = f"{feedback}\n\nNote from the user: {note.strip()}"
        values.update(
            run_id=new_run_id,
            out_dir=str(out.resolve()),
            feedback=await blobs.aput_text(feedback),
            status="running",
            chosen_step=None,
            site_dir=None,
        )
        values.pop("events", None)
        config = run_config(new_run_id, original.group_id)
        # Written as if the critic had just run, so the next node is the Refiner (or finalize at budget);
        # the runtime carries the context so the critic's router sees this run's limits.
        await graph.aupdate_state(with_runtime_context(config, context), values, as_node="critic")
    record = RunRecord(
        run_id=new_run_id,
        group_id=original.group_id,
        requirement=original.requirement,
        out_dir=str(out.resolve()),
        parent_run=run_id,
        fork_step=step,
        settings=json.dumps(recorded_settings(context)),
    )
    return await _drive(
        None, record=record, context=context, db_path=Database.of(db_path), on_progress=on_progress, reviewer=reviewer
    )


def new_run_id_suffix() -> str:
    return new_run_id().rsplit("-", 1)[-1]
