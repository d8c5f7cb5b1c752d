"""A run's history read back from its checkpoints: one row per coder step, plus events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import BaseModel, Field


class HistoryRow(BaseModel):
    step: int
    role: str
    action: str
    parent: int | None
    screenshot_score: int
    gui_score: int
    gui_passed: bool | None
    errored: bool
    checkpoint_id: str = Field(description="The checkpoint after this step's last node: fork from here.")
    wall_seconds: float
    tokens: int
    summary: str


async def final_state(db_path: str | Path, run_id: str) -> dict[str, Any]:
    """The run's latest checkpointed state (empty when the run has no checkpoints).

    Read from the checkpoint itself, so that remembering needs no graph: the saved channel values
    are the state (reducers already applied).
    """
    from webgen_agent.checkpoints.saver import open_checkpointer

    async with open_checkpointer(db_path) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
    if found is None:
        return {}
    return {key: value for key, value in found.checkpoint["channel_values"].items() if not key.startswith("__")}


async def snapshots(graph: CompiledStateGraph, run_id: str) -> list[StateSnapshot]:
    """Every checkpoint of the run, oldest first."""
    found = [s async for s in graph.aget_state_history({"configurable": {"thread_id": run_id}})]
    found.reverse()
    return found


def step_checkpoints(history: list[StateSnapshot]) -> dict[int, StateSnapshot]:
    """Step index -> the last checkpoint taken while that step was the current one."""
    latest: dict[int, StateSnapshot] = {}
    for snap in history:
        current = snap.values.get("current")
        if current is not None:
            latest[current] = snap
    return latest


def history_rows(history: list[StateSnapshot]) -> list[HistoryRow]:
    if not history:
        return []
    final = history[-1].values
    by_step = step_checkpoints(history)
    rows = []
    for step in final.get("steps", []):
        snap = by_step.get(step["index"])
        rows.append(
            HistoryRow(
                step=step["index"],
                role=step.get("role", "?"),
                action=step.get("action", "?"),
                parent=step.get("parent"),
                screenshot_score=step.get("screenshot_score", 0),
                gui_score=step.get("gui_score", 0),
                gui_passed=step.get("gui_passed"),
                errored=step.get("errored", False),
                checkpoint_id=snap.config["configurable"]["checkpoint_id"] if snap else "",
                wall_seconds=round(sum(step.get("timings", {}).values()), 2),
                tokens=sum(t.get("input", 0) + t.get("output", 0) for t in step.get("tokens", {}).values()),
                summary=step.get("summary", ""),
            )
        )
    return rows


def events(history: list[StateSnapshot]) -> list[dict[str, Any]]:
    return list(history[-1].values.get("events", [])) if history else []
