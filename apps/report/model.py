"""What a run report shows, read back from the run's checkpoints, blobs and the runs table.

``load_report`` gathers everything into a ``RunReport`` (plain data, images as bytes);
``apps/report/html.py`` turns that into one self-contained HTML file. The final state comes
from the checkpoints (not ``run.json``), so a report can be made for any run in the database,
including one that failed or was interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.costs import add_costs
from webgen_agent.core.state import Step
from webgen_agent.core.steps import StepView
from webgen_agent.tools.gui_agent import GuiAction

REPORT_NAME = "report.html"


class NodeCost(BaseModel):
    node: str
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = 0.0


class GuiTest(BaseModel):
    """The GUI test credited to a step: verdict, the agent's actions and its last screenshot."""

    instruction: str = ""
    passed: bool | None = None
    score: int = 0
    suggestions: list[str] = Field(default_factory=list)
    actions: list[GuiAction] = Field(default_factory=list)
    final_answer: str | None = None
    stopped_reason: str = ""
    errors: list[str] = Field(default_factory=list)
    final_screenshot: bytes | None = None


class StepReport(StepView):
    """A step as the HTML report shows it: the shared step view plus what the report draws."""

    chosen: bool = False
    inherited: bool = Field(default=False, description="Taken over from the parent run of a fork.")
    problems: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    page_errors: list[str] = Field(default_factory=list, description="Console and uncaught page errors.")
    screenshot: bytes | None = None
    other_pages: list[tuple[str, bytes]] = Field(
        default_factory=list, description="(path, PNG) of the site's other captured pages."
    )
    checks: list[str] = Field(default_factory=list, description="Requirement checks: 'VERDICT task' each.")
    description: str = ""
    suggestions: list[str] = Field(default_factory=list)
    gui: GuiTest | None = None
    feedback: str | None = Field(default=None, description="The critic's message for the next Refiner turn.")
    nodes: list[NodeCost] = Field(default_factory=list)


class RelatedRun(BaseModel):
    """The parent of a fork, or a fork of this run."""

    run_id: str
    fork_step: int | None
    status: str
    report: str = Field(description="Where that run's report is written by default.")


class Totals(BaseModel):
    steps: int
    seconds: float
    input_tokens: int
    output_tokens: int
    model_calls: int
    cost_usd: float | None = Field(default=0.0, description="USD; None when a price was unknown.")


class RunReport(BaseModel):
    run_id: str
    requirement: str
    status: str
    chosen_step: int | None
    group_id: str = ""
    out_dir: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepReport]
    events: list[dict[str, Any]] = Field(default_factory=list)
    totals: Totals
    parent: RelatedRun | None = None
    forks: list[RelatedRun] = Field(default_factory=list)


def default_report_path(record: RunRecord | None, run_id: str) -> Path:
    """``<run folder>/report.html``, or ``report-<run id>.html`` here when the folder is unknown."""
    if record is not None and record.out_dir:
        return Path(record.out_dir) / REPORT_NAME
    return Path(f"report-{run_id}.html")


async def load_report(run_id: str, *, db_path: str | Path | Database) -> RunReport:
    """Everything the report shows; raises ValueError when the run is unknown."""
    database = Database.of(db_path)
    if not database.exists():
        raise ValueError(f"no database at {database}")
    runs = RunIndex(db_path)
    record = runs.get(run_id)
    state = await final_state(db_path, run_id)
    if not state.get("steps") and record is None:
        raise ValueError(f"no run {run_id} in {database}")
    store = BlobStore(db_path)
    try:
        return build_report(run_id, state, record, runs.list(), store)
    finally:
        store.close()


def build_report(
    run_id: str, state: dict[str, Any], record: RunRecord | None, all_runs: list[RunRecord], store: BlobStore
) -> RunReport:
    fork_step = record.fork_step if record is not None and record.parent_run else None
    chosen = state.get("chosen_step")
    steps = [step_report(step, store, chosen=chosen, fork_step=fork_step) for step in state.get("steps", [])]
    return RunReport(
        run_id=run_id,
        requirement=state.get("requirement") or (record.requirement if record else ""),
        status=_status(state, record),
        chosen_step=chosen,
        group_id=state.get("group_id") or (record.group_id if record else ""),
        out_dir=state.get("out_dir") or (record.out_dir if record else ""),
        settings=_settings(record),
        steps=steps,
        events=[dict(e) for e in state.get("events", [])],
        totals=totals(steps),
        parent=_parent(record, all_runs),
        forks=[_related(r) for r in all_runs if r.parent_run == run_id],
    )


def _status(state: dict[str, Any], record: RunRecord | None) -> str:
    # The runs table knows about failures and interruptions; the state only about finishing.
    if record is not None and record.status != "running":
        return record.status
    return state.get("status") or (record.status if record else "unknown")


def _settings(record: RunRecord | None) -> dict[str, Any]:
    if record is None:
        return {}
    try:
        return dict(json.loads(record.settings or "{}"))
    except ValueError:
        return {}


def _related(record: RunRecord) -> RelatedRun:
    return RelatedRun(
        run_id=record.run_id,
        fork_step=record.fork_step,
        status=record.status,
        report=str(default_report_path(record, record.run_id)),
    )


def _parent(record: RunRecord | None, all_runs: list[RunRecord]) -> RelatedRun | None:
    if record is None or not record.parent_run:
        return None
    parent = next((r for r in all_runs if r.run_id == record.parent_run), None)
    if parent is None:
        return RelatedRun(run_id=record.parent_run, fork_step=record.fork_step, status="missing", report="")
    return _related(parent).model_copy(update={"fork_step": record.fork_step})


def step_report(step: Step, store: BlobStore, *, chosen: int | None, fork_step: int | None) -> StepReport:
    page = _json_blob(store, step.get("page")) or {}
    return StepReport.of(
        step,
        chosen=step["index"] == chosen,
        inherited=fork_step is not None and step["index"] <= fork_step,
        problems=list(step["problems"] or []),
        changed=list(step.get("changed") or []),
        page_errors=[*page.get("page_errors", []), *page.get("console_errors", [])],
        screenshot=_bytes_blob(store, step.get("screenshot")),
        other_pages=[
            (p["path"], store.get(p["screenshot"]))
            for p in (_json_blob(store, step.get("pages")) or [])[1:]
            if p.get("screenshot")
        ],
        checks=[f"{c['verdict']} {c['task']}" for c in _json_blob(store, step.get("checks")) or []],
        description=step.get("description", ""),
        suggestions=list(step.get("suggestions") or []),
        gui=gui_test(step, store),
        feedback=_text_blob(store, step.get("feedback")),
        nodes=node_costs(step),
    )


def gui_test(step: Step, store: BlobStore) -> GuiTest | None:
    if step["gui_passed"] is None and not step.get("gui_run"):
        return None
    run = _json_blob(store, step.get("gui_run")) or {}
    return GuiTest(
        instruction=run.get("instruction", ""),
        passed=step["gui_passed"],
        score=step["gui_score"],
        suggestions=list(step.get("gui_suggestions") or []),
        actions=[GuiAction.model_validate(a) for a in run.get("actions", [])],
        final_answer=run.get("final_answer"),
        stopped_reason=run.get("stopped_reason", ""),
        errors=list(run.get("errors", [])),
        final_screenshot=_bytes_blob(store, run.get("final_screenshot")),
    )


def node_costs(step: Step) -> list[NodeCost]:
    timings = step["timings"] or {}
    tokens = step["tokens"] or {}
    costs = step.get("cost") or {}
    return [
        NodeCost(
            node=node,
            seconds=timings.get(node, 0.0),
            input_tokens=tokens.get(node, {}).get("input", 0),
            output_tokens=tokens.get(node, {}).get("output", 0),
            calls=tokens.get(node, {}).get("calls", 0),
            # No cost beside tokens: recorded before costs were, unknown.
            cost_usd=costs[node] if node in costs else (None if _used(tokens.get(node)) else 0.0),
        )
        for node in [*timings, *(n for n in tokens if n not in timings)]
    ]


def _used(usage: dict[str, int] | None) -> bool:
    return bool(usage and usage.get("input", 0) + usage.get("output", 0))


def totals(steps: list[StepReport]) -> Totals:
    nodes = [n for s in steps for n in s.nodes]
    return Totals(
        steps=len(steps),
        seconds=round(sum(n.seconds for n in nodes), 3),
        input_tokens=sum(n.input_tokens for n in nodes),
        output_tokens=sum(n.output_tokens for n in nodes),
        model_calls=sum(n.calls for n in nodes),
        cost_usd=add_costs(s.cost_usd for s in steps),
    )


# A report must still render when a blob is missing (a database copied without its blobs table,
# a run killed mid-write): show what is there.
def _bytes_blob(store: BlobStore, digest: str | None) -> bytes | None:
    if not digest:
        return None
    try:
        return store.get(digest)
    except KeyError:
        return None


def _text_blob(store: BlobStore, digest: str | None) -> str | None:
    data = _bytes_blob(store, digest)
    return data.decode("utf-8", errors="replace") if data is not None else None


def _json_blob(store: BlobStore, digest: str | None) -> Any:
    text = _text_blob(store, digest)
    return json.loads(text) if text else None
