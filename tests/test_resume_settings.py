"""``resume_run`` goes on with the settings a run was started with, whatever context resumes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.graph.api import continued_context, resume_run, run_requirement


def test_recorded_settings_beat_the_given_context_and_changes_beat_both() -> None:
    host = scripted_context("http://127.0.0.1:1/v1", max_steps=9, profile="upstream", page_timeout_s=7.0)
    recorded = {"max_steps": 3, "profile": "default", "review": ["plan"], "gone_setting": 1, "page_timeout_s": 1}
    context = continued_context(host, recorded, {"budget_tokens": 500, "review": []})
    assert (context.max_steps, context.profile, context.budget_tokens, context.review) == (3, "default", 500, [])
    assert context.page_timeout_s == 7.0  # the host's own settings are not run settings
    assert context.coder == host.coder


def test_the_host_api_keys_go_on_with_the_run() -> None:
    host = scripted_context("http://127.0.0.1:1/v1")
    host = host.model_copy(update={"coder": host.coder.model_copy(update={"api_key": SecretStr("sk-coder")})})
    context = continued_context(host, {"max_steps": 3})
    assert context.coder.api_key.get_secret_value() == "sk-coder"


@pytest.mark.e2e
async def test_a_run_resumed_from_another_context_keeps_its_review_points(tmp_path: Path, chromium_path: str) -> None:
    db = tmp_path / "webgen.db"
    runs = str(tmp_path / "runs")
    async with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        started = scripted_context(server.base_url, runs_dir=runs, review=["plan"], chromium=chromium_path)
        waiting = await run_requirement(DEMO_REQUIREMENT, context=started, run_id="s", db_path=db)
        assert waiting.status == "review" and waiting.review is not None and waiting.review.point == "plan"
        calls = len(server.requests)
        # Another host's context: no review points, another profile and step budget.
        host = scripted_context(server.base_url, runs_dir=runs, max_steps=9, profile="upstream", chromium=chromium_path)
        again = await resume_run("s", context=host, db_path=db)
        assert again.status == "review" and again.review == waiting.review  # asked again, as recorded
        assert len(server.requests) == calls  # nothing ran under the other context's rules
