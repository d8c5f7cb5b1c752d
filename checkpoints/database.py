"""Where the run database lives: a SQLite file (the embedded default) or a PostgreSQL server.

``--db`` / ``WEBGEN_DB`` take either a file path or a ``postgresql://`` URL. Both hold the same
three things: LangGraph's checkpoints, the content-addressed blob store (table ``blobs``) and the
runs table (``runs``). SQLite is local to one machine; several machines need PostgreSQL.

Opening is safe when many processes open one database at once: SQLite switches a new file to WAL
under a file lock, PostgreSQL creates its tables under an advisory lock.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from webgen_agent.checkpoints.outage import patience_s, patiently
from webgen_agent.core.errors import ConfigError

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
POSTGRES_EXTRA = "pip install 'webgen-agent[postgres]'"
# One advisory lock key for every schema change the project makes (its tables and LangGraph's).
SCHEMA_LOCK_KEY = 0x77656267656E  # "webgen"
_STATE_DIR_ENV = "WEBGEN_STATE_DIR"
# SQLite waits this long for a lock within one statement; ``outage.patiently`` retries the statement
# (saying so) until the database patience is spent.
SQLITE_BUSY_S = 10.0
# Seconds a statement waits for a pooled connection before its attempt counts as failed (and is retried).
POOL_WAIT_S = 10.0
T = TypeVar("T")

DatabaseKind = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Database:
    """A run database: ``kind`` and the path or URL as given."""

    target: str
    kind: DatabaseKind

    @classmethod
    def of(cls, target: str | Path | Database) -> Database:
        """Parse a ``--db`` value: a ``postgresql://`` URL, or else a SQLite file path."""
        if isinstance(target, Database):
            return target
        text = str(target).strip() if isinstance(target, str) else str(target)
        if not text:
            raise ConfigError("the database is empty: give a file path (SQLite) or a postgresql:// URL")
        if text.startswith(POSTGRES_SCHEMES):
            return cls(text, "postgres")
        if "://" in text:
            raise ConfigError(f"unsupported database {_masked(text)}: give a file path (SQLite) or a postgresql:// URL")
        return cls(text, "sqlite")

    @property
    def is_postgres(self) -> bool:
        return self.kind == "postgres"

    @property
    def path(self) -> Path:
        """The SQLite file (a PostgreSQL database has none)."""
        if self.is_postgres:
            raise ValueError(f"{self} is a PostgreSQL database, not a file")
        return Path(self.target)

    @property
    def url(self) -> str:
        if not self.is_postgres:
            raise ValueError(f"{self} is a SQLite file, not a PostgreSQL URL")
        return self.target

    @property
    def local_dir(self) -> Path:
        """This machine's folder for what is not shared: the process registry, the dependency cache.

        ``WEBGEN_STATE_DIR``, else ``.webgen`` in the working folder (where the default database lives),
        whatever the database: a ``--db`` elsewhere no longer gets a dependency cache and a process
        registry beside it (docs/scale.md).
        """
        return Path(os.environ.get(_STATE_DIR_ENV) or ".webgen").resolve()

    def exists(self) -> bool:
        """Whether anything was stored yet (a PostgreSQL server is asked only when it is one)."""
        return self.is_postgres or self.path.exists()

    def __str__(self) -> str:
        return _masked(self.target) if self.is_postgres else self.target


def _masked(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


# -- SQLite --------------------------------------------------------------------------------------


def open_sqlite(path: str | Path) -> sqlite3.Connection:
    """An autocommit connection to ``path`` (folders created) in WAL mode, safe for many processes.

    Switching a new file to WAL rewrites its header: SQLite takes a read lock and upgrades it to a
    write lock, and it never waits (busy timeout or not) on a read-to-write upgrade, since two
    waiters would deadlock. Two processes opening a fresh file at once therefore failed with
    ``database is locked``. The mode is read first (a plain read waits as it should) and switched
    only under an exclusive file lock, so one process converts and the others then see WAL.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=SQLITE_BUSY_S, check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_S * 1000)}")
    if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        from filelock import FileLock  # only a new file is switched: opening one already in WAL skips it

        with FileLock(f"{path}.lock"):
            conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


# -- PostgreSQL ----------------------------------------------------------------------------------


def require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"a postgresql:// database needs the PostgreSQL extra: {POSTGRES_EXTRA}") from exc


_reached: set[str] = set()  # URLs this process has connected to once


def open_timeout(url: str, first_s: float = 30.0) -> float:
    """How long opening a connection to ``url`` may wait: ``first_s`` the first time (a wrong URL is a
    quick one-line error), the database patience once this process has reached the server (an
    outage then is waited out, as it is for statements)."""
    return max(first_s, patience_s()) if url in _reached else first_s


def mark_reached(url: str) -> None:
    _reached.add(url)


def pooled(pool: ConnectionPool, where: object, use: Callable[[Connection[Any]], T]) -> T:
    """``use`` on a connection of ``pool``; outages waited out (``outage.patiently``). The pool checks
    a connection before lending it and replaces a broken one, so a retry meets the server again."""

    def attempt() -> T:
        with pool.connection(timeout=POOL_WAIT_S) as conn:
            return use(conn)

    return patiently(where, attempt)


class _Pools:
    """One small connection pool per database URL and process, shared by its blob stores and run indexes.

    psycopg's pool is thread-safe, so the checkpointer's serializer may use it from LangGraph's
    worker threads. Keyed by process id too: a forked child must not reuse its parent's sockets.
    Each connection is checked before it is lent (``check_connection``): after a server restart the
    pool's idle connections are dead, and are replaced instead of failing the statement.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[tuple[int, str], ConnectionPool] = {}
        self._ready: set[tuple[int, str, str]] = set()  # (pid, url, setup) done
        atexit.register(self.close_all)

    def get(self, url: str, setup: Callable[[Connection[Any]], None]) -> ConnectionPool:
        require_psycopg()
        from psycopg_pool import ConnectionPool

        key = (os.getpid(), url)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = ConnectionPool(
                    url,
                    min_size=1,
                    max_size=4,
                    kwargs={"autocommit": True},
                    open=False,
                    name="webgen",
                    check=ConnectionPool.check_connection,
                )
                try:
                    pool.open(wait=True, timeout=open_timeout(url))
                except Exception as exc:
                    pool.close()
                    raise ConfigError(f"cannot connect to {Database.of(url)}: {str(exc).strip()[:300]}") from exc
                mark_reached(url)
                self._pools[key] = pool
            done = (*key, setup.__qualname__)
            if done not in self._ready:
                pooled(pool, Database.of(url), lambda conn: with_schema_lock(conn, setup))
                self._ready.add(done)
            return pool

    def close_all(self) -> None:
        with self._lock:
            pools = [pool for (pid, _), pool in self._pools.items() if pid == os.getpid()]
            self._pools.clear()
            self._ready.clear()
        for pool in pools:
            pool.close()


pools = _Pools()


def with_schema_lock(conn: Connection[Any], change: Callable[[Connection[Any]], None]) -> None:
    """Run ``change`` (DDL) holding the project's advisory lock: concurrent ``CREATE TABLE IF NOT
    EXISTS`` from several processes otherwise fails on PostgreSQL's catalog unique indexes.

    Polled with ``pg_try_advisory_lock`` rather than waited for inside a statement: a waiting
    statement is an open transaction, which ``CREATE INDEX CONCURRENTLY`` (LangGraph's migrations)
    would wait for in turn.
    """
    while not conn.execute("SELECT pg_try_advisory_lock(%s)", [SCHEMA_LOCK_KEY]).fetchone()[0]:  # type: ignore[index]
        time.sleep(0.05)
    try:
        change(conn)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", [SCHEMA_LOCK_KEY])
