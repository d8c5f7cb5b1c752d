"""A rollout across two Ray nodes on this machine (Ray's own ``cluster_utils.Cluster``, as Ray's tests
run several nodes on one host) that loses one of them mid-way: its actor's trajectories continue on
a replacement node. Each node has its own state folder (process registry, dependency cache) through
its own environment; both share the PostgreSQL database (docs/scale.md)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.test_costs import REQUIREMENT
from webgen_agent.apps.cluster.rollout import rollout_on_pool, rollout_pool
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import plan_rollout, rollout_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.tools.webgen_bench import BenchRecord

pytestmark = pytest.mark.e2e


async def test_a_rollout_across_two_nodes_survives_losing_one(tmp_path: Path, postgres_cluster, chromium_path) -> None:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    node_env = {
        name: {"WEBGEN_STATE_DIR": str(tmp_path / name), "WEBGEN_CHROMIUM": chromium_path} for name in ("a", "b", "c")
    }
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "env_vars": node_env["a"], "include_dashboard": False}
    )
    second = cluster.add_node(num_cpus=1, env_vars=node_env["b"])
    db = postgres_cluster.new_database()
    records = [BenchRecord.model_validate({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []})]
    specs = plan_rollout(records, samples=4, name="n")
    # A slow grade gives every step a window in which the lost machine's actor holds a run mid-way.
    slow = Scenario.load(scenario_path("landing")).with_delay(2.0, schema="ScreenshotJudgement")
    try:
        ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
        with ScriptedServer(slow) as server:
            context = rollout_context(scripted_context(server.base_url, gui_max_actions=3), max_steps=3)
            settings = RaySettings(actors=2, runs_per_actor=2, cpus_per_run=0.5)
            async with rollout_pool(settings, context=context, db=db, out_dir=tmp_path / "out") as pool:
                await pool.start()
                nodes_before = {actor.where["node_id"] for actor in pool._actors}
                work = asyncio.create_task(rollout_on_pool(pool, specs))
                # The second machine is lost while its actor holds a run with a checkpointed step that
                # has not finished; another machine joins in its place (as an autoscaler adds one).
                deadline = time.monotonic() + 300
                while not (cut_off := await _mid_way_on(pool, second.node_id, db)):
                    assert not work.done() and time.monotonic() < deadline, "no run was mid-way on the second node"
                    await asyncio.sleep(0.2)
                cluster.remove_node(second, allow_graceful=False)
                cluster.add_node(num_cpus=1, env_vars=node_env["c"])
                outcomes = await work
                nodes_after = {actor.where["node_id"] for actor in pool._actors}
    finally:
        ray.shutdown()
        cluster.shutdown()
    # Scheduled across both machines, then continued on the one that replaced the lost one.
    assert len(nodes_before) == 2 and len(nodes_after) == 2 and nodes_before != nodes_after
    assert second.node_id in nodes_before and second.node_id not in nodes_after
    assert [o.status for o in outcomes] == ["finished"] * 4, [o.error for o in outcomes]
    runs = {r.run_id: r for r in RunIndex(db).list()}
    assert len(runs) == 4 and all(r.status == "finished" for r in runs.values())
    # The runs cut off mid-way continued from their checkpoints: no step was lost.
    assert all(runs[run_id].steps >= steps for run_id, steps in cut_off.items()), cut_off
    # Each machine kept its own process registry (its own state folder); the database was the shared one.
    assert (tmp_path / "a" / "processes.jsonl").exists() and (tmp_path / "b" / "processes.jsonl").exists()


async def _mid_way_on(pool, node_id: str, db) -> dict[str, int]:
    """The runs an actor on ``node_id`` is driving that have a checkpointed step and are still running."""
    running = {run_id for actor in pool._actors if actor.where["node_id"] == node_id for run_id in actor.running}
    mid_way = {}
    for run_id in running:
        record = await RunIndex(db).aget(run_id)
        steps = len((await final_state(db, run_id)).get("steps", [])) if record is not None else 0
        if record is not None and record.status == "running" and steps >= 1:
            mid_way[run_id] = steps
    return mid_way
