"""A model reply the run received is in the database before the run goes on with it, so a process
killed at any moment after that never pays for the same reply twice (nodes/coding.py,
nodes/gui_testing.py, checkpoints/pregel.py ``keep_task_result``).

LangGraph writes a finished task's result in the background: here its writes table is held locked
(an open ``LOCK TABLE ... IN SHARE MODE``, which lets reads through and makes inserts wait) from
just before the coder and the feedback model answer the Generator, which widens the moment between a
reply's arrival and its write to as long as the lock is held. The run must not record the coder's
reply as a step while it is not stored; once the lock is let go, the process is killed (SIGKILL)
and ``resume`` continues: the coder's first turn and the GUI test instruction were each asked once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import checkpoint_count, scripted_models, task_results
from tests.test_costs import REQUIREMENT
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import sha256

CLI = str(Path(sys.executable).parent / "webgen-agent")
# The replies come this long after they are asked: time to take the lock once the Generator runs.
ANSWER_DELAY_S = 5.0
# How long the lock is held after the coder answered: a run that goes on without its reply stored
# records the step within milliseconds.
HOLD_S = 10.0


def _scalar(db: str, sql: str, params: list[object]) -> int:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row else 0


def _stored(db: str, text: str) -> bool:
    """Whether the run stored ``text`` in its blob store (a step records its reply there)."""
    return bool(_scalar(db, "SELECT COUNT(*) FROM blobs WHERE hash = %s", [sha256(text.encode())]))


async def _create_tables(db: str) -> None:
    async with open_checkpointer(db):
        pass


def _wait(check, what: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{what} never happened: {log.read_text()}"
        time.sleep(0.05)


def _waiting(db: str, table: str) -> int:
    """Inserts into ``table`` waiting for its lock."""
    sql = (
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
        "AND query ILIKE %s"
    )
    return _scalar(db, sql, [f"%INSERT INTO {table} %"])


def _slow_generator(scenario: Scenario) -> Scenario:
    """The Generator's two calls (the coder's first turn, the test instruction) answer after a while."""
    rules = [
        rule.model_copy(update={"delay_s": ANSWER_DELAY_S})
        if rule.schema_name == "TestInstruction" or (rule.model == "scripted-coder" and rule.turn == 0)
        else rule
        for rule in scenario.rules
    ]
    return scenario.model_copy(update={"rules": rules})


@pytest.mark.e2e
def test_a_reply_is_stored_before_the_run_goes_on_and_a_kill_then_costs_no_model_call(
    tmp_path, postgres_cluster, chromium_path
):
    import psycopg

    db = postgres_cluster.new_database()
    asyncio.run(_create_tables(db))
    scenario = Scenario.load(scenario_path("landing"))
    reply = (Path(scenario_path("landing")).parent / "landing" / "page-v1.txt").read_text()
    instruction_rule = next(i for i, r in enumerate(scenario.rules) if r.schema_name == "TestInstruction")
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    log = tmp_path / "run.log"
    with ScriptedServer(_slow_generator(scenario)) as server:
        flags = [*scripted_models(server.base_url), "--db", db]
        writes_lock, blobs_lock = psycopg.connect(db), psycopg.connect(db)
        with log.open("w") as out:
            proc = subprocess.Popen(
                [CLI, "run", REQUIREMENT, "--run-id", "k", "--out", str(tmp_path / "out"), "--max-steps", "3", *flags],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            try:
                # The input is checkpointed and the Generator asked the models: hold LangGraph's writes.
                _wait(lambda: checkpoint_count(db, "k") >= 2, "the Generator's start", proc, log)
                writes_lock.execute("LOCK TABLE checkpoint_writes IN SHARE MODE")
                assert not any(r.model == "scripted-coder" for r in server.requests), "the lock came too late"

                def answered() -> bool:
                    return any(r.model == "scripted-coder" and r.status == 200 for r in server.requests)

                _wait(answered, "the coder's answer", proc, log)
                held_until = time.monotonic() + HOLD_S
                while time.monotonic() < held_until and not _stored(db, reply):
                    time.sleep(0.05)
                went_on_unstored = _stored(db, reply)
                if not went_on_unstored:
                    # The replies' writes wait (one for the table, the other behind it for the saver's
                    # connection), their blobs stored. The blob store is held next, so that the node
                    # stops where it records the step; then the writes go through, and the process is
                    # killed once both are stored: on resume the Generator runs again from its start.
                    _wait(lambda: _waiting(db, "checkpoint_writes") >= 1, "a reply's write waiting", proc, log)
                    blobs_lock.execute("LOCK TABLE blobs IN SHARE MODE")
                    writes_lock.rollback()
                    _wait(lambda: _waiting(db, "blobs") >= 1, "the step's record", proc, log)
                    # Both replies' writes (each lands within milliseconds of the lock's release).
                    for _ in range(100):
                        if task_results(db, "k") >= 2:
                            break
                        time.sleep(0.05)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            finally:
                for conn in (writes_lock, blobs_lock):
                    conn.rollback()
                    conn.close()
                if proc.poll() is None:
                    proc.kill()
        resumed = subprocess.run([CLI, "resume", "k", *flags], env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        coder_turns = Counter(r.turn for r in server.requests if r.model == "scripted-coder" and r.status == 200)
        instructions = [r for r in server.requests if r.rule_index == instruction_rule and r.status == 200]
    record = RunIndex(db).get("k")
    assert record is not None and record.status == "finished"
    # Each reply received before the kill was kept: the coder was asked each turn once, the test
    # instruction once.
    assert coder_turns[0] == 1 and set(coder_turns.values()) == {1}, coder_turns
    assert len(instructions) == 1, instructions
    assert not went_on_unstored, "the run recorded the coder's reply as a step before the reply was stored"
