"""The run's output folder: ``site/`` (chosen step's files), ``steps/<n>.png``, ``run.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.costs import add_costs
from webgen_agent.core.state import Event, Step
from webgen_agent.core.steps import StepView


class PageSummary(BaseModel):
    """One captured page of a step, as run.json lists it."""

    path: str = Field(description="The page's path on the site, e.g. / or /menu.")
    title: str = ""
    screenshot: str | None = Field(default=None, description="Its PNG, relative to the output folder.")
    render_error: str | None = Field(default=None, description="Why it did not render, when it did not.")


class StepSummary(StepView):
    """A step as run.json lists it (the shared step view), with every page captured for it."""

    pages: list[PageSummary] = Field(default_factory=list, description="Landing page first.")


class RunSummary(BaseModel):
    run_id: str
    requirement: str
    status: str
    chosen_step: int | None
    steps: list[StepSummary]
    events: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list, description="E.g. that generated code ran unconfined.")
    wall_seconds: float = Field(description="Sum of node wall times over all steps.")
    input_tokens: int
    output_tokens: int
    model_calls: int
    cost_usd: float | None = Field(default=0.0, description="USD of every model call; null when a price was unknown.")

    @classmethod
    def of(cls, state: dict[str, Any]) -> RunSummary:
        steps = [StepSummary.of(s) for s in state.get("steps", [])]
        tokens = [t for s in steps for t in s.tokens.values()]
        return cls(
            run_id=state.get("run_id", ""),
            requirement=state.get("requirement", ""),
            status=state.get("status", "running"),
            chosen_step=state.get("chosen_step"),
            steps=steps,
            events=[dict(e) for e in state.get("events", [])],
            wall_seconds=round(sum(sum(s.timings.values()) for s in steps), 3),
            input_tokens=sum(t.get("input", 0) for t in tokens),
            output_tokens=sum(t.get("output", 0) for t in tokens),
            model_calls=sum(t.get("calls", 0) for t in tokens),
            cost_usd=add_costs(s.cost_usd for s in steps),
        )


def _write_png(store: BlobStore, digest: str, target: Path) -> None:
    if not target.exists():
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(store.get(digest))


def page_summaries(out_dir: Path, step: Step, store: BlobStore) -> list[PageSummary]:
    """The step's pages, their screenshots written as ``steps/<step>-<n>.png`` (n = 0 the landing page)."""
    listed = step.get("pages")
    if not listed:
        return []
    pages = []
    for position, page in enumerate(store.get_json(listed)):
        shot = None
        if page.get("screenshot"):
            shot = f"steps/{step['index']}-{position}.png"
            _write_png(store, page["screenshot"], out_dir / shot)
        pages.append(
            PageSummary(
                path=page["path"], title=page.get("title", ""), screenshot=shot, render_error=page.get("render_error")
            )
        )
    return pages


def write_run_outputs(
    out_dir: Path,
    state: dict[str, Any],
    store: BlobStore,
    *,
    warnings: list[str] | None = None,
    status: str | None = None,
) -> RunSummary:
    """Write screenshots and run.json (the site itself is written by finalize); ``status`` overrides
    the state's (a run stopped at its budget is still "running" in its state)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    steps: list[Step] = state.get("steps", [])
    for step in steps:
        if screenshot := step.get("screenshot"):
            _write_png(store, screenshot, out_dir / "steps" / f"{step['index']}.png")
    summary = RunSummary.of(state)
    summary.warnings = list(warnings or [])
    if status is not None:
        summary.status = status
    for view, step in zip(summary.steps, steps, strict=True):
        view.pages = page_summaries(out_dir, step, store)
    (out_dir / "run.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=2))
    return summary


def event_line(event: Event) -> str:
    target = event.get("target_step")
    where = f" -> step {target}" if target is not None else ""
    return f"{event.get('kind')} after step {event.get('after_step')}{where}: {event.get('reason', '')}"
