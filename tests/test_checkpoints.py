"""Checkpoints that pay their way: backtracking, restart, fork, concurrent runs in one database.

Static sites (no npm) keep these fast; the scripted model answers over HTTP; Chromium is real.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import time
from pathlib import Path

import pytest

from tests.helpers import (
    checkpoint_count,
    ctrl_c_as_in_a_terminal,
    group_alive,
    owned_groups,
    scripted_models,
    start,
)
from tests.postgres import fresh_db
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.history import final_state, saved_states
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.graph.api import fork_run, run_requirement
from webgen_agent.graph.builder import compile_graph
from webgen_agent.graph.history import run_history

pytestmark = pytest.mark.e2e
REQUIREMENT = "A notes page that shows the user's notes."


@pytest.fixture(scope="module")
def backtrack_server():
    with ScriptedServer(Scenario.load(scenario_path("backtrack"))) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def backtrack_run(request, tmp_path_factory, backtrack_server, chromium_path):
    """One backtracking run per store; the tests using it run on both."""
    base = tmp_path_factory.mktemp("backtrack")
    db = fresh_db(request, base)
    result = await run_requirement(
        REQUIREMENT,
        context=scripted_context(backtrack_server.base_url, gui_max_actions=3),
        run_id="bt",
        out_dir=base / "out",
        db_path=db,
    )
    return result, db


async def test_backtracks_to_the_best_step_after_five_errored_steps(backtrack_run):
    result, db = backtrack_run
    state = await final_state(db, "bt")
    steps = state["steps"]
    assert [s["errored"] for s in steps[:6]] == [False, True, True, True, True, True]
    assert all(s["execution"]["stage"] == "render" for s in steps[1:6])
    assert state["events"][0] == {
        "kind": "backtrack",
        "after_step": 5,
        "target_step": 0,
        "reason": "5 consecutive errored steps",
    }
    after = steps[6]
    assert after["parent"] == 0 and after["screenshot_score"] == 4 and after["gui_passed"] is True
    # The coder got step 0's conversation back, plus the rollback note: nothing of steps 1-5.
    store = BlobStore(db)
    prompt = store.get_json(after["prompt"])
    assert prompt[:-1] == [*store.get_json(steps[0]["prompt"]), {"role": "assistant", "hash": steps[0]["completion"]}]
    assert "rolled back to step 0" in store.get_text(prompt[-1]["hash"])
    # Step 6 built on step 0's files, not on the broken steps' extra files.
    assert set(store.manifest(after["files"])) == {"index.html"}
    assert result.chosen_step == 6 and "Notes v2" in (Path(result.site_dir) / "index.html").read_text()


async def test_backtrack_is_its_own_node_in_the_checkpoint_history(backtrack_run):
    _, db = backtrack_run
    async with open_checkpointer(db) as saver:
        history = [s async for s in compile_graph(saver).aget_state_history({"configurable": {"thread_id": "bt"}})]
        saved = await saved_states(saver, "bt")
    before_backtrack = [s for s in history if s.next == ("backtrack",)]
    assert len(before_backtrack) == 1 and before_backtrack[0].values["current"] == 5
    # Read without the graph, the checkpoints are the graph's own snapshots (oldest first); a
    # snapshot also shows a list channel never written yet as its empty start value.
    history.reverse()
    assert [s.checkpoint_id for s in saved] == [s.config["configurable"]["checkpoint_id"] for s in history]
    for mine, graphs in zip(saved, history, strict=True):
        assert mine.values == {key: value for key, value in graphs.values.items() if key in mine.values}
        assert not any(value for key, value in graphs.values.items() if key not in mine.values)
    rows, events = await run_history("bt", db_path=db)
    assert [r.index for r in rows] == list(range(7)) and all(r.checkpoint_id for r in rows)
    assert events[0]["kind"] == "backtrack"


async def test_restart_from_scratch_when_no_step_was_good(tmp_path, chromium_path):
    with ScriptedServer(Scenario.load(scenario_path("restart"))) as server:
        context = scripted_context(server.base_url, max_steps=7)
        result = await run_requirement(
            REQUIREMENT, context=context, run_id="rs", out_dir=tmp_path / "out", db_path=tmp_path / "webgen.db"
        )
    state = await final_state(tmp_path / "webgen.db", "rs")
    assert state["events"][0]["kind"] == "restart" and state["events"][0]["after_step"] == 4
    assert state["events"][0]["target_step"] is None
    restarted = state["steps"][5]
    assert restarted["role"] == "generator" and restarted["parent"] is None
    store = BlobStore(tmp_path / "webgen.db")
    assert set(store.manifest(restarted["files"])) == {"index.html"}  # the workspace was emptied
    # The restarted coder writes step 0's broken page again: the loop governor stops the run there.
    stop = state["events"][1]
    assert stop["kind"] == "stop" and "step 5 has the same files as step 0" in stop["reason"]
    assert len(state["steps"]) == 6 and result.status == "finished"


async def test_fork_continues_from_a_step_and_keeps_the_original(backtrack_run, backtrack_server, tmp_path):
    result, db = backtrack_run
    before = await final_state(db, "bt")
    forked = await fork_run(
        "bt",
        step=0,
        note="Use a two-column layout.",
        new_run_id="bt-fork",
        context=scripted_context(backtrack_server.base_url, gui_max_actions=3),
        out_dir=tmp_path / "fork",
        db_path=db,
    )
    after = await final_state(db, "bt")
    assert after == before  # the original run and all its later steps are intact
    fork_state = await final_state(db, "bt-fork")
    assert [s["index"] for s in fork_state["steps"]] == [0, 1]
    store = BlobStore(db)
    prompt = store.get_json(fork_state["steps"][1]["prompt"])
    assert "Note from the user: Use a two-column layout." in store.get_text(prompt[-1]["hash"])
    records = {r.run_id: r for r in RunIndex(db).list()}
    assert records["bt-fork"].parent_run == "bt" and records["bt-fork"].fork_step == 0
    assert records["bt"].status == "finished" and forked.status == "finished"


async def test_an_export_writes_each_step_once_with_the_run_that_made_it(backtrack_run, backtrack_server, tmp_path):
    """Two forks of step 0 and a fork of a fork: every inherited step goes out once, with its run."""
    _, db = backtrack_run
    context = scripted_context(backtrack_server.base_url, gui_max_actions=3)
    for fork in ("bt-f1", "bt-f2"):
        await fork_run(
            "bt", step=0, note="Two columns.", new_run_id=fork, context=context, out_dir=tmp_path / fork, db_path=db
        )
    await fork_run(
        "bt-f1",
        step=1,
        note="Brighter.",
        new_run_id="bt-f1-f",
        context=scripted_context(backtrack_server.base_url, gui_max_actions=3, max_steps=3),
        out_dir=tmp_path / "bt-f1-f",
        db_path=db,
    )
    report = await export_trajectories("step-grpo", tmp_path / "steps.jsonl", db_path=db, groups=["bt"])
    records = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    made = [(r["trajectory_id"], r["step"]) for r in records]
    assert len(made) == len(set(made)) == report.records
    assert [step for run, step in made if run == "bt"] == list(range(7))
    runs = RunIndex(db)
    for fork in ("bt-f1", "bt-f2", "bt-f1-f"):
        steps = [step for run, step in made if run == fork]
        record = runs.get(fork)
        assert record is not None and record.fork_step is not None
        assert steps and min(steps) == record.fork_step + 1  # nothing it inherited
    assert sum(step == 0 for _, step in made) == 1
    # One group: the original's and the forks' entries, each counted once (default profile: one a step).
    rewards = [r["reward"] for r in records]
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    for record in records:
        assert (record["group_id"], record["group_size"]) == ("bt", len(records))
        assert record["advantage"] == pytest.approx((record["reward"] - mean) / (std + 1e-6))


def test_two_runs_share_one_database_concurrently(tmp_path, backtrack_server, chromium_path, db_target):
    db = db_target
    flags = [
        *scripted_models(backtrack_server.base_url),
        "--db",
        str(db),
    ]
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path}
    procs = [
        start(["run", REQUIREMENT, "--run-id", name, "--out", str(tmp_path / name), *flags], env)
        for name in ("one", "two")
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for proc, output in zip(procs, outputs):
        assert proc.returncode == 0, output
        assert "locked" not in output.lower()
    records = {r.run_id: r for r in RunIndex(db).list()}
    assert records["one"].status == records["two"].status == "finished"
    assert records["one"].steps == records["two"].steps == 7
    assert asyncio.run(final_state(db, "one"))["steps"][6]["gui_passed"] is True


def test_ctrl_c_stops_the_run_and_its_servers(tmp_path, backtrack_server, chromium_path):
    db = tmp_path / "webgen.db"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path}
    # As a user's terminal starts it: with Ctrl-C not ignored (the suite may have been started with it ignored).
    with ctrl_c_as_in_a_terminal():
        flags = ["--out", str(tmp_path / "out"), *scripted_models(backtrack_server.base_url), "--db", str(db)]
        proc = start(["run", REQUIREMENT, "--run-id", "c", *flags], env)
    deadline = time.monotonic() + 120
    # Interrupted as soon as the run has a checkpoint and a server up: early in a run of seven steps, so
    # a loaded machine cannot let the run finish before the signal lands.
    while checkpoint_count(db, "c") < 1 or not (groups := owned_groups(db, proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # once: one Ctrl-C stops a run
    output = proc.communicate(timeout=90)[0]
    assert proc.returncode == 130, output
    assert "continue with `webgen-agent resume c`" in output  # the real run id, not a placeholder
    assert not [g for g in groups if group_alive(g)]
    assert RunIndex(db).get("c").status == "interrupted"
