"""LangGraph's PostgreSQL checkpointer for the run database (the ``[postgres]`` extra).

Imported only for a ``postgresql://`` database, so that SQLite users need neither psycopg nor
langgraph-checkpoint-postgres.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import errors
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from webgen_agent.checkpoints.database import POOL_WAIT_S, SCHEMA_LOCK_KEY, Database, mark_reached, open_timeout
from webgen_agent.checkpoints.outage import WaitsOutOutages, apatiently
from webgen_agent.checkpoints.recording import RecordsRuns
from webgen_agent.checkpoints.retention import PostgresRetention
from webgen_agent.checkpoints.secrets import KeepsNoSecrets
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.errors import ConfigError


class ContentPostgresSaver(WaitsOutOutages, PostgresRetention, KeepsNoSecrets, AsyncPostgresSaver):
    """LangGraph's PostgreSQL checkpointer with the content-addressed serializer.

    On a psycopg pool (LangGraph's saver takes one) that checks each connection before lending it:
    a server restart or a dropped connection costs a retry on a fresh connection, and the writes and
    reads wait out an outage for the database patience (``checkpoints/outage.py``).

    The stock saver already runs the serializer's writes in a thread; its reads run on the event
    loop, where a blob-store miss would wait for the server: they are made in a thread first, so
    the stock decoding finds every value in the serializer's cache. A task's writes are atomic
    already: they go in one pipeline, one implicit transaction up to its Sync.
    """

    async def _load_checkpoint_tuple(self, value: Any) -> CheckpointTuple:
        await asyncio.to_thread(self._load_blobs, value["channel_values"])
        return await super()._load_checkpoint_tuple(value)


class RecordingPostgresSaver(RecordsRuns, ContentPostgresSaver):
    """The PostgreSQL saver that also keeps the runs table (``checkpoints/recording.py``)."""


@contextlib.asynccontextmanager
async def open_postgres_checkpointer(
    database: Database, serde: Callable[[BlobStore], SerializerProtocol], *, record_runs: bool = False
) -> AsyncIterator[ContentPostgresSaver]:
    """The saver on its own small pool, its tables created (once, under the schema lock)."""
    store = await asyncio.to_thread(BlobStore, database)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database.url,
        min_size=1,
        max_size=2,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
        check=AsyncConnectionPool.check_connection,
        timeout=POOL_WAIT_S,
        name="webgen-checkpoints",
    )
    try:
        try:
            await pool.open(wait=True, timeout=open_timeout(database.url))
        except Exception as exc:
            raise ConfigError(f"cannot connect to {database}: {str(exc).strip()[:300]}") from exc
        mark_reached(database.url)
        saver = (RecordingPostgresSaver if record_runs else ContentPostgresSaver)(pool, serde=serde(store))
        saver.where = database
        if isinstance(saver, RecordsRuns):
            saver.record_runs_in(database)

        async def ready() -> None:
            async with pool.connection() as conn:
                if not await _postgres_ready(conn, len(saver.MIGRATIONS) - 1):
                    await _with_async_schema_lock(conn, saver.setup)

        await apatiently(database, ready)
        yield saver
    finally:
        await pool.close()
        store.close()


async def _postgres_ready(conn: Any, latest: int) -> bool:
    """Whether LangGraph's tables exist at their latest migration (then setup is skipped)."""
    try:
        cursor = await conn.execute("SELECT MAX(v) AS v FROM checkpoint_migrations")
    except errors.UndefinedTable:
        return False
    row = await cursor.fetchone()
    return row is not None and row["v"] == latest


async def _with_async_schema_lock(conn: Any, change: Callable[[], Awaitable[None]]) -> None:
    """``database.with_schema_lock`` for an async connection, polled for the same reason: a session
    waiting inside ``pg_advisory_lock`` runs a statement, which the lock holder's ``CREATE INDEX
    CONCURRENTLY`` (LangGraph's migrations) waits for in turn: PostgreSQL reports a deadlock (seen
    with several Ray actors opening one new database at once)."""
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s) AS got", [SCHEMA_LOCK_KEY])
        row = await cursor.fetchone()
        if row is not None and row["got"]:
            break
        await asyncio.sleep(0.05)
    try:
        await change()
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", [SCHEMA_LOCK_KEY])
