"""The ``runs`` table: one row per run (= one checkpoint thread), its status and best scores."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
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
    """The runs table in a SQLite file, through sqlite-utils: its schema and migrations (``create``,
    ``add_column``, ``create_index``), its reads (``rows_where``) and writes (``upsert``, ``update``,
    ``delete_where``). One connection, serialised by a lock.

    Every write, the migration included, runs in an immediate transaction (``BEGIN IMMEDIATE``
    takes the write lock first; sqlite-utils' own ``atomic`` then nests a savepoint in it). A
    deferred transaction, what sqlite-utils opens on its own, reads and then upgrades to a write
    lock, and SQLite fails that upgrade at once, whatever the busy timeout, when another process
    writes: runs started at once on one database failed (tests/test_database.py).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = open_sqlite(path)
        self.lock = threading.Lock()
        self.table = sqlite_utils().Database(self.conn).table("runs")
        with self.lock:
            patiently(self.path, self._migrate)

    def _migrate(self) -> None:
        with self._immediate():
            if not self.table.exists():
                self.table.create({name: _python_type(name) for name in COLUMNS}, pk="run_id")
            present = self.table.columns_dict
            for name in COLUMNS:
                if name not in present:  # a database from before this column
                    self.table.add_column(name, _python_type(name))
            self.table.create_index(["group_id"], index_name="runs_group_id_idx", if_not_exists=True)

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")

    def _write(self, change: Callable[[], object]) -> None:
        def immediately() -> None:
            with self._immediate():
                change()

        with self.lock:
            patiently(self.path, immediately)

    def upsert(self, row: dict[str, Any]) -> None:
        self._write(lambda: self.table.upsert({name: row[name] for name in COLUMNS if name in row}, pk="run_id"))

    def update(self, run_id: str, fields: dict[str, Any]) -> None:
        def update() -> None:
            with contextlib.suppress(sqlite_utils().db.NotFoundError):  # a run deleted meanwhile: nothing to do
                self.table.update(run_id, fields)

        self._write(update)

    def rows(self, run_id: str | None = None, group_id: str | None = None) -> list[dict[str, Any]]:
        where, args = None, []
        if run_id is not None:
            where, args = "run_id = ?", [run_id]
        elif group_id is not None:
            where, args = "group_id = ?", [group_id]
        select = ", ".join(COLUMNS)
        with self.lock:
            return patiently(
                self.path, lambda: list(self.table.rows_where(where, args, order_by="created_at", select=select))
            )

    def delete(self, run_id: str) -> None:
        self._write(lambda: self.table.delete_where("run_id = ?", [run_id]))


_IMPORTING = threading.Lock()


def sqlite_utils() -> Any:
    """sqlite-utils, imported without pandas and numpy when they are not loaded yet.

    sqlite-utils imports both, when installed, only to type DataFrame and numpy columns, which the
    runs table never holds; they made every command that reads the table (``runs``, ``history``,
    ``report``, export) start about 0.25 s later. Hidden for the import alone (an entry of None in
    ``sys.modules`` makes an import raise ImportError), then left importable as before.
    """
    with _IMPORTING:
        # Hiding is only safe while no other thread can import: a thread of a server importing pandas
        # meanwhile would fail, and one calling here would get the module half made. A plain import
        # waits for another thread's import of the same module to finish.
        if "sqlite_utils" in sys.modules or threading.active_count() > 1:
            import sqlite_utils as module

            return module
        hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]
        try:
            import sqlite_utils as module
        finally:
            for name in hidden:
                if sys.modules.get(name) is None:
                    del sys.modules[name]
        return module


def _python_type(name: str) -> type:
    """The column's type as sqlite-utils takes it (INTEGER, FLOAT or TEXT)."""
    return int if name in _INT_COLUMNS else float if name in _FLOAT_COLUMNS else str


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
