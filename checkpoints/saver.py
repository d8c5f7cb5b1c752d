"""LangGraph's async SQLite checkpointer on the run database (WAL, so runs can share the file)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


@contextlib.asynccontextmanager
async def open_checkpointer(db_path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An AsyncSqliteSaver; must be opened inside the running event loop."""
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit: no write transaction stays open across an await, so the blob store's synchronous
    # writes on the event-loop thread can never wait on a lock this connection holds (a deadlock).
    conn = await aiosqlite.connect(str(path), timeout=60.0, isolation_level=None)
    try:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=60000")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        yield saver
    finally:
        await conn.close()
