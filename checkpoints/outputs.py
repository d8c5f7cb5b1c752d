"""The run's output folder: ``site/`` (chosen step's files), ``steps/<n>.png``, ``run.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import Event, Step


class StepSummary(BaseModel):
    index: int
    role: str
    action: str
    parent: int | None = None
    summary: str = ""
    screenshot_score: int = 0
    gui_score: int = 0
    gui_passed: bool | None = None
    errored: bool = False
    format_ok: bool = True
    execution_stage: str | None = None
    execution_error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict, description="node -> wall seconds")
    tokens: dict[str, dict[str, int]] = Field(default_factory=dict, description="node -> {input, output, calls}")

    @classmethod
    def of(cls, step: Step) -> StepSummary:
        execution = step.get("execution") or {}
        return cls(
            index=step["index"],
            role=step.get("role", "?"),
            action=step.get("action", "?"),
            parent=step.get("parent"),
            summary=step.get("summary", ""),
            screenshot_score=step.get("screenshot_score", 0),
            gui_score=step.get("gui_score", 0),
            gui_passed=step.get("gui_passed"),
            errored=step.get("errored", False),
            format_ok=step.get("format_ok", True),
            execution_stage=execution.get("stage"),
            execution_error=(execution.get("error") or None) if not execution.get("ok", True) else None,
            timings=step.get("timings", {}),
            tokens=step.get("tokens", {}),
        )


class RunSummary(BaseModel):
    run_id: str
    requirement: str
    status: str
    chosen_step: int | None
    steps: list[StepSummary]
    events: list[dict[str, Any]] = Field(default_factory=list)
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


def write_run_outputs(out_dir: Path, state: dict[str, Any], store: BlobStore) -> RunSummary:
    """Write screenshots and run.json (the site itself is written by finalize)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shots = out_dir / "steps"
    steps: list[Step] = state.get("steps", [])
    for step in steps:
        if step.get("screenshot"):
            shots.mkdir(exist_ok=True)
            target = shots / f"{step['index']}.png"
            if not target.exists():
                target.write_bytes(store.get(step["screenshot"]))
    summary = RunSummary.of(state)
    (out_dir / "run.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=2))
    return summary


def event_line(event: Event) -> str:
    target = event.get("target_step")
    where = f" -> step {target}" if target is not None else ""
    return f"{event.get('kind')} after step {event.get('after_step')}{where}: {event.get('reason', '')}"
