"""Deleting a run's checkpoints and pruning threads: what ``langgraph dev`` / the LangGraph server
call on a custom checkpointer (rollback of a cancelled run, thread pruning). Without them it warns
that storage grows without bound and a rolled-back run's checkpoints stay in the thread.

The checkpoint rows go; their blobs stay in the content-addressed store, which other checkpoints
(of this thread or another) may share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

PRUNE_STRATEGIES = ("keep_latest", "delete")


def check_prune_arguments(thread_ids: Sequence[str], strategy: str) -> list[str]:
    """The thread ids as strings; LangGraph's own savers refuse a bare string and unknown strategies."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r}")
    return [str(thread_id) for thread_id in thread_ids]


class SyncRetention:
    """The sync forms, run on the saver's loop from another thread (as LangGraph's async savers do)."""

    # Declared only (a definition here would shadow the saver's own in the method order).
    loop: asyncio.AbstractEventLoop
    adelete_for_runs: Callable[..., Coroutine[Any, Any, None]]
    aprune: Callable[..., Coroutine[Any, Any, None]]

    def _on_loop(self, call: Coroutine[Any, Any, None]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            call.close()
            raise asyncio.InvalidStateError("sync checkpointer calls are for other threads; await the async form")
        asyncio.run_coroutine_threadsafe(call, self.loop).result()

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._on_loop(self.adelete_for_runs(run_ids))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._on_loop(self.aprune(thread_ids, strategy=strategy))


class SqliteRetention(SyncRetention):
    """``adelete_for_runs`` and ``aprune`` on LangGraph's SQLite tables (``checkpoints``, ``writes``)."""

    conn: Any
    lock: asyncio.Lock
    setup: Callable[[], Coroutine[Any, Any, None]]

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Every checkpoint whose metadata names one of ``run_ids`` (the server puts the run id
        there), and the writes made from them."""
        ids = [str(run_id) for run_id in run_ids]
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        chosen = f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})"
        await self._delete(chosen, ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``delete``: the threads' checkpoints and writes; ``keep_latest``: all but the newest
        checkpoint of each namespace (ids grow with time) and the writes made from them."""
        threads = check_prune_arguments(thread_ids, strategy)
        if not threads:
            return
        marks = ",".join("?" * len(threads))
        chosen = f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id IN ({marks})"
        if strategy == "keep_latest":
            chosen += (
                " AND checkpoint_id < (SELECT MAX(newest.checkpoint_id) FROM checkpoints AS newest"
                " WHERE newest.thread_id = checkpoints.thread_id AND newest.checkpoint_ns = checkpoints.checkpoint_ns)"
            )
        await self._delete(chosen, threads)

    async def _delete(self, chosen: str, parameters: list[str]) -> None:
        """Deletes the checkpoints ``chosen`` selects and their writes, in one transaction."""
        await self.setup()
        async with self.lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                await self.conn.execute(
                    f"DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})", parameters
                )
                await self.conn.execute(
                    f"DELETE FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})",
                    parameters,
                )
            except BaseException:
                await self.conn.rollback()
                raise
            await self.conn.commit()


class PostgresRetention(SyncRetention):
    """``adelete_for_runs`` on LangGraph's PostgreSQL tables (its saver has ``aprune`` already)."""

    _cursor: Callable[..., Any]

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = [str(run_id) for run_id in run_ids]
        if not ids:
            return
        chosen = "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE metadata->>'run_id' = ANY(%s)"
        async with self._cursor() as cur, cur.connection.transaction():
            await cur.execute(
                f"DELETE FROM checkpoint_writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})", [ids]
            )
            await cur.execute(
                f"DELETE FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ({chosen})", [ids]
            )
