"""A run's history read back from its checkpoints: one row per coder step, plus events.

Read from the checkpointer alone: the saved channel values are the state (reducers already
applied), so reading a run compiles no graph, and ``history``, ``report`` and ``fork`` import
neither the nodes nor the model clients to do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.state import AgentState
from webgen_agent.core.steps import StepView

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver

# The graph's state channels: the rest of a checkpoint's channels are LangGraph's own bookkeeping
# (``__start__``, ``branch:to:<node>``), which ``graph.aget_state`` leaves out of a snapshot too.
_STATE_KEYS = frozenset(AgentState.__annotations__)


class HistoryRow(StepView):
    """A step as ``history`` shows it: the shared step view and the checkpoint to fork from."""

    checkpoint_id: str = Field(description="The checkpoint after this step's last node: fork from here.")


@dataclass(frozen=True)
class SavedState:
    """One checkpoint of a run: its id and the run's state in it (``StateSnapshot.values``)."""

    checkpoint_id: str
    values: dict[str, Any]


def state_values(channel_values: Mapping[str, Any]) -> dict[str, Any]:
    """The state fields among a checkpoint's channel values."""
    return {key: value for key, value in channel_values.items() if key in _STATE_KEYS}


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


async def saved_states(saver: BaseCheckpointSaver[Any], run_id: str) -> list[SavedState]:
    """Every checkpoint of the run's graph, oldest first: what ``graph.aget_state_history`` lists
    (the top-level namespace, no pending writes applied), without a graph."""
    config: RunnableConfig = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    found = [
        SavedState(saved.config["configurable"]["checkpoint_id"], state_values(saved.checkpoint["channel_values"]))
        async for saved in saver.alist(config)
    ]
    found.reverse()  # the saver lists newest first
    return found


async def read_history(db_path: str | Path | Database, run_id: str) -> list[SavedState]:
    """``saved_states`` of a run in the database at ``db_path``."""
    from webgen_agent.checkpoints.saver import open_checkpointer

    async with open_checkpointer(db_path, record_runs=False) as saver:
        return await saved_states(saver, run_id)


def step_checkpoints(history: list[SavedState]) -> dict[int, SavedState]:
    """Step index -> the last checkpoint taken while that step was the current one."""
    latest: dict[int, SavedState] = {}
    for saved in history:
        current = saved.values.get("current")
        if current is not None:
            latest[current] = saved
    return latest


def history_rows(history: list[SavedState]) -> list[HistoryRow]:
    if not history:
        return []
    final = history[-1].values
    by_step = step_checkpoints(history)
    rows = []
    for step in final.get("steps", []):
        saved = by_step.get(step["index"])
        rows.append(HistoryRow.of(step, checkpoint_id=saved.checkpoint_id if saved else ""))
    return rows


def events(history: list[SavedState]) -> list[dict[str, Any]]:
    return list(history[-1].values.get("events", [])) if history else []
