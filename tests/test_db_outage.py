"""A run database that goes away mid-run is waited out (docs/scale.md, checkpoints/outage.py).

PostgreSQL: the suite's server is stopped hard in the middle of a rollout and started again; every
trajectory finishes, no coder step is asked twice and the export holds each trajectory once. With a
patience shorter than the outage, the rollout stops with one line and the same command continues
it. SQLite: a file another process keeps locked past the busy timeout is waited out the same way.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import checkpoint_count, kept_coder_replies, scripted_models, the_one_error
from tests.test_costs import REQUIREMENT
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints import database as database_module
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.outage import PATIENCE_ENV
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.core.errors import DatabaseUnavailable

CLI = str(Path(sys.executable).parent / "webgen-agent")
SAMPLES = 4


def rollout_command(tmp_path: Path, base_url: str, db: str) -> list[str]:
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []}) + "\n")
    return [
        CLI,
        "rollout",
        *("--data", str(records), "--samples", str(SAMPLES), "--max-steps", "3", "--name", "o"),
        *("--profile", "default", "--workers", "2", "--out", str(tmp_path / "runs"), "--db", db),
        *scripted_models(base_url),
    ]


def wait_for_checkpoints(db: str, proc: subprocess.Popen[str], log: Path, more: int) -> None:
    """Until a trajectory of ``proc`` is under way: it wrote ``more`` checkpoints since it started here."""
    deadline = time.monotonic() + 300
    before = {r.run_id: checkpoint_count(db, r.run_id) for r in RunIndex(db).list()}
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "no trajectory got under way"
        for record in RunIndex(db).list():
            if record.status == "running" and record.pid == proc.pid:
                if checkpoint_count(db, record.run_id) >= before.get(record.run_id, 0) + more:
                    return
        time.sleep(0.1)


@pytest.mark.e2e
def test_a_postgres_restart_mid_rollout_is_waited_out(tmp_path, postgres_cluster, chromium_path, monkeypatch):
    db = postgres_cluster.new_database()
    env = {"COLUMNS": "200", "WEBGEN_CHROMIUM": chromium_path}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        command = rollout_command(tmp_path, server.base_url, db)
        # 1. The server goes away for longer than the patience: the rollout stops, one line, resumable.
        log = tmp_path / "first.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                command, env={**_env(), **env, PATIENCE_ENV: "3"}, stdout=out, stderr=subprocess.STDOUT, text=True
            )
            try:
                wait_for_checkpoints(db, proc, log, 2)
                postgres_cluster.stop()
                try:
                    proc.wait(timeout=120)
                finally:
                    postgres_cluster.start_server()
            finally:
                if proc.poll() is None:
                    proc.kill()
        first = log.read_text()
        assert proc.returncode == 1, first
        error = the_one_error(first)
        assert "\n" not in error and "stayed unreachable for 3s" in error and "run the same command again" in error

        # The coder steps checkpointed before the stop, and the replies kept for a step not yet
        # checkpointed (a reply in flight at the stop is asked again).
        kept = sum(
            len(_checkpointed_steps(db, r.run_id)) + kept_coder_replies(db, r.run_id) for r in RunIndex(db).list()
        )
        asked_before = len(server.requests)

        # 2. The same command continues; the server is stopped hard mid-way and started again once a
        # run says it waits for it.
        log = tmp_path / "second.log"
        with log.open("w") as out:
            proc = subprocess.Popen(command, env={**_env(), **env}, stdout=out, stderr=subprocess.STDOUT, text=True)
            try:
                wait_for_checkpoints(db, proc, log, 2)
                postgres_cluster.stop()
                # Down until a run has met the outage (a node may run longer than a fixed outage).
                deadline = time.monotonic() + 100
                while "is unreachable" not in log.read_text() and time.monotonic() < deadline:
                    assert proc.poll() is None, log.read_text()
                    time.sleep(0.2)
                time.sleep(2)
                postgres_cluster.start_server()
                proc.wait(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
        second = log.read_text()
        coder_asked = [r for r in server.requests[asked_before:] if r.model == "scripted-coder"]
    assert proc.returncode == 0, second
    assert f"{SAMPLES - len(_finished_in(first))} finished now" in second, second
    waits = [line for line in second.splitlines() if "is unreachable" in line]
    assert waits and all("waiting up to 120s" in line for line in waits), second
    # Said once per run and outage: no run says it twice.
    said_by = [line.split(":")[0].strip() for line in waits]
    assert len(said_by) == len(set(said_by)), second
    # The database driver's own complaints about the cut connections go to the rollout's library log.
    assert "error ignored" not in second and "Traceback" not in second, second
    runs = RunIndex(db).list()
    assert len(runs) == SAMPLES and all(r.status == "finished" for r in runs)
    # No coder step was asked twice: the continuing command asked only for the steps not kept before.
    assert len(coder_asked) == sum(r.steps for r in runs) - kept
    exported = subprocess.run(
        [CLI, "export", "--format", "rewards", "--out", str(tmp_path / "rewards.jsonl"), "--db", db],
        env={**_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    lines = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert sorted(line["trajectory_id"] for line in lines) == sorted(r.run_id for r in runs)
    steps = {r.run_id: r.steps for r in runs}
    assert all(len(line["rewards"]) == steps[line["trajectory_id"]] for line in lines)


def _checkpointed_steps(db: str, run_id: str) -> list[dict[str, object]]:
    return asyncio.run(final_state(db, run_id)).get("steps", [])


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != PATIENCE_ENV}


def _finished_in(output: str) -> list[str]:
    return [line for line in output.splitlines() if " finished " in line and line.strip().startswith("o-cafe")]


def _hold_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    locked.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


async def _write_while_locked(db: Path, hold_s: float) -> list[str]:
    said: list[str] = []
    from tests.helpers import save_finished_run
    from webgen_agent.checkpoints.outage import listen

    async with open_checkpointer(db) as saver:
        locked = threading.Event()
        holder = threading.Thread(target=_hold_lock, args=(db, hold_s, locked))
        holder.start()
        try:
            await asyncio.to_thread(locked.wait)
            with listen(said.append):
                await save_finished_run(
                    saver, RunIndex(db), {"run_id": "t", "group_id": "g", "requirement": "r", "status": "finished"}
                )
        finally:
            await asyncio.to_thread(holder.join)
    return said


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (a SQLite file held locked past the busy timeout)
async def test_a_sqlite_file_locked_past_the_busy_timeout_is_waited_out(tmp_path, monkeypatch):
    monkeypatch.setattr(database_module, "SQLITE_BUSY_S", 0.3)
    monkeypatch.setattr("webgen_agent.checkpoints.saver.SQLITE_BUSY_S", 0.3)
    db = tmp_path / "db" / "webgen.db"
    RunIndex(db)  # the file exists, in WAL mode
    said = await _write_while_locked(db, 2.0)
    assert len(said[:1]) == 1 and "is unreachable (database is locked)" in said[0] and "waiting up to 120s" in said[0]
    async with open_checkpointer(db) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert found is not None


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (a SQLite file held locked past the busy timeout and the patience)
async def test_past_the_patience_a_locked_sqlite_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(database_module, "SQLITE_BUSY_S", 0.3)
    monkeypatch.setattr("webgen_agent.checkpoints.saver.SQLITE_BUSY_S", 0.3)
    monkeypatch.setenv(PATIENCE_ENV, "1")
    db = tmp_path / "db" / "webgen.db"
    RunIndex(db)
    with pytest.raises(DatabaseUnavailable) as stopped:
        await _write_while_locked(db, 3.0)
    message = str(stopped.value)
    assert "\n" not in message and "stayed unreachable for 1s (database is locked)" in message
    assert "run the same command again" in message
