"""A run's history read back from its checkpoints: one row per coder step, plus events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.steps import StepView


class HistoryRow(StepView):
    """A step as ``history`` shows it: the shared step view and the checkpoint to fork from."""

    checkpoint_id: str = Field(description="The checkpoint after this step's last node: fork from here.")


async def final_state(db_path: str | Path | Database, run_id: str) -> dict[str, Any]:
    """The run's latest checkpointed state (empty when the run has no checkpoints).

    Read from the checkpoint itself, so that remembering needs no graph: the saved channel values
    are the state (reducers already applied).
    """
    from webgen_agent.checkpoints.saver import open_checkpointer

    async with open_checkpointer(db_path, record_runs=False) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
    if found is None:
        return {}
    return {key: value for key, value in found.checkpoint["channel_values"].items() if not key.startswith("__")}


async def snapshots(graph: CompiledStateGraph[Any, Any, Any, Any], run_id: str) -> list[StateSnapshot]:
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
        rows.append(HistoryRow.of(step, checkpoint_id=snap.config["configurable"]["checkpoint_id"] if snap else ""))
    return rows


def events(history: list[StateSnapshot]) -> list[dict[str, Any]]:
    return list(history[-1].values.get("events", [])) if history else []
