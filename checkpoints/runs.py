"""The ``runs`` table: one row per run (= one checkpoint thread), its status and best scores."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from webgen_agent.checkpoints.database import Database, open_sqlite, pooled, pools
from webgen_agent.checkpoints.outage import patiently

T = TypeVar("T")

# review: stopped at a review point, waiting for an answer (`resume` asks again); rejected: at finalize.
# budget: stopped at a step boundary once its budget was spent; resumable with a larger one (docs/costs.md).
RunStatus = Literal["running", "finished", "failed", "interrupted", "review", "rejected", "budget"]


@dataclass
class RunRecord:
    """A row of the runs table. A dataclass, not a pydantic model: ``runs`` lists the table without
    importing pydantic (docs/performance.md, "Command-line start"); rows come from this project's own
    table, already typed by its columns."""

    run_id: str
    requirement: str
    out_dir: str
    group_id: str = ""
    status: RunStatus = "running"
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    error: str = ""
    parent_run: str = ""
    fork_step: int | None = None
    pid: int = field(default_factory=os.getpid)
    pid_started: float = 0.0
    chosen_step: int | None = None
    steps: int = 0
    best_screenshot: int = 0
    best_gui: int = 0
    cost_usd: float | None = None  # USD spent so far; None when a price is unknown
    tokens: int = 0  # input and output tokens used so far
    settings: str = "{}"  # non-secret run settings (JSON) reused on resume
    host: str = ""  # the machine whose process runs it (liveness is judged there)

    def recorded_settings(self) -> dict[str, Any]:
        """The settings the run started with (what resume and fork start from)."""
        return dict(json.loads(self.settings or "{}"))

    def row(self) -> dict[str, Any]:
        """The record as the table's columns."""
        return asdict(self)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _process_started(pid: int) -> float:
    import psutil  # only a running run's liveness needs it: listing finished runs starts faster without

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


_INT_COLUMNS = ("fork_step", "chosen_step", "pid", "steps", "best_screenshot", "best_gui", "tokens")
_FLOAT_COLUMNS = ("created_at", "updated_at", "pid_started", "cost_usd")
COLUMNS = tuple(column.name for column in fields(RunRecord))


class _SqliteRuns:
    """The runs table in a SQLite file: one connection, serialised by a lock.

    Plain autocommit statements, never a deferred transaction (sqlite-utils' ``create`` and
    ``upsert`` open one): a transaction that reads and then writes upgrades its lock, and SQLite
    fails such an upgrade at once, whatever the busy timeout, when another process writes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = open_sqlite(path)
        self.lock = threading.Lock()
        columns = ", ".join(f"{name} {_column_type(name)}" for name in COLUMNS if name != "run_id")
        with self.lock:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, {columns})")
            present = {row[1] for row in self.conn.execute("PRAGMA table_info(runs)")}
            for name in COLUMNS:
                if name not in present:  # a database from before this column
                    with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                        self.conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {_column_type(name)}")
            self.conn.execute("CREATE INDEX IF NOT EXISTS runs_group_id_idx ON runs (group_id)")

    def upsert(self, row: dict[str, Any]) -> None:
        names = [name for name in COLUMNS if name in row]
        updates = ", ".join(f"{name} = excluded.{name}" for name in names if name != "run_id")
        sql = (
            f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates}"
        )
        self._run(lambda: self.conn.execute(sql, [row[name] for name in names]))

    def _run(self, statement: Callable[[], T]) -> T:
        with self.lock:
            return patiently(self.path, statement)

    def update(self, run_id: str, fields: dict[str, Any]) -> None:
        assignments = ", ".join(f"{name} = ?" for name in fields)
        sql = f"UPDATE runs SET {assignments} WHERE run_id = ?"
        self._run(lambda: self.conn.execute(sql, [*fields.values(), run_id]))

    def rows(self, run_id: str | None = None, group_id: str | None = None) -> list[dict[str, Any]]:
        query, args = f"SELECT {', '.join(COLUMNS)} FROM runs", []
        if run_id is not None:
            query, args = query + " WHERE run_id = ?", [run_id]
        elif group_id is not None:
            query, args = query + " WHERE group_id = ?", [group_id]
        rows = self._run(lambda: self.conn.execute(query + " ORDER BY created_at", args).fetchall())
        return [dict(zip(COLUMNS, row, strict=True)) for row in rows]

    def delete(self, run_id: str) -> None:
        self._run(lambda: self.conn.execute("DELETE FROM runs WHERE run_id = ?", [run_id]))


class _PostgresRuns:
    """The runs table on a PostgreSQL server (the process's shared connection pool)."""

    def __init__(self, url: str) -> None:
        self.pool = pools.get(url, _create_postgres_runs)
        self.where = Database.of(url)

    def upsert(self, row: dict[str, Any]) -> None:
        names = [name for name in COLUMNS if name in row]
        updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in names if name != "run_id")
        sql = (
            f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates}"
        )
        pooled(self.pool, self.where, lambda conn: conn.execute(sql, [row[name] for name in names]))

    def update(self, run_id: str, fields: dict[str, Any]) -> None:
        assignments = ", ".join(f"{name} = %s" for name in fields)
        sql = f"UPDATE runs SET {assignments} WHERE run_id = %s"
        pooled(self.pool, self.where, lambda conn: conn.execute(sql, [*fields.values(), run_id]))

    def rows(self, run_id: str | None = None, group_id: str | None = None) -> list[dict[str, Any]]:
        query = f"SELECT {', '.join(COLUMNS)} FROM runs"
        args: list[Any] = []
        if run_id is not None:
            query, args = query + " WHERE run_id = %s", [run_id]
        elif group_id is not None:
            query, args = query + " WHERE group_id = %s", [group_id]
        rows = pooled(self.pool, self.where, lambda conn: conn.execute(query + " ORDER BY created_at", args).fetchall())
        return [dict(zip(COLUMNS, row, strict=True)) for row in rows]

    def delete(self, run_id: str) -> None:
        pooled(self.pool, self.where, lambda conn: conn.execute("DELETE FROM runs WHERE run_id = %s", [run_id]))


def _column_type(name: str) -> str:
    """The column's SQL type (the same words on SQLite and PostgreSQL)."""
    if name in _INT_COLUMNS:
        return "BIGINT"
    if name in _FLOAT_COLUMNS:
        return "DOUBLE PRECISION"
    return "TEXT"


def _create_postgres_runs(conn: Any) -> None:
    columns = ", ".join(f"{name} {_column_type(name)}" for name in COLUMNS if name != "run_id")
    conn.execute(f"CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, {columns})")
    for name in COLUMNS:  # a column added to RunRecord later
        conn.execute(f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {name} {_column_type(name)}")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_group_id_idx ON runs (group_id)")


class RunIndex:
    """The runs table of a run database (SQLite or PostgreSQL).

    Synchronous and thread-safe; code on an event loop uses the ``a``-prefixed methods.
    """

    def __init__(self, db: str | Path | Database) -> None:
        self.database = Database.of(db)
        self._table: _SqliteRuns | _PostgresRuns = (
            _PostgresRuns(self.database.url) if self.database.is_postgres else _SqliteRuns(self.database.path)
        )

    def start(self, record: RunRecord) -> RunRecord:
        record.pid = os.getpid()
        record.pid_started = _process_started(record.pid)
        record.host = socket.gethostname()
        record.status = "running"
        record.updated_at = time.time()
        self._table.upsert(record.row())
        return record

    def claim(self, run_id: str) -> None:
        """Make an existing run's row name this process (a new run on the same thread): its liveness
        is judged by this process from now on."""
        pid = os.getpid()
        self.update(run_id, pid=pid, pid_started=_process_started(pid), host=socket.gethostname())

    def update(self, run_id: str, **fields: Any) -> None:
        unknown = set(fields) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown run fields: {', '.join(sorted(unknown))}")
        fields["updated_at"] = time.time()
        self._table.update(run_id, fields)

    def get(self, run_id: str) -> RunRecord | None:
        rows = self._table.rows(run_id=run_id)
        return self._with_liveness(_record(rows[0])) if rows else None

    def list(self, group_id: str | None = None) -> list[RunRecord]:
        return [self._with_liveness(_record(row)) for row in self._table.rows(group_id=group_id)]

    def delete(self, run_id: str) -> None:
        self._table.delete(run_id)

    @staticmethod
    def _with_liveness(record: RunRecord) -> RunRecord:
        """A 'running' run of this machine whose process is gone was interrupted (Ctrl-C, kill -9, reboot).

        A run of another machine is left as recorded: its driver marks it when its worker dies.
        """
        if record.status == "running" and record.host in ("", socket.gethostname()):
            started = _process_started(record.pid)
            if not started or abs(started - record.pid_started) > 1.0:
                record.status = "interrupted"
        return record

    def settings(self, run_id: str) -> dict[str, Any]:
        record = self.get(run_id)
        return record.recorded_settings() if record else {}

    # -- the same, off the event loop ---------------------------------------------------------
    async def astart(self, record: RunRecord) -> RunRecord:
        return await asyncio.to_thread(self.start, record)

    async def aupdate(self, run_id: str, **fields: Any) -> None:
        await asyncio.to_thread(self.update, run_id, **fields)

    async def aget(self, run_id: str) -> RunRecord | None:
        return await asyncio.to_thread(self.get, run_id)

    async def alist(self, group_id: str | None = None) -> builtins.list[RunRecord]:
        return await asyncio.to_thread(self.list, group_id)

    async def adelete(self, run_id: str) -> None:
        await asyncio.to_thread(self.delete, run_id)


def _record(row: dict[str, Any]) -> RunRecord:
    """A row as a record; a column a row lacks (NULL: added after it was written) takes its default."""
    return RunRecord(**{name: value for name, value in row.items() if value is not None})
