"""The run's output folder: ``site/`` (chosen step's files), ``steps/<n>.png``, ``run.json``.

Each image is written once: a page whose screenshot is already in ``steps/`` (the landing page is
the step's own screenshot; an unchanged page repeats an earlier step's) names that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.money import add_costs
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

    screenshot: str | None = Field(
        default=None, description="Its landing page's PNG, relative to the output folder (an earlier step's if equal)."
    )
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


class _ImageFiles:
    """The PNGs of one output folder, by blob hash: each written once, under the first name asked."""

    def __init__(self, out_dir: Path, store: BlobStore) -> None:
        self.out_dir = out_dir
        self.store = store
        self.written: dict[str, str] = {}

    def path_of(self, digest: str, name: str) -> str:
        """The file (relative to the output folder) holding the blob ``digest``, written as ``name`` if new."""
        if digest in self.written:
            return self.written[digest]
        target = self.out_dir / name
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(self.store.get(digest))
        self.written[digest] = name
        return name


def page_summaries(step: Step, images: _ImageFiles) -> list[PageSummary]:
    """The step's pages; a screenshot not written yet becomes ``steps/<step>-<n>.png`` (n = 0 the landing page)."""
    listed = step.get("pages")
    if not listed:
        return []
    pages = []
    for position, page in enumerate(images.store.get_json(listed)):
        shot = None
        if page.get("screenshot"):
            shot = images.path_of(page["screenshot"], f"steps/{step['index']}-{position}.png")
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
    images = _ImageFiles(out_dir, store)
    summary = RunSummary.of(state)
    summary.warnings = list(warnings or [])
    if status is not None:
        summary.status = status
    for view, step in zip(summary.steps, steps, strict=True):
        if screenshot := step.get("screenshot"):
            view.screenshot = images.path_of(screenshot, f"steps/{step['index']}.png")
    for view, step in zip(summary.steps, steps, strict=True):
        view.pages = page_summaries(step, images)
    (out_dir / "run.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=2))
    return summary


def add_run_warning(out_dir: str | Path, warning: str, *, replacing: str = "") -> bool:
    """Add ``warning`` to the warnings of the run.json in ``out_dir`` (after the run wrote it), in place
    of any that starts with ``replacing``; False when the folder has no run.json (the run wrote none)."""
    path = Path(out_dir) / "run.json"
    if not path.is_file():
        return False
    summary = json.loads(path.read_text())
    kept = [w for w in summary.get("warnings", []) if not (replacing and w.startswith(replacing))]
    summary["warnings"] = [*kept, warning]
    path.write_text(json.dumps(summary, indent=2))
    return True


def run_warnings(out_dir: str | Path) -> list[str]:
    """The warnings of the run.json in ``out_dir`` (none when it has none, or no readable run.json)."""
    try:
        return list(json.loads((Path(out_dir) / "run.json").read_text()).get("warnings", []))
    except (OSError, ValueError, AttributeError):
        return []


def event_line(event: Event) -> str:
    target = event.get("target_step")
    where = f" -> step {target}" if target is not None else ""
    return f"{event.get('kind')} after step {event.get('after_step')}{where}: {event.get('reason', '')}"
