"""An actor killed at a chosen moment, in this process's pool on the shared local Ray instance: one
killed after the coder answered costs no coder call (the reply is kept as it arrives), and a job
whose actor is killed three times in a row before it gets on is given up, resumable."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers import task_results
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex


def _landing_with(*first: dict[str, object]) -> Scenario:
    """The landing scenario with ``first`` rules ahead of its own."""
    from webgen_agent.apps.scripted.views import Rule

    landing = Scenario.load(scenario_path("landing"))
    return landing.model_copy(update={"rules": [Rule.model_validate(r) for r in first] + landing.rules})


def _one_trajectory_pool(tmp_path: Path, base_url: str, chromium: str, ray_address: str, name: str):
    from tests.test_costs import REQUIREMENT
    from webgen_agent.apps.cluster.rollout import rollout_pool
    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.apps.rollout.service import plan_rollout, rollout_context
    from webgen_agent.tools.webgen_bench import BenchRecord

    record = BenchRecord.model_validate({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []})
    context = rollout_context(scripted_context(base_url, chromium=chromium, gui_max_actions=3), max_steps=3)
    settings = RaySettings(address=ray_address, actors=1, runs_per_actor=1, cpus_per_run=0.5)
    pool = rollout_pool(settings, context=context, db=tmp_path / "webgen.db", out_dir=tmp_path / "runs")
    return pool, plan_rollout([record], samples=1, name=name)


@pytest.mark.e2e
async def test_a_coder_reply_received_before_its_actor_died_is_not_asked_again(tmp_path, chromium_path, ray_address):
    from collections import Counter

    from webgen_agent.apps.cluster.rollout import rollout_on_pool

    # The first test instruction keeps the Generator waiting after the coder has answered: the actor
    # dies inside the node, before its step is checkpointed.
    held = {"model": "scripted-feedback", "schema": "TestInstruction", "times": 1, "delay_s": 120}
    held["json"] = {"instruction": "1. Click 'Show opening hours'. Answer YES if the hours appear, otherwise NO."}
    db = tmp_path / "webgen.db"
    with ScriptedServer(_landing_with(held)) as server:
        pool, specs = _one_trajectory_pool(tmp_path, server.base_url, chromium_path, ray_address, "kept")
        run_id = specs[0].run_id
        async with pool:
            work = asyncio.create_task(rollout_on_pool(pool, specs))
            deadline = time.monotonic() + 300
            while not any(r.model == "scripted-coder" and r.status == 200 for r in server.requests):
                assert not work.done() and time.monotonic() < deadline, "the coder was never asked"
                await asyncio.sleep(0.1)
            # The reply reaches the checkpoint as soon as it arrives (or, without that, never: 15 s is plenty).
            for _ in range(150):
                if task_results(db, run_id):
                    break
                await asyncio.sleep(0.1)
            victim = RunIndex(db).get(run_id)
            assert victim is not None and victim.status == "running"
            os.kill(victim.pid, signal.SIGKILL)  # the actor process, inside the Generator node
            outcomes = await asyncio.wait_for(work, 400)
        coder_turns = Counter(r.turn for r in server.requests if r.model == "scripted-coder")
    assert [(o.run_id, o.status) for o in outcomes] == [(run_id, "finished")], outcomes
    assert RunIndex(db).get(run_id).pid != victim.pid, "it was continued by the replacement actor"
    # The reply received before the kill was the step: the coder was asked each turn once.
    assert coder_turns == Counter({0: 1, 1: 1}), coder_turns


@pytest.mark.e2e
async def test_a_job_whose_actor_dies_each_time_before_it_gets_on_is_given_up(tmp_path, chromium_path, ray_address):
    from webgen_agent.apps.cluster.driver import GIVEN_UP
    from webgen_agent.apps.cluster.rollout import rollout_on_pool

    # The first three coder calls never answer in time: each attempt is killed before any node ends.
    stalled = {"model": "scripted-coder", "turn": 0, "times": 3, "delay_s": 120, "content": "never seen"}
    db = tmp_path / "webgen.db"
    with ScriptedServer(_landing_with(stalled)) as server:
        pool, specs = _one_trajectory_pool(tmp_path, server.base_url, chromium_path, ray_address, "doomed")
        run_id = specs[0].run_id
        async with pool:
            work = asyncio.create_task(rollout_on_pool(pool, specs))
            killed: list[int] = []
            deadline = time.monotonic() + 400
            while len(killed) < 3:  # each time the job runs on a new actor, that actor is killed
                assert not work.done(), work.result()
                assert time.monotonic() < deadline, f"the job was not sent again after {len(killed)} kill(s)"
                record = RunIndex(db).get(run_id)
                if record is not None and record.status == "running" and record.pid not in killed:
                    os.kill(record.pid, signal.SIGKILL)
                    killed.append(record.pid)
                await asyncio.sleep(0.1)
            outcomes = await asyncio.wait_for(work, 300)
        coder_answers = [r.status for r in server.requests if r.model == "scripted-coder"]
    # Three deaths in a row without progress: reported failed, and resumable (a re-run continues it).
    assert [(o.run_id, o.status, o.error) for o in outcomes] == [(run_id, "failed", GIVEN_UP)], outcomes
    assert RunIndex(db).get(run_id).status == "interrupted"
    assert 200 not in coder_answers, "the job never got a reply, so it never got on"
