"""What a run report shows, read back from the run's checkpoints, blobs and the runs table.

``load_report`` gathers everything into a ``RunReport`` (plain data, images as bytes);
``apps/report/html.py`` turns that into one self-contained HTML file. The final state comes
from the checkpoints (not ``run.json``), so a report can be made for any run in the database,
including one that failed or was interrupted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.money import add_costs
from webgen_agent.core.state import Step
from webgen_agent.core.steps import StepView
from webgen_agent.core.views import Grade
from webgen_agent.tools.gui_agent import GuiAction
from webgen_agent.tools.replay.spec import spec_js
from webgen_agent.tools.replay.views import RecordedTest

REPORT_NAME = "report.html"


class NodeCost(BaseModel):
    node: str
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = 0.0


class GuiFrame(BaseModel):
    """One agent step of a GUI test: the page it saw (a small JPEG) and the actions it took there."""

    step: int
    url: str = ""
    image: bytes | None = None
    actions: list[GuiAction] = Field(default_factory=list)


class GuiTest(BaseModel):
    """The GUI test credited to a step: verdict, the agent's actions and its last screenshot."""

    instruction: str = ""
    passed: bool | None = None
    score: Grade = 0
    suggestions: list[str] = Field(default_factory=list)
    actions: list[GuiAction] = Field(default_factory=list)
    final_answer: str | None = None
    stopped_reason: str = ""
    errors: list[str] = Field(default_factory=list)
    final_screenshot: bytes | None = None
    frames: list[GuiFrame] = Field(
        default_factory=list, description="Per agent step (empty for runs recorded before frames were kept)."
    )


class FileChange(BaseModel):
    """One changed file of a step: its text before and after (the diff is drawn from these)."""

    path: str
    status: Literal["added", "modified", "deleted"]
    before: str = ""
    after: str = ""
    binary: bool = Field(default=False, description="Not UTF-8 text: only the sizes are shown.")
    bytes_before: int = 0
    bytes_after: int = 0


class ReplayLine(BaseModel):
    """One recorded test replayed on a step's site."""

    test: str
    status: str
    detail: str = Field(default="", description="Where and how it failed.")
    screenshot: bytes | None = Field(default=None, description="The page when it failed.")


class RecordedSpec(BaseModel):
    """A GUI test the run recorded, as the Playwright spec ``ship`` writes."""

    name: str
    recorded_at_step: int
    covers_all: bool
    spec: str


class StepReport(StepView):
    """A step as the HTML report shows it: the shared step view plus what the report draws."""

    chosen: bool = False
    inherited: bool = Field(default=False, description="Taken over from the parent run of a fork.")
    problems: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    changes: list[FileChange] = Field(default_factory=list, description="The changed files' contents.")
    base_known: bool = Field(
        default=True, description="False when the files the edit was applied to are not recorded (diffed to nothing)."
    )
    reply: str | None = Field(default=None, description="The coder's reply text.")
    visible_error: str = Field(default="", description="An error the judge read off the screenshot.")
    gui_error: str = Field(default="", description="Why the GUI test could not run or be summarised.")
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
    replays: list[ReplayLine] = Field(default_factory=list, description="The recorded GUI tests replayed on the step.")


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
    recorded_tests: list[RecordedSpec] = Field(default_factory=list)


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
    recorded = state.get("steps", [])
    steps = [step_report(step, store, chosen=chosen, fork_step=fork_step, steps=recorded) for step in recorded]
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
        recorded_tests=recorded_specs(state, store),
    )


def recorded_specs(state: dict[str, Any], store: BlobStore) -> list[RecordedSpec]:
    specs = []
    for ref in state.get("replay_tests") or []:
        test = RecordedTest.model_validate(_json_blob(store, ref["hash"]) or {})
        specs.append(
            RecordedSpec(
                name=test.name, recorded_at_step=test.recorded_at_step, covers_all=test.covers_all, spec=spec_js(test)
            )
        )
    return specs


def replay_lines(step: Step, store: BlobStore) -> list[ReplayLine]:
    replay = step.get("replay")
    lines = []
    for record in (_json_blob(store, replay["verdicts"]) or []) if replay else []:
        detail = f"at {record['failed_action']}: {record['error']}" if record.get("failed_action") else ""
        shot = _bytes_blob(store, record.get("screenshot"))
        lines.append(ReplayLine(test=record["test"], status=record["status"], detail=detail, screenshot=shot))
    return lines


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


def step_report(
    step: Step, store: BlobStore, *, chosen: int | None, fork_step: int | None, steps: Sequence[Step] = ()
) -> StepReport:
    page = _json_blob(store, step.get("page")) or {}
    base, base_known = base_files(step, steps)
    return StepReport.of(
        step,
        chosen=step["index"] == chosen,
        inherited=fork_step is not None and step["index"] <= fork_step,
        problems=list(step["problems"] or []),
        changed=list(step.get("changed") or []),
        changes=file_changes(step, base, store),
        base_known=base_known,
        reply=_text_blob(store, step.get("completion")),
        visible_error=step.get("visible_error", ""),
        gui_error=step.get("gui_error", ""),
        page_errors=[*page.get("page_errors", []), *page.get("console_errors", [])],
        replays=replay_lines(step, store),
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
        frames=gui_frames(run, store),
    )


def gui_frames(run: dict[str, Any], store: BlobStore) -> list[GuiFrame]:
    """The agent's steps, each with the page it saw and the actions it took there."""
    actions = [GuiAction.model_validate(a) for a in run.get("actions", [])]
    return [
        GuiFrame(
            step=frame["step"],
            url=frame.get("url", ""),
            image=_bytes_blob(store, frame.get("screenshot")),
            actions=[a for a in actions if a.step == frame["step"]],
        )
        for frame in run.get("frames", [])
    ]


def base_files(step: Step, steps: Sequence[Step]) -> tuple[str | None, bool]:
    """The manifest the step's edit was applied to, and whether it is known.

    Recorded by the executor; for runs recorded before that, the parent's files (which the edit
    was applied to unless the parent's own edit was refused), and nothing for a first step.
    """
    if "base_files" in step:
        return step.get("base_files"), True
    parent = step["parent"]
    if parent is None:
        return None, False
    by_index = {s["index"]: s for s in steps}
    while parent is not None and parent in by_index and not by_index[parent].get("files"):
        parent = by_index[parent]["parent"]  # a control or malformed step stands for its parent's files
    return (by_index[parent].get("files") if parent in by_index else None), parent in by_index


def file_changes(step: Step, base: str | None, store: BlobStore) -> list[FileChange]:
    """Each changed file's text before and after the step's edit."""
    changed = list(step.get("changed") or [])
    if not changed:
        return []
    before = _manifest(store, base)
    after = _manifest(store, step.get("files"))
    return [_file_change(path, before.get(path), after.get(path), store) for path in changed]


def _file_change(path: str, before_hash: str | None, after_hash: str | None, store: BlobStore) -> FileChange:
    old = _bytes_blob(store, before_hash) or b""
    new = _bytes_blob(store, after_hash) or b""
    status: Literal["added", "modified", "deleted"] = (
        "added" if before_hash is None else "deleted" if after_hash is None else "modified"
    )
    texts = [_text_or_none(old), _text_or_none(new)]
    if texts[0] is None or texts[1] is None:
        return FileChange(path=path, status=status, binary=True, bytes_before=len(old), bytes_after=len(new))
    return FileChange(
        path=path, status=status, before=texts[0], after=texts[1], bytes_before=len(old), bytes_after=len(new)
    )


def _text_or_none(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _manifest(store: BlobStore, digest: str | None) -> dict[str, str]:
    if not digest:
        return {}
    try:
        return store.manifest(digest)
    except KeyError:
        return {}


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
