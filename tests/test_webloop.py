"""The WebLoop loop end to end on the scripted server: a ``--loop webloop --logprobs`` rollout through
the CLI (shared policy by default), its ``--format webloop`` export with every role's sampled text and
logprobs, and D and H recomputed from the stored checks.

Scenario ``webloop``: one instruction with two test cases, two samples. The generated page passes
the counter check and fails the footer check. One critique judges both right (D = 1) and its
refinement passes both (H = +0.5); the other judges both wrong (D = 0) and its refinement breaks
the counter (H = -0.5).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import scripted_models
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import rollout_context
from webgen_agent.apps.rollout.settings import rollout_shared_policy
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import load_trajectories
from webgen_agent.checkpoints.requirements import RequirementIndex
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.views import CodeCritique
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.checker import instruction_key

CLI = str(Path(sys.executable).parent / "webgen-agent")
RECORDS = Path(scenario_path("webloop")).parent / "webloop" / "records.jsonl"
CREDIT = {"YES": 1.0, "PARTIAL": 0.5, "NO": 0.0}
AS_VERDICT = {"met": "YES", "partly": "PARTIAL", "unmet": "NO"}
e2e = pytest.mark.e2e


@dataclass
class Story:
    db: Path
    records: list[dict[str, Any]]
    d_only: list[dict[str, Any]]
    rules_used: list[int | None]
    models: dict[int | None, set[str]]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def story(tmp_path_factory, chromium_path) -> Story:
    base = tmp_path_factory.mktemp("webloop")
    db = base / "webgen.db"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    with ScriptedServer(Scenario.load(scenario_path("webloop"))) as server:
        cli(
            "rollout",
            "--profile",
            "default",
            "--data",
            str(RECORDS),
            "--samples",
            "2",
            "--workers",
            "2",
            "--loop",
            "webloop",  # the coder answers as Critic by default (one policy in every role)
            "--logprobs",
            "--critique-rounds",
            "1",
            "--max-steps",
            "4",
            "--gui-max-actions",
            "3",
            "--name",
            "w",
            "--out",
            str(base / "runs"),
            "--db",
            str(db),
            *scripted_models(server.base_url),
            env=env,
        )
        requests = list(server.requests)
    cli(
        "export",
        "--format",
        "webloop",
        "--critic-reward",
        "dh",
        "--out",
        str(base / "dh.jsonl"),
        "--db",
        str(db),
        env=env,
    )
    cli(
        "export",
        "--format",
        "webloop",
        "--critic-reward",
        "d",
        "--out",
        str(base / "d.jsonl"),
        "--db",
        str(db),
        env=env,
    )
    models: dict[int | None, set[str]] = {}
    for request in requests:
        models.setdefault(request.rule_index, set()).add(request.model)
    return Story(
        db=db,
        records=read_jsonl(base / "dh.jsonl"),
        d_only=read_jsonl(base / "d.jsonl"),
        rules_used=[r.rule_index for r in requests],
        models=models,
    )


def stored_checks(store: BlobStore, step: dict[str, Any]) -> list[str]:
    return [check["verdict"] for check in store.get_json(step["checks"])]


@e2e
def test_one_record_per_role_turn(story):
    roles = sorted((r["trajectory_id"], r["step"], r["role"]) for r in story.records)
    assert roles == sorted(
        (f"w-counter-s{k}", step, role)
        for k in range(2)
        for step, role in ((0, "generator"), (0, "critic"), (1, "refiner"))
    )
    # Trainer-ready like step-grpo: a message-list prompt and one assistant message as completion.
    from trl.data_utils import is_conversational

    for record in story.records:
        (completion,) = record["completion"]
        assert completion["role"] == "assistant" and completion["content"]
        assert is_conversational(record)
        if record["role"] == "critic":
            assert CodeCritique.model_validate_json(completion["content"])


@e2e
def test_every_role_turn_carries_the_logprobs_of_its_sampled_completion(story):
    """Generator, Critic and Refiner alike: the endpoint's logprobs (the scripted server's are 0) of
    exactly the exported completion, so that an importance ratio can be computed for every turn."""
    assert {r["role"] for r in story.records} == {"generator", "critic", "refiner"}
    for record in story.records:
        (completion,) = record["completion"]
        assert record["has_logprobs"] is True, record["role"]
        assert "".join(t["token"] for t in record["logprobs"]) == completion["content"], record["role"]
        assert (
            record["completion_logprobs"]
            == [t["logprob"] for t in record["logprobs"]]
            == [0.0] * len(record["logprobs"])
        )


@e2e
def test_the_critic_turn_is_its_sampled_text_and_the_prompt_that_produced_it(story):
    trajectories = {t.trajectory_id: t for t in asyncio.run(load_trajectories(story.db))}
    store = BlobStore(story.db)
    try:
        for record in (r for r in story.records if r["role"] == "critic"):
            step = trajectories[record["trajectory_id"]].steps[record["step"]]
            sampled = store.get(step["critic_completion"]).decode()
            assert record["completion"][0]["content"] == sampled  # as sampled, not re-serialised
            assert sampled != store.get(step["critique"]).decode()  # what was exported before it was kept
            assert record["prompt"] == store.get_json(step["critic_prompt"])
    finally:
        store.close()


@e2e
def test_d_and_h_are_recomputed_from_the_stored_checks(story):
    trajectories = asyncio.run(load_trajectories(story.db))
    store = BlobStore(story.db)
    try:
        seen = []
        for trajectory in trajectories:
            first, refined = trajectory.steps[0], trajectory.steps[1]
            before, after = stored_checks(store, first), stored_checks(store, refined)
            assert before == ["YES", "NO"]  # the page counts, and has no footer
            critique = store.get_json(first["critique"])
            statuses = {v["id"]: v["status"] for v in critique["verdicts"]}
            d = sum(AS_VERDICT[statuses[n]] == verdict for n, verdict in enumerate(before)) / len(before)
            h = sum(CREDIT[v] for v in after) / len(after) - sum(CREDIT[v] for v in before) / len(before)
            (record,) = [
                r for r in story.records if r["trajectory_id"] == trajectory.trajectory_id and r["role"] == "critic"
            ]
            assert record["d"] == pytest.approx(d) and record["h"] == pytest.approx(h)
            assert record["reward"] == pytest.approx(d + h)
            assert record["checks"] == before
            seen.append((d, h))
    finally:
        store.close()
    assert sorted(seen) == [(0.0, -0.5), (1.0, 0.5)]  # a low-D critic, and a refinement that made things worse


@e2e
def test_critic_reward_choice_and_group_relative_advantages_per_role(story):
    d_rewards = sorted(r["reward"] for r in story.d_only if r["role"] == "critic")
    assert d_rewards == [0.0, 1.0]
    critics = [r for r in story.records if r["role"] == "critic"]
    rewards = [r["reward"] for r in critics]
    mean = sum(rewards) / 2
    std = (sum((x - mean) ** 2 for x in rewards) / 1) ** 0.5
    for record in critics:
        assert record["advantage"] == pytest.approx((record["reward"] - mean) / (std + 1e-6))
    refiners = sorted(r["reward"] for r in story.records if r["role"] == "refiner")
    assert refiners == [0.0, 1.0]
    generators = [r for r in story.records if r["role"] == "generator"]
    assert [g["reward"] for g in generators] == [0.5, 0.5] and all(g["advantage"] == 0.0 for g in generators)


@e2e
def test_the_critic_is_execution_free_and_answered_by_the_coder_under_shared_policy(story):
    for record in (r for r in story.records if r["role"] == "critic"):
        text = " ".join(m["content"] for m in record["prompt"])
        assert "addEventListener" in text and "index.html" in text  # it read the code
        assert "lilac page" not in text and "YES -" not in text  # not the judge's or the checks' findings
        assert record["critic_model"] == "coder"
    assert story.models[0] | story.models.get(1, set()) == {"scripted-coder"}
    assert 2 not in story.rules_used  # the feedback model's critique rule never answered
    assert 3 not in story.rules_used  # the test cases were the requirements: none were written


@e2e
def test_requirements_are_written_once_per_instruction_and_shared(tmp_path, chromium_path, monkeypatch):
    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    requirement = "Build a counter page: an 'Add one' button that raises a visible count, and a footer that says 'Made with care'."
    db = tmp_path / "webgen.db"
    with ScriptedServer(Scenario.load(scenario_path("webloop"))) as server:
        context = scripted_context(server.base_url, loop="single", gui_max_actions=3)
        results = [
            asyncio.run(
                run_requirement(requirement, context=context, run_id=f"r{k}", out_dir=tmp_path / f"r{k}", db_path=db)
            )
            for k in range(2)
        ]
        used = [r.rule_index for r in server.requests]
    assert used.count(3) == 1  # the feedback model wrote the list once
    assert all(r.status == "finished" for r in results)
    trajectories = asyncio.run(load_trajectories(db))
    lists = {json.dumps(t.values["requirements"]) for t in trajectories}
    assert len(lists) == 1
    shared = json.loads(lists.pop())
    assert [item["task"] for item in shared][1] == "Look at the page footer."  # readable in the state
    store = BlobStore(db)
    try:
        assert store.get_json(RequirementIndex(db).get(instruction_key(requirement)) or "") == shared  # kept
        for trajectory in trajectories:
            assert stored_checks(store, trajectory.steps[0]) == ["YES", "NO"]
    finally:
        store.close()


def test_a_webloop_rollout_shares_the_policy_unless_told_and_asks_a_separate_critic_for_logprobs():
    assert rollout_shared_policy("webloop", None) is True
    assert rollout_shared_policy("webloop", False) is False
    assert rollout_shared_policy(None, None) is False and rollout_shared_policy("single", None) is False
    base = scripted_context("http://127.0.0.1:1/v1", loop="webloop")
    separate = rollout_context(base, logprobs=True)
    assert separate.coder.logprobs and separate.feedback.logprobs  # the separate Critic's turns are trained too
    shared = rollout_context(base.model_copy(update={"shared_policy": True}), logprobs=True)
    assert shared.coder.logprobs and not shared.feedback.logprobs
    assert not rollout_context(base).feedback.logprobs
