"""Waiting out the run database: a PostgreSQL restart or dropped connection, a SQLite file kept locked.

Every checkpoint write and read, blob-store and runs-table statement goes through ``patiently`` (or
``apatiently`` on the event loop). A connection error is retried with backoff (tenacity) for up to
the patience, ``WEBGEN_DB_PATIENCE`` seconds (default 120); the first wait is reported once to the
listener the caller installed (a run shows it as a progress line), and the statement then runs on
a fresh connection: psycopg's pools check a connection before lending it and replace a broken one,
so the retry finds the server again once it is back. Every statement retried here is idempotent (an
upsert, an ``INSERT ... ON CONFLICT DO NOTHING`` of content-addressed rows, a read), so a statement
that did commit before its connection dropped is harmless to run again. Past the patience the caller
gets ``DatabaseUnavailable``: the run stops as it would when killed, resumable from its last
checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from webgen_agent.core.errors import DatabaseUnavailable, no_space

T = TypeVar("T")

PATIENCE_ENV = "WEBGEN_DB_PATIENCE"
DEFAULT_PATIENCE_S = 120.0
_log = logging.getLogger("webgen_agent.database")
# psycopg's pools log every failed reconnection attempt; the wait is said once here instead.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

Listener = Callable[[str], None]


class _Outages:
    """The waits of one listener's statements, said once per outage.

    An outage is over when a statement that waited for it got through. A statement that began before
    that moment and fails afterwards belongs to the same outage, not a new one: LangGraph's saver
    takes its connection, then writes the checkpoint's blobs (which meet the outage and wait it
    out) and only then finds its own connection cut by the restart."""

    def __init__(self, callback: Listener) -> None:
        self.callback = callback
        self.said = False
        self.back_at = float("-inf")  # monotonic time the last outage was over

    def waiting(self, line: str, began: float) -> None:
        if self.said or began < self.back_at:
            return
        self.said = True
        self.callback(line)

    def back(self) -> None:
        if self.said:
            self.said = False
            self.back_at = time.monotonic()


_listener: ContextVar[_Outages | None] = ContextVar("webgen_database_listener", default=None)


def patience_s() -> float:
    """Seconds one statement waits out the database (``WEBGEN_DB_PATIENCE``; default 120)."""
    text = os.environ.get(PATIENCE_ENV, "").strip()
    if not text:
        return DEFAULT_PATIENCE_S
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_PATIENCE_S
    return max(0.0, value)


@contextlib.contextmanager
def listen(callback: Listener) -> Iterator[None]:
    """Report the database waits of the statements made inside this block (and the tasks and threads it
    starts) to ``callback``, once per outage: it is told again only after a statement got through."""
    token = _listener.set(_Outages(callback))
    try:
        yield
    finally:
        _listener.reset(token)


def outage(exc: BaseException) -> bool:
    """Worth waiting for: the server went away or refuses connections for now, or SQLite is locked.

    A full disk is not: it stays full until someone frees space, so the run stops at once, as it
    does when its own folder fills (PostgreSQL's ``disk_full``, SQLSTATE 53100, is an
    ``OperationalError`` in psycopg)."""
    if no_space(exc) is not None:
        return False
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    try:
        import psycopg
    except ImportError:
        return False
    # OperationalError covers a dropped connection, a refused one, a server shutting down
    # (AdminShutdown) and the pool finding no connection in time (PoolTimeout).
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


def _first_line(exc: BaseException | None) -> str:
    text = str(exc or "").strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class _Wait:
    """tenacity's hooks for one statement: say the first wait, say when it got through."""

    def __init__(self, where: str, patience: float) -> None:
        self.where, self.patience, self.waited = where, patience, False
        self.began = time.monotonic()

    def before_sleep(self, state: RetryCallState) -> None:
        if self.waited:
            return
        self.waited = True
        failure = state.outcome.exception() if state.outcome is not None else None
        line = (
            f"the run database {self.where} is unreachable ({_first_line(failure)}); "
            f"waiting up to {self.patience:g}s for it"
        )
        outages = _listener.get()
        if outages is not None:
            outages.waiting(line, self.began)
        else:
            _log.warning(line)

    def done(self) -> None:
        if self.waited:
            outages = _listener.get()
            if outages is not None:
                outages.back()
            _log.info("the run database %s is back after %.0fs", self.where, time.monotonic() - self.began)

    @contextlib.contextmanager
    def giving_up(self) -> Iterator[None]:
        """An outage that outlasted the patience leaves the block as ``DatabaseUnavailable`` (one line)."""
        try:
            yield
        except Exception as exc:
            if not outage(exc):
                raise
            raise DatabaseUnavailable(
                f"the run database {self.where} stayed unreachable for {self.patience:g}s ({_first_line(exc)}); "
                "run the same command again to continue from the last checkpoint"
            ) from exc


def _retrying_kwargs(wait: _Wait) -> dict[str, object]:
    return {
        "retry": retry_if_exception(outage),
        "stop": stop_after_delay(wait.patience),
        "wait": wait_exponential_jitter(initial=0.2, max=5.0),
        "before_sleep": wait.before_sleep,
        "reraise": True,
    }


def patiently(where: object, statement: Callable[[], T]) -> T:
    """``statement()`` (idempotent), its database outages waited out for the patience."""
    wait = _Wait(str(where), patience_s())
    with wait.giving_up():
        result = Retrying(**_retrying_kwargs(wait))(statement)  # type: ignore[arg-type]
    wait.done()
    return result


async def apatiently(where: object, statement: Callable[[], Awaitable[T]]) -> T:
    """``await statement()`` (idempotent), its database outages waited out for the patience."""
    wait = _Wait(str(where), patience_s())
    with wait.giving_up():
        async for attempt in AsyncRetrying(**_retrying_kwargs(wait)):  # type: ignore[arg-type]
            with attempt:
                result = await statement()
    wait.done()
    return result


class WaitsOutOutages:
    """Mixin for a LangGraph checkpointer (before the saver class): its writes and reads wait out the
    database for the patience. ``where`` names the database in the lines said."""

    where: object = "database"

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        parent: Any = super()
        return await apatiently(self.where, lambda: parent.aput(*args, **kwargs))

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        parent: Any = super()
        await apatiently(self.where, lambda: parent.aput_writes(*args, **kwargs))

    async def aget_tuple(self, *args: Any, **kwargs: Any) -> Any:
        parent: Any = super()
        return await apatiently(self.where, lambda: parent.aget_tuple(*args, **kwargs))

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Waited out until the first checkpoint is read (later ones are a listing under way)."""
        parent: Any = super()
        rows: list[AsyncIterator[Any]] = []

        async def first() -> tuple[bool, Any]:
            if rows:
                with contextlib.suppress(Exception):
                    await rows.pop().aclose()  # type: ignore[attr-defined]
            rows.append(parent.alist(*args, **kwargs))
            try:
                return True, await anext(rows[0])
            except StopAsyncIteration:
                return False, None

        found, item = await apatiently(self.where, first)
        if not found:
            return
        yield item
        async for item in rows[0]:
            yield item
