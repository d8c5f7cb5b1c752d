"""Rollouts on Ray with a PostgreSQL store, end to end: the rollout CLI with ``--ray local`` (a real
local Ray instance, 2 actors x 2 runs) against the scripted model; one actor is killed with SIGKILL
mid-way; its trajectories continue from their checkpoints on a replacement actor, nothing is left
running, and ``export`` reads every trajectory from the shared store.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import checkpoint_count, group_alive, owned_groups
from webgen_agent.apps.cluster.settings import RaySettings, check_store_reaches_nodes
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.context import ConfigError

RECORDS = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
CLI = str(Path(sys.executable).parent / "webgen-agent")
# The scenario makes one habits trajectory (whichever asks first) meet HTTP 500s beyond the retries;
# recipes trajectories always finish, so the actor killed is one running a recipes trajectory.
VICTIM_GROUP = "r-recipes-"


def test_several_machines_need_a_postgres_store():
    nodes = [{"Alive": True, "NodeManagerAddress": "10.0.0.1"}, {"Alive": True, "NodeManagerAddress": "10.0.0.2"}]
    with pytest.raises(ConfigError, match="2 machines .* SQLite .* postgresql://"):
        check_store_reaches_nodes(Database.of("runs/webgen.db"), nodes)
    check_store_reaches_nodes(Database.of("postgresql://h/db"), nodes)
    check_store_reaches_nodes(Database.of("runs/webgen.db"), nodes[:1] + [{**nodes[1], "Alive": False}])


def test_actor_count_follows_the_cluster_cpus_unless_given():
    assert RaySettings(runs_per_actor=2).actor_count(8.0) == 4
    assert RaySettings(runs_per_actor=2, cpus_per_run=0.5).actor_count(2.0) == 2
    assert RaySettings(runs_per_actor=4).actor_count(2.0) == 1  # at least one
    with pytest.raises(ConfigError, match="need 4 CPUs; the cluster has 2"):
        RaySettings(actors=2, runs_per_actor=2).actor_count(2.0)


def test_ray_flag_without_ray_installed_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from webgen_agent.apps.cli.main import app\n"
        f"app(['rollout', '--data', {str(RECORDS)!r}, '--ray', 'local', '--base-url', 'http://127.0.0.1:1/v1',"
        " '--coder-model', 'c', '--vlm-model', 'v', '--feedback-model', 'f', '--db', "
        f"{str(tmp_path / 'x.db')!r}])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install 'webgen-agent[ray]'" in result.stdout + result.stderr


@pytest.mark.e2e
def test_rollout_on_ray_survives_a_killed_actor(tmp_path, postgres_cluster, chromium_path, state_dir):
    db = postgres_cluster.new_database()
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200", "RAY_AUTH_MODE": "disabled"}
    command = [
        CLI,
        "rollout",
        "--data",
        str(RECORDS),
        "--samples",
        "2",
        "--max-steps",
        "4",
        "--gui-max-actions",
        "3",
        "--name",
        "r",
        "--out",
        str(tmp_path / "runs"),
        "--db",
        db,
        "--ray",
        "local",
        "--actors",
        "2",
        "--runs-per-actor",
        "2",
        "--cpus-per-run",
        "0.5",
    ]
    with ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
        command += [
            "--base-url",
            server.base_url,
            "--coder-model",
            "scripted-coder",
            "--vlm-model",
            "scripted-vlm",
            "--feedback-model",
            "scripted-feedback",
        ]
        log = (tmp_path / "rollout.log").open("w")
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        victim, steps_before = None, []
        deadline = time.monotonic() + 400
        try:
            while victim is None:  # a trajectory (not the failing one) that has steps and runs on
                assert proc.poll() is None, (tmp_path / "rollout.log").read_text()
                assert time.monotonic() < deadline, "no trajectory got far enough to kill its actor"
                for record in RunIndex(db).list():
                    running = record.status == "running" and record.run_id.startswith(VICTIM_GROUP)
                    if running and checkpoint_count(db, record.run_id) >= 6:
                        steps_before = asyncio.run(final_state(db, record.run_id)).get("steps", [])
                        if steps_before:
                            victim = record
                            break
                time.sleep(0.2)
            os.kill(victim.pid, signal.SIGKILL)  # the Ray actor process running it
            proc.wait(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    output = (tmp_path / "rollout.log").read_text()
    records = {r.run_id: r for r in RunIndex(db).list()}
    assert set(records) == {f"r-{g}-s{k}" for g in ("recipes", "habits") for k in range(2)}, output
    finished = [run_id for run_id, r in records.items() if r.status == "finished"]
    # Only the habits trajectory the scenario makes fail is failed; the killed actor's runs finished elsewhere.
    unfinished = set(records) - set(finished)
    assert len(unfinished) <= 1 and all(run_id.startswith("r-habits-") for run_id in unfinished), output
    assert victim.run_id in finished
    assert records[victim.run_id].pid != victim.pid, "it was continued by another actor"
    steps_after = asyncio.run(final_state(db, victim.run_id))["steps"]
    # The coder turns recorded before the kill were kept, not asked again (a step still in progress
    # at the kill gains its execution and grades afterwards, so only the coder's part is compared).
    coder_part = [(s["index"], s["prompt"], s["completion"]) for s in steps_before]
    assert [(s["index"], s["prompt"], s["completion"]) for s in steps_after[: len(steps_before)]] == coder_part
    # Every output folder written as in-process; nothing the dead actor started is left running.
    for run_id in finished:
        assert json.loads((tmp_path / "runs" / run_id / "run.json").read_text())["status"] == "finished"
    assert not [g for g in owned_groups(db, victim.pid) if group_alive(g)]
    exported = subprocess.run(
        [CLI, "export", "--format", "rewards", "--out", str(tmp_path / "rewards.jsonl"), "--db", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    lines = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert sorted(line["trajectory_id"] for line in lines) == sorted(finished)
