"""The run database: SQLite or PostgreSQL chosen by --db, and opened safely by many processes at once."""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
from pathlib import Path

import pytest

from webgen_agent.checkpoints.database import Database, open_sqlite, require_psycopg
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.errors import ConfigError


def test_db_value_picks_the_backend():
    assert Database.of("runs/webgen.db").kind == "sqlite"
    assert Database.of(Path("/tmp/x.db")).path == Path("/tmp/x.db")
    url = "postgresql://agent:s3cret@db.example:5432/webgen"
    assert Database.of(url).kind == "postgres" and Database.of("postgres://h/db").is_postgres
    assert "s3cret" not in str(Database.of(url)) and "db.example:5432/webgen" in str(Database.of(url))
    with pytest.raises(ConfigError, match="file path .*postgresql://"):
        Database.of("mysql://h/db")
    with pytest.raises(ConfigError, match="empty"):
        Database.of("  ")


def test_postgres_without_its_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed: import raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'webgen-agent\[postgres\]'"):
        require_psycopg()
    with pytest.raises(ConfigError, match=r"webgen-agent\[postgres\]"):
        RunIndex("postgresql://nobody@/nowhere")


def _open_fresh_files(folder: str, rounds: int, barrier, failures) -> None:
    """One process of the race: every round, all processes open the same brand-new file at once."""
    for index in range(rounds):
        barrier.wait()
        try:
            conn = open_sqlite(Path(folder) / f"{index}.db")
            conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
            conn.execute("INSERT INTO t VALUES (1)")
            conn.close()
        except Exception as exc:
            failures.put(f"round {index}: {exc}")


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (150 rounds of 3 processes racing)
def test_fresh_sqlite_database_opened_by_many_processes_at_once(tmp_path):
    """Switching a new file to WAL upgrades a read lock to a write lock, which SQLite never waits for:
    without the file lock about 1 round in 30 failed with 'database is locked' at once, so 150
    rounds of 3 processes catch it with near certainty."""
    fork = multiprocessing.get_context("fork")  # nothing to import again: the rounds start at once
    processes, rounds = 3, 150
    barrier, failures = fork.Barrier(processes), fork.Queue()
    workers = [
        fork.Process(target=_open_fresh_files, args=(str(tmp_path), rounds, barrier, failures))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert [w.exitcode for w in workers] == [0] * processes
    assert found == []
    # Every file really is in WAL mode (what makes later concurrent writers safe).
    assert open_sqlite(tmp_path / "0.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _open_everything(url: str) -> None:
    async def main() -> None:
        async with open_checkpointer(url) as saver:
            assert await saver.aget_tuple({"configurable": {"thread_id": "none", "checkpoint_ns": ""}}) is None
        RunIndex(url).list()
        BlobStore(url).put(b"same bytes from every process")

    asyncio.run(main())


@pytest.mark.e2e
def test_fresh_postgres_database_set_up_by_many_processes_at_once(postgres_cluster):
    """Concurrent CREATE TABLE IF NOT EXISTS (ours and LangGraph's migrations) collide in
    PostgreSQL's catalog: 4 processes at once failed every time before the schema lock."""
    spawn = multiprocessing.get_context("spawn")  # fresh processes: no connection pool inherited
    url = postgres_cluster.new_database()
    workers = [spawn.Process(target=_open_everything, args=(url,)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * 4
    assert BlobStore(url).has(BlobStore(url).put(b"same bytes from every process"))


def test_runs_table_round_trip_on_both_stores(db_target):
    runs = RunIndex(db_target)
    record = runs.start(RunRecord(run_id="r1", group_id="g", requirement="A page.", out_dir="/tmp/r1"))
    runs.update("r1", steps=3, chosen_step=2, best_gui=4)
    runs.start(RunRecord(run_id="r2", group_id="h", requirement="Another.", out_dir="/tmp/r2"))
    got = RunIndex(db_target).get("r1")
    assert got is not None and got.status == "running"  # this live process runs it
    assert (got.steps, got.chosen_step, got.best_gui, got.fork_step, got.host) == (3, 2, 4, None, record.host)
    assert [r.run_id for r in runs.list()] == ["r1", "r2"] and [r.run_id for r in runs.list("h")] == ["r2"]
    runs.update("r2", status="finished")
    runs.delete("r1")
    assert runs.get("r1") is None and runs.get("r2").status == "finished"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown run fields: bogus"):
        runs.update("r2", bogus=1)


def _start_a_run(db: str, index: int, barrier, failures) -> None:
    """One process of the race: a run's life in the runs table (start, updates, its listing)."""
    barrier.wait()
    try:
        runs = RunIndex(db)
        run_id = f"run-{index}"
        runs.start(RunRecord(run_id=run_id, requirement="A page", out_dir="/dev/null", group_id="g"))
        for step in range(1, 6):
            runs.update(run_id, steps=step, best_screenshot=step % 5)
        runs.update(run_id, status="finished")
        assert runs.get(run_id) is not None and runs.list(group_id="g")
    except Exception as exc:
        failures.put(f"run {index}: {exc!r}")


@pytest.mark.e2e  # ten processes at once (a second or two): bound by processes, not by this machine's CPU
def test_ten_runs_started_at_once_on_a_new_database_all_finish(tmp_path):
    """Every write to the runs table takes the write lock first (an immediate transaction): with
    sqlite-utils' deferred transactions, runs writing at once failed with 'database is locked'."""
    fork = multiprocessing.get_context("fork")
    db, count = str(tmp_path / "new" / "webgen.db"), 10
    barrier, failures = fork.Barrier(count), fork.Queue()
    workers = [fork.Process(target=_start_a_run, args=(db, n, barrier, failures)) for n in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert [w.exitcode for w in workers] == [0] * count and found == []
    records = RunIndex(db).list()
    assert sorted(r.run_id for r in records) == sorted(f"run-{n}" for n in range(count))
    assert all(r.status == "finished" and r.steps == 5 for r in records)


def test_an_old_runs_table_gains_the_new_columns(tmp_path):
    """A database from before a column: opening it adds the column (sqlite-utils' add_column), rows kept."""
    db = tmp_path / "old.db"
    conn = open_sqlite(db)
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, requirement TEXT, out_dir TEXT, status TEXT)")
    conn.execute("INSERT INTO runs VALUES ('old', 'A page', '/dev/null', 'finished')")
    conn.close()
    runs = RunIndex(db)
    (old,) = runs.list()
    assert (old.run_id, old.status, old.tokens, old.host) == ("old", "finished", 0, "")
    runs.update("old", tokens=12, host="here")
    assert runs.get("old").tokens == 12 and runs.get("old").host == "here"
