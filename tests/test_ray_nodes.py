"""A rollout across two Ray nodes on this machine (Ray's own ``cluster_utils.Cluster``, as Ray's tests
run several nodes on one host) that loses one of them mid-way: its actor's trajectories continue on
a replacement node. Each node has its own state folder (process registry, dependency cache) through
its own environment; both share the PostgreSQL database (docs/scaling.md)."""

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
    try:
        ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
        with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
            context = rollout_context(scripted_context(server.base_url, gui_max_actions=3), max_steps=3)
            settings = RaySettings(actors=2, runs_per_actor=2, cpus_per_run=0.5)
            async with rollout_pool(settings, context=context, db=db, out_dir=tmp_path / "out") as pool:
                await pool.start()
                nodes_before = {actor.where["node_id"] for actor in pool._actors}
                work = asyncio.create_task(rollout_on_pool(pool, specs))
                deadline = time.monotonic() + 300
                while not any(r.steps for r in await RunIndex(db).alist()):
                    assert not work.done() and time.monotonic() < deadline, "no trajectory got a step"
                    await asyncio.sleep(0.2)
                # The second machine is lost; another one joins in its place (as an autoscaler adds one).
                cluster.remove_node(second, allow_graceful=False)
                cluster.add_node(num_cpus=1, env_vars=node_env["c"])
                outcomes = await work
                nodes_after = {actor.where["node_id"] for actor in pool._actors}
    finally:
        ray.shutdown()
        cluster.shutdown()
    # Scheduled across both machines, then continued on the one that replaced the lost one.
    assert len(nodes_before) == 2 and len(nodes_after) == 2 and nodes_before != nodes_after
    assert [o.status for o in outcomes] == ["finished"] * 4, [o.error for o in outcomes]
    runs = RunIndex(db).list()
    assert len(runs) == 4 and all(r.status == "finished" for r in runs)
    # Each machine kept its own process registry (its own state folder); the database was the shared one.
    assert (tmp_path / "a" / "processes.jsonl").exists() and (tmp_path / "b" / "processes.jsonl").exists()
