"""One view of a step, shared by every reader (run.json, ``history``, the HTML report).

The step record itself (``core.state.Step``) is what the graph stores; this is what people and
programs read. Each derived fact (errored, role, scores, execution outcome, cost) is computed here
once, so the views cannot disagree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.core.costs import step_cost
from webgen_agent.core.state import Step
from webgen_agent.core.views import Grade


class StepView(BaseModel):
    """A coder step and what followed it, as shown to people and written to run.json."""

    index: int
    role: str = Field(
        description="generator, refiner, or import (step 0 of a run from a folder: the user's files, no model call)."
    )
    action: str = Field(description="edit, screenshot_validated, finish or malformed.")
    parent: int | None = Field(default=None, description="The step whose files and conversation this one built on.")
    summary: str = ""
    screenshot_score: Grade = Field(default=0, description="1-5; 0 when nothing rendered or it was not graded.")
    gui_score: Grade = Field(default=0, description="1-5; 0 when no GUI test ran.")
    gui_passed: bool | None = None
    errored: bool = False
    judge_error: str = Field(default="", description="Why the screenshot judge gave no usable answer (grade 0).")
    format_ok: bool = True
    replay: str = Field(
        default="", description="The recorded GUI tests replayed on the step's site, e.g. '2 passed, 1 failed'."
    )
    execution_ok: bool | None = Field(default=None, description="None when the step did not run the project.")
    execution_stage: str | None = None
    execution_error: str | None = Field(default=None, description="Why running the project failed.")
    timings: dict[str, float] = Field(default_factory=dict, description="node -> wall seconds")
    tokens: dict[str, dict[str, int]] = Field(default_factory=dict, description="node -> {input, output, calls}")
    cost: dict[str, float | None] = Field(
        default_factory=dict, description="node -> USD of its model calls; null when a price was unknown."
    )
    cost_usd: float | None = Field(default=0.0, description="The step's cost in USD; null when a price was unknown.")

    @classmethod
    def of(cls, step: Step, **extra: Any) -> Any:
        """The view of ``step``; subclasses pass their own fields in ``extra``."""
        return cls(**step_facts(step), **extra)

    @property
    def wall_seconds(self) -> float:
        return round(sum(self.timings.values()), 3)

    @property
    def total_tokens(self) -> int:
        return sum(t.get("input", 0) + t.get("output", 0) for t in self.tokens.values())


def step_facts(step: Step) -> dict[str, Any]:
    """The fields of ``StepView`` read from a step record."""
    execution = step.get("execution")
    return {
        "index": step["index"],
        "role": "import" if step.get("imported") else step["role"],
        "action": step["action"],
        "parent": step["parent"],
        "summary": step["summary"],
        "screenshot_score": step["screenshot_score"],
        "gui_score": step["gui_score"],
        "gui_passed": step["gui_passed"],
        "errored": step["errored"],
        "judge_error": step.get("judge_error", ""),
        "format_ok": step["format_ok"],
        "replay": replay_text(step),
        "execution_ok": execution["ok"] if execution else None,
        "execution_stage": execution["stage"] if execution else None,
        "execution_error": (execution["error"] or None) if execution and not execution["ok"] else None,
        "timings": dict(step["timings"]),
        "tokens": {node: dict(usage) for node, usage in step["tokens"].items()},
        "cost": dict(step.get("cost") or {}),
        "cost_usd": step_cost(step),
    }


def replay_text(step: Step) -> str:
    """The step's replay counts in words ('' when no recorded test was replayed)."""
    replay = step.get("replay")
    if not replay:
        return ""
    counts = [(replay["passed"], "passed"), (replay["failed"], "failed"), (replay["flaky"], "flaky")]
    counts.append((replay["unmatched"], "unmatched"))
    return ", ".join(f"{n} {word}" for n, word in counts if n)


def imported_start(steps: list[Step]) -> Step | None:
    """Step 0 of a run started from a folder (``run --from``): the user's files, not a model's reply."""
    return steps[0] if steps and steps[0].get("imported") else None
