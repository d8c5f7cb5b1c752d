"""Reading a recorded run from Python: its step history and the GUI tests it recorded.

Nothing here compiles the graph: a run is read from its checkpoints (``checkpoints/history.py``),
so ``history`` starts without the nodes, the model clients or the browser tools. ``graph/api.py``
offers these beside running, resuming and forking.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import HistoryRow, events, final_state, history_rows, read_history
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.names import DEFAULT_DB
from webgen_agent.tools.replay.views import RecordedTest


async def run_history(
    run_id: str, *, db_path: str | Path | Database = DEFAULT_DB
) -> tuple[list[HistoryRow], list[dict[str, Any]]]:
    """(one HistoryRow per coder step, the run's events) read from the checkpoints."""
    if await asyncio.to_thread(lambda: RunIndex(db_path).get(run_id)) is None:
        raise ValueError(f"no run {run_id} in {Database.of(db_path)}")
    history = await read_history(db_path, run_id)
    return history_rows(history), events(history)


async def recorded_tests(run_id: str, *, db_path: str | Path | Database = DEFAULT_DB) -> list[RecordedTest]:
    """The GUI tests the run recorded (tools/replay), as its final state lists them."""
    refs = (await final_state(db_path, run_id)).get("replay_tests") or []
    blobs = BlobStore(db_path)
    return [RecordedTest.model_validate(await blobs.aget_json(ref["hash"])) for ref in refs]
