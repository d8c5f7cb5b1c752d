"""A run says once per outage that it waits for its database (checkpoints/outage.py), also when a
statement that began before the outage was over finds its connection cut only afterwards (LangGraph's
PostgreSQL saver holds a connection while the checkpoint's blobs wait out the outage)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable

from webgen_agent.checkpoints.outage import apatiently, listen


def failing_once(before: Callable[[], Awaitable[None]] | None = None) -> Callable[[], Awaitable[str]]:
    """A statement whose first attempt meets the outage (after ``before``), and the next gets through."""
    attempts = [0]

    async def statement() -> str:
        attempts[0] += 1
        if attempts[0] == 1:
            if before is not None:
                await before()
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    return statement


async def test_a_statement_cut_off_by_the_outage_it_outlived_is_not_a_second_outage() -> None:
    said: list[str] = []
    over = asyncio.Event()
    with listen(said.append):
        # The saver's write: begun first, it fails only once the outage is over for the other statement.
        held = asyncio.create_task(apatiently("db", failing_once(over.wait)))
        await asyncio.sleep(0)
        assert await apatiently("db", failing_once()) == "ok"  # the blob write: waits, then gets through
        over.set()
        assert await held == "ok"
        assert len(said) == 1, said
        # A statement begun after the outage was over that meets the database gone: a new outage.
        assert await apatiently("db", failing_once()) == "ok"
    assert len(said) == 2 and all("db is unreachable (database is locked)" in line for line in said), said


def test_a_full_database_disk_is_not_waited_out() -> None:
    """PostgreSQL's disk_full is an OperationalError, as a dropped connection is; the run stops at once."""
    import psycopg

    from webgen_agent.checkpoints.outage import patiently

    attempts = [0]

    def statement() -> None:
        attempts[0] += 1
        raise psycopg.errors.DiskFull('could not extend file "base/16384/16390": No space left on device')

    try:
        patiently("the test database", statement)
    except psycopg.errors.DiskFull:
        pass
    assert attempts == [1]
