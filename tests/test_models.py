"""Model clients against an OpenAI-compatible server over HTTP: structured answers and their failures."""

from __future__ import annotations

import json
import time

import pytest

from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import ModelSettings
from webgen_agent.core.views import ScreenshotJudgement
from webgen_agent.tools.models import ModelCallError, ask_structured, complete

GOOD = {"description": "A page.", "score": 4, "suggestions": ["More colour."]}
RULES = [
    {"model": "ignores-schema", "content": "Here is my grade:\n```json\n" + json.dumps(GOOD) + "\n```\nHope it helps."},
    {"model": "prose-json", "content": "Sure. " + json.dumps(GOOD) + " That is all."},
    {"model": "never-valid", "json": {"description": "x", "score": 0, "suggestions": []}},
    {
        "model": "rejects-format",
        "schema": "ScreenshotJudgement",
        "fault": {"status": 400, "message": "response_format is not supported"},
    },
    {"model": "rejects-format", "json": GOOD},
    {"model": "flaky", "times": 1, "fault": {"status": 500, "message": "overloaded", "retry_after_s": 0.01}},
    {"model": "flaky", "json": GOOD},
    {"model": "plain", "content": "hello"},
]
ASK = [{"role": "user", "content": "Grade this page."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "scenario.json"
    path.write_text(json.dumps({"name": "models", "rules": RULES}))
    with ScriptedServer(Scenario.load(path)) as running:
        yield running


def settings(server, model: str, **extra) -> ModelSettings:
    return ModelSettings(model=model, base_url=server.base_url, api_key="k", **extra)


@pytest.mark.parametrize("model", ["ignores-schema", "prose-json", "rejects-format", "flaky"])
async def test_structured_answers_arrive_however_the_endpoint_behaves(server, model):
    answer = await ask_structured(settings(server, model), "vlm", ASK, ScreenshotJudgement)
    assert answer.value == ScreenshotJudgement(**GOOD)
    assert answer.error is None and answer.usage.input_tokens > 0


async def test_invalid_answers_are_retried_then_reported_not_raised(server):
    answer = await ask_structured(settings(server, "never-valid"), "vlm", ASK, ScreenshotJudgement)
    assert answer.value is None and answer.attempts == 3
    assert "score" in answer.error and "greater than or equal to 1" in answer.error
    assert answer.usage.calls == 3


async def test_completion_reports_usage_and_logprobs(server):
    result = await complete(settings(server, "plain", logprobs=True), "coder", ASK)
    assert result.text == "hello" and result.usage.output_tokens > 0 and result.logprobs


async def test_completion_token_ids_when_asked_for(server):
    """vLLM-style ``return_token_ids`` over HTTP: the prompt's and the completion's ids come back, the
    completion's aligned with its logprobs; not asked for, none are (and none are requested)."""
    asked = await complete(settings(server, "plain", logprobs=True, token_ids=True), "coder", ASK)
    assert asked.token_ids is not None and len(asked.token_ids) == len(asked.logprobs or []) == 1
    assert asked.prompt_token_ids is not None and len(asked.prompt_token_ids) == len("Grade this page.".split())
    plain = await complete(settings(server, "plain", logprobs=True), "coder", ASK)
    assert plain.token_ids is None and plain.prompt_token_ids is None and plain.logprobs


async def test_dead_endpoint_is_a_clear_error_quickly():
    dead = ModelSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", patience_s=1.0, timeout_s=5)
    started = time.monotonic()
    with pytest.raises(ModelCallError, match="coder model 'm': gave up after 1s: cannot reach http://127.0.0.1:9/v1"):
        await complete(dead, "coder", ASK)
    assert time.monotonic() - started < 30


def test_a_host_may_run_the_agent_under_several_event_loops(server):
    # An app calling asyncio.run twice must not hit a client bound to the first, closed loop.
    import asyncio

    for _ in range(2):
        assert asyncio.run(complete(settings(server, "plain"), "coder", ASK)).text == "hello"
