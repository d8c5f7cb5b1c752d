"""The runs table kept by the checkpointer itself, for runs that no ``run_requirement`` drives.

The CLI and the Python API record a run in the ``runs`` table around the graph (``graph/api.py``).
A thread run by LangGraph's server (``langgraph dev``, Studio, ``langgraph_sdk``, ``RemoteGraph``)
has no such driver: the server only calls the graph and its checkpointer. So the server's
checkpointer (``open_checkpointer(..., record_runs=True)``) keeps the thread's row itself, from
what it saves anyway: every top-level checkpoint updates the row (requirement, folder, status,
steps, chosen step and its scores, tokens and cost; ``budget`` when the run paused at its budget),
a node's error marks the run ``failed`` and a review interrupt marks it ``review``. The row's process is the server's, so a thread left running when the server
died reads ``interrupted``, as a killed CLI run does. ``runs``, ``history``, ``report``, ``fork``
and ``resume`` then work on server threads as on CLI runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.pregel import ERROR_CHANNEL, INTERRUPT_CHANNEL, waits_before
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.core.costs import spent

_FINAL_STATUSES = ("finished", "rejected")  # what the graph's own state says at its end
# A run whose budget is spent pauses before this node (graph/builder.py).
_BUDGET_NODE = "budget"


def row_fields(values: dict[str, Any], status: str | None = None) -> dict[str, Any]:
    """The runs-table row a run's state tells: the one place it is computed (while a run goes, for
    each checkpoint; at its end, by the embedding API with the ``status`` it settled on). Without
    ``status``: ``running`` until the graph ends."""
    steps = values.get("steps") or []
    chosen = values.get("chosen_step")
    best = steps[chosen] if isinstance(chosen, int) and 0 <= chosen < len(steps) else {}
    if status is None:
        ended = values.get("status")
        status = ended if ended in _FINAL_STATUSES else "budget" if waits_before(values, _BUDGET_NODE) else "running"
    usd, tokens = spent(steps)
    fields: dict[str, Any] = {
        "status": status,
        "cost_usd": usd,
        "tokens": tokens,
        "steps": len(steps),
        "chosen_step": chosen,
        "best_screenshot": best.get("screenshot_score") or 0,
        "best_gui": best.get("gui_score") or 0,
        "error": "",
    }
    for key in ("requirement", "out_dir", "group_id"):
        if values.get(key):
            fields[key] = values[key]
    return fields


class RecordsRuns:
    """Mixin for a LangGraph checkpointer: keep the runs table row of each thread it saves."""

    runs_database: Database

    def record_runs_in(self, database: Database) -> None:
        self.runs_database = database
        self._runs: RunIndex | None = None
        self._recorded: set[str] = set()  # threads whose row names this process
        # A thread's first checkpoint and its task's error are recorded concurrently: one claim each,
        # else both see no row, and the second insert overwrites the first's fields (its group).
        self._claiming = threading.Lock()
        # thread -> (checkpoint id, status fields) of a failure or review stop. LangGraph saves a
        # checkpoint and the writes of the task run from it concurrently, so a checkpoint saved
        # after its task's error must not turn the run back to running; a later checkpoint does.
        self._stopped: dict[str, tuple[str, dict[str, Any]]] = {}

    async def _index(self) -> RunIndex:
        if self._runs is None:
            self._runs = await asyncio.to_thread(RunIndex, self.runs_database)
        return self._runs

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        saved = await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        where = config.get("configurable", {})
        if not where.get("checkpoint_ns"):  # the graph itself, not a subgraph of it
            thread_id = str(where["thread_id"])
            fields = row_fields(dict(checkpoint["channel_values"]))
            stopped = self._stopped.get(thread_id)
            if stopped is not None and checkpoint["id"] <= stopped[0]:  # ids grow with time
                fields.update(stopped[1])
            else:
                self._stopped.pop(thread_id, None)
            await self._record(thread_id, fields)
        return saved

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        where = config.get("configurable", {})
        if where.get("checkpoint_ns"):
            return
        for channel, value in writes:
            if channel == ERROR_CHANNEL:
                stop = {"status": "failed", "error": str(value)[:2000]}
            elif channel == INTERRUPT_CHANNEL and _is_review(value):
                stop = {"status": "review", "error": ""}
            else:
                continue
            thread_id = str(where["thread_id"])
            self._stopped[thread_id] = (str(where.get("checkpoint_id", "")), stop)
            await self._record(thread_id, stop)

    async def _record(self, thread_id: str, fields: dict[str, Any]) -> None:
        runs = await self._index()
        if thread_id not in self._recorded:
            await asyncio.to_thread(self._claim_once, runs, thread_id, fields)
        await runs.aupdate(thread_id, **fields)

    def _claim_once(self, runs: RunIndex, thread_id: str, fields: dict[str, Any]) -> None:
        with self._claiming:  # a lock of threads: the saver may serve several event loops
            if thread_id not in self._recorded:
                _claim(runs, thread_id, fields)
                self._recorded.add(thread_id)


def _claim(runs: RunIndex, thread_id: str, fields: dict[str, Any]) -> None:
    """Create the thread's row, or make an existing one name this process (a new run on the thread)."""
    if runs.get(thread_id) is None:
        record = RunRecord(
            run_id=thread_id,
            requirement=fields.get("requirement", ""),
            out_dir=fields.get("out_dir", ""),
            group_id=fields.get("group_id", ""),
        )
        runs.start(record)
    else:
        runs.claim(thread_id)


def _is_review(value: Any) -> bool:
    interrupts = value if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(getattr(i, "value", None), dict) and i.value.get("kind") == "review" for i in interrupts)
