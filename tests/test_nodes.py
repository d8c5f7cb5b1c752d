"""Nodes facing bad input: malformed replies, escaping paths, shell actions, out-of-range grades, llm Critic."""

from __future__ import annotations

from pathlib import Path

import pytest

from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.graph.api import run_requirement

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def robust_run(tmp_path_factory, chromium_path):
    base = tmp_path_factory.mktemp("robust")
    with ScriptedServer(Scenario.load(scenario_path("robustness"))) as server:
        context = scripted_context(server.base_url, critic="llm", max_steps=3)
        result = await run_requirement(
            "A page that shows the user's notes.",
            context=context,
            run_id="rb",
            out_dir=base / "out",
            db_path=base / "webgen.db",
        )
        requests = list(server.requests)
    state = await final_state(base / "webgen.db", "rb")
    return result, state, BlobStore(base / "webgen.db"), base, requests


def last_user_message(store: BlobStore, step: dict) -> str:
    return store.get_text(store.get_json(step["prompt"])[-1]["hash"])


def test_malformed_reply_becomes_feedback_not_a_crash(robust_run):
    result, state, store, _, _ = robust_run
    first, second = state["steps"][0], state["steps"][1]
    assert first["action"] == "malformed" and first["errored"] and not first["format_ok"]
    assert "execution" not in first  # nothing was run for a reply without code
    assert "No <boltArtifact>" in last_user_message(store, second)
    assert result.status == "finished"


def test_escaping_paths_and_shell_actions_are_refused_and_reported(robust_run):
    _, state, store, base, _ = robust_run
    step = state["steps"][1]
    problems = "\n".join(step["problems"])
    assert "../escape.txt: '..' would leave the project folder" in problems
    assert "/tmp/absolute.txt: absolute paths are not allowed" in problems
    assert "Shell action not run" in problems
    assert set(store.manifest(step["files"])) == {"index.html"}
    assert not (base / "out" / "escape.txt").exists() and not Path("/tmp/absolute.txt").exists()
    assert not (base / "out" / "workspace" / "shell-ran.txt").exists()
    assert "would leave the project folder" in last_user_message(store, state["steps"][2])


def test_out_of_range_grade_is_retried_and_llm_critic_plan_reaches_the_coder(robust_run):
    _, state, store, _, requests = robust_run
    judge_calls = [r for r in requests if r.model == "scripted-vlm"]
    assert len(judge_calls) == 2  # score 9 was refused by validation and asked again
    assert state["steps"][1]["screenshot_score"] == 3
    feedback = last_user_message(store, state["steps"][2])
    assert "Repair plan:" in feedback and "Render a list of sample notes" in feedback
    assert "[partly] Show the user's notes" in feedback
    assert state["steps"][2]["action"] == "finish" and state["chosen_step"] == 1
