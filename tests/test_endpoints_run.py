"""Whole runs against endpoints that misbehave: a coder endpoint failing 16 times in a row is waited
out; a vision endpoint that breaks off the GUI test stops the run unscored instead of grading the site."""

from __future__ import annotations

import time
from typing import Any

import pytest

from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Rule, Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.rewards import reward_pool
from webgen_agent.core.context import AgentContext
from webgen_agent.graph.api import run_requirement
from webgen_agent.tools.models import ModelCallError

pytestmark = pytest.mark.e2e

REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."
FAULTS: list[dict[str, Any]] = [
    {"status": 429, "message": "rate limited", "retry_after": 1},
    {"status": 500, "message": "internal error"},
    {"status": 503, "message": "model loading"},
    {"drop": True},
]


def landing_with(first: list[dict[str, Any]]) -> Scenario:
    landing = Scenario.load(scenario_path("landing"))
    rules = [Rule.model_validate(rule) for rule in first] + landing.rules
    return Scenario(name="landing-faults", rules=rules)


def quick(context: AgentContext, role: str, **settings: float) -> AgentContext:
    updated = getattr(context, role).model_copy(update=settings)
    return context.model_copy(update={role: updated})


async def test_sixteen_failures_in_a_row_are_waited_out_and_the_run_finishes(tmp_path, chromium_path) -> None:
    faults = [{"model": "scripted-coder", "turn": 0, "times": 1, "fault": FAULTS[i % 4]} for i in range(16)]
    events: list[dict[str, Any]] = []
    with ScriptedServer(landing_with(faults)) as server:
        context = scripted_context(server.base_url, max_steps=3)
        context = quick(context, "coder", patience_s=120.0, retry_initial_s=0.05, retry_max_s=0.2)
        started = time.monotonic()
        result = await run_requirement(
            REQUIREMENT,
            context=context,
            run_id="faults",
            out_dir=tmp_path / "out",
            db_path=tmp_path / "webgen.db",
            on_progress=events.append,
        )
        elapsed = time.monotonic() - started
        coder = [r.status for r in server.requests if r.model == "scripted-coder"]
    assert result.status == "finished"
    assert coder[:17] == [429, 500, 503, 0] * 4 + [200]
    assert elapsed >= 4.0, "each 429 said Retry-After: 1"
    waits = [e for e in events if e.get("phase") == "wait"]
    assert len(waits) == 16 and all(e["node"] == "generator" for e in waits)
    assert "HTTP 429" in waits[0]["message"] and "cannot reach" in waits[3]["message"]
    state = await final_state(tmp_path / "webgen.db", "faults")
    first = state["steps"][0]
    record = first["endpoint"]["generator/coder"]
    assert record["retries"] == 16 and record["waited_s"] >= 4.0
    assert any("HTTP 503" in reason for reason in record["reasons"])
    # The failures are the endpoint's, not the model's: the step is judged on its page alone.
    assert not first["errored"] and first["screenshot_score"] == 3
    assert reward_pool(state["steps"], "default")[0].reward == 3.0


async def test_a_vision_endpoint_that_breaks_off_the_gui_test_stops_the_run_unscored(tmp_path, chromium_path) -> None:
    agent_down = [
        {"model": "scripted-vlm", "contains": ["<browser_state>"], "fault": {"status": 500, "message": "GPU lost"}}
    ]
    with ScriptedServer(landing_with(agent_down)) as server:
        context = scripted_context(server.base_url, max_steps=3, gui_max_actions=3)
        context = quick(context, "vlm", patience_s=0.5, retry_initial_s=0.05, retry_max_s=0.1)
        with pytest.raises(ModelCallError, match="vlm model 'scripted-vlm' \\(GUI agent\\):.*GPU lost|failed 2 calls"):
            await run_requirement(
                REQUIREMENT,
                context=context,
                run_id="gui-down",
                out_dir=tmp_path / "out",
                db_path=tmp_path / "webgen.db",
            )
    state = await final_state(tmp_path / "webgen.db", "gui-down")
    tested = [s for s in state["steps"] if s["screenshot_score"] >= 4]
    assert tested, "the run reached a GUI test"
    assert all(s["gui_score"] == 0 and s["gui_passed"] is None for s in state["steps"])
