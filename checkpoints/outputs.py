"""The run's output folder: ``site/`` (chosen step's files), ``steps/<n>.png``, ``run.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import Event, Step
from webgen_agent.core.steps import StepView


class StepSummary(StepView):
    """A step as run.json lists it (the shared step view)."""


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
        )


def write_run_outputs(
    out_dir: Path, state: dict[str, Any], store: BlobStore, *, warnings: list[str] | None = None
) -> RunSummary:
    """Write screenshots and run.json (the site itself is written by finalize)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shots = out_dir / "steps"
    steps: list[Step] = state.get("steps", [])
    for step in steps:
        if screenshot := step.get("screenshot"):
            shots.mkdir(exist_ok=True)
            target = shots / f"{step['index']}.png"
            if not target.exists():
                target.write_bytes(store.get(screenshot))
    summary = RunSummary.of(state)
    summary.warnings = list(warnings or [])
    (out_dir / "run.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=2))
    return summary


def event_line(event: Event) -> str:
    target = event.get("target_step")
    where = f" -> step {target}" if target is not None else ""
    return f"{event.get('kind')} after step {event.get('after_step')}{where}: {event.get('reason', '')}"
