"""Endpoints that misbehave, over HTTP against the scripted server: waits, Retry-After, refusals,
fallback, hanging calls, every way a structured answer fails, prompts that are too long."""

from __future__ import annotations

import json
import time

import pytest

from tests.fake_endpoints import fake_endpoint
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import ModelSettings
from webgen_agent.core.views import ScreenshotJudgement
from webgen_agent.tools.endpoints import EndpointEvent, listen
from webgen_agent.tools.models import ModelCallError, ask_structured, complete

GOOD = {"description": "A page.", "score": 4, "suggestions": ["More colour."]}
ASK = [{"role": "user", "content": "Grade this page."}]
TOO_LONG = "This model's maximum context length is 2000 tokens. However, your messages resulted in 4000 tokens."

RULES = [
    # retried kinds, in turn, then an answer
    {"model": "busy", "times": 1, "fault": {"status": 429, "message": "slow down", "retry_after": 1}},
    {"model": "busy", "times": 1, "fault": {"status": 500, "message": "boom"}},
    {"model": "busy", "times": 1, "fault": {"status": 503, "message": "loading"}},
    {"model": "busy", "times": 1, "fault": {"drop": True}},
    {"model": "busy", "content": "made it"},
    # never retried
    {"model": "bad-request", "fault": {"status": 400, "message": "unknown field 'foo'"}},
    {"model": "no-key", "fault": {"status": 401, "message": "invalid api key"}},
    {"model": "no-model", "fault": {"status": 404, "message": "model not found"}},
    # always down; the fallback answers
    {"model": "down", "fault": {"status": 503, "message": "maintenance"}},
    {"model": "backup", "content": "from the backup"},
    {"model": "dead", "fault": {"status": 503, "message": "maintenance"}},
    {"model": "dead-too", "fault": {"status": 502, "message": "bad gateway"}},
    # a call that hangs once
    {"model": "hangs", "times": 1, "delay_s": 30, "content": "too late"},
    {"model": "hangs", "content": "in time"},
    # structured answers that fail once each, then a good one
    {"model": "cut", "times": 1, "finish_reason": "length", "content": '{"description": "A pa'},
    {"model": "filtered", "times": 1, "finish_reason": "content_filter", "content": ""},
    {"model": "refuses", "times": 1, "refusal": "I cannot grade pages."},
    {"model": "empty", "times": 1, "fault": {"empty_choices": True}},
    {"model": "prose", "times": 1, "content": "It looks nice, I would say four."},
    {
        "model": "no-format",
        "schema": "ScreenshotJudgement",
        "fault": {"status": 400, "message": "response_format is not supported"},
    },
    {"model": "*", "schema": "ScreenshotJudgement", "json": GOOD},
    {"model": "no-format", "json": GOOD},
    # a model with a small context
    {"model": "small", "min_chars": 4000, "fault": {"status": 400, "message": TOO_LONG}},
    {"model": "small", "content": "fits now"},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("endpoints") / "scenario.json"
    path.write_text(json.dumps({"name": "endpoints", "rules": RULES}))
    with ScriptedServer(Scenario.load(path)) as running:
        yield running


def settings(server, model: str, **extra) -> ModelSettings:
    quick = {"retry_initial_s": 0.05, "retry_max_s": 0.2, "patience_s": 30.0}
    return ModelSettings(model=model, base_url=server.base_url, api_key="k", **{**quick, **extra})


def requests_for(server, model: str) -> list[int]:
    return [r.status for r in server.requests if r.model == model]


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (waits out the endpoint's Retry-After)
async def test_busy_endpoint_is_waited_out_honouring_retry_after(server):
    events: list[EndpointEvent] = []
    started = time.monotonic()
    with listen(events.append):
        result = await complete(settings(server, "busy"), "coder", ASK)
    assert result.text == "made it"
    assert requests_for(server, "busy") == [429, 500, 503, 0, 200]  # 0: connection dropped mid-answer
    waits = [e for e in events if e.kind == "wait"]
    assert [w.attempt for w in waits] == [1, 2, 3, 4]
    assert "HTTP 429" in waits[0].reason and waits[0].sleep_s >= 1.0  # Retry-After: 1
    assert "cannot reach" in waits[3].reason
    assert time.monotonic() - started >= 1.0
    assert "retry 1 in 1.0s" in waits[0].line()


@pytest.mark.parametrize(("model", "status"), [("bad-request", 400), ("no-key", 401), ("no-model", 404)])
async def test_refused_requests_are_one_line_errors_at_once(server, model, status):
    events: list[EndpointEvent] = []
    with listen(events.append), pytest.raises(ModelCallError) as caught:
        await complete(settings(server, model), "coder", ASK)
    message = str(caught.value)
    assert f"HTTP {status}" in message and "\n" not in message and message.startswith(f"coder model {model!r}")
    assert requests_for(server, model) == [status] and events == []


async def test_after_the_patience_the_fallback_answers_and_is_recorded(server):
    events: list[EndpointEvent] = []
    with listen(events.append):
        result = await complete(settings(server, "down", patience_s=0.6, fallback_model="backup"), "coder", ASK)
    assert result.text == "from the backup" and result.fallback and result.model == "backup"
    assert [e.kind for e in events][-1] == "fallback" and events[-1].model == "backup"
    assert requests_for(server, "down")[0] == 503  # the primary was asked first


async def test_both_endpoints_down_is_one_error_naming_both(server):
    role = settings(server, "dead", patience_s=0.3, fallback_model="dead-too", fallback_base_url=server.base_url)
    with pytest.raises(
        ModelCallError, match="'dead': gave up after 0.3s: HTTP 503.*; then .*'dead-too': gave up after 0.3s: HTTP 502"
    ):
        await complete(role, "feedback", ASK)


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (waits for the per-call timeout)
async def test_a_hanging_call_is_cut_and_retried(server):
    events: list[EndpointEvent] = []
    started = time.monotonic()
    with listen(events.append):
        result = await complete(settings(server, "hangs", timeout_s=1.0), "coder", ASK)
    assert result.text == "in time" and time.monotonic() - started < 10
    assert "in time" in events[0].reason or "no answer" in events[0].reason


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("cut", "cut off at the length limit"),
        ("filtered", "content filter"),
        ("refuses", "refused: I cannot grade pages."),
        ("empty", "without a message"),
        ("prose", "no JSON object found"),
    ],
)
async def test_every_unusable_structured_answer_is_retried_with_its_reason(server, model, problem):
    answer = await ask_structured(settings(server, model), "vlm", ASK, ScreenshotJudgement)
    assert answer.value == ScreenshotJudgement(**GOOD), answer.error
    assert answer.attempts == 2 and problem in answer.problems[0]


async def test_a_rejected_response_format_moves_the_schema_into_the_prompt(server):
    answer = await ask_structured(settings(server, "no-format"), "vlm", ASK, ScreenshotJudgement)
    assert answer.value == ScreenshotJudgement(**GOOD) and answer.attempts == 1
    assert requests_for(server, "no-format") == [400, 200]


async def test_a_prompt_too_long_is_condensed_older_feedback_first(server):
    conversation = [
        {"role": "system", "content": "You write websites."},
        {"role": "user", "content": "Build a notes page."},
        {"role": "assistant", "content": "<boltArtifact>first</boltArtifact>"},
        {"role": "user", "content": "Old feedback. " + "x" * 5000},
        {"role": "assistant", "content": "<boltArtifact>second</boltArtifact>"},
        {"role": "user", "content": "Latest feedback: add a search box."},
    ]
    events: list[EndpointEvent] = []
    with listen(events.append):
        result = await complete(settings(server, "small"), "coder", conversation)
    assert result.text == "fits now" and result.sent is not None
    assert [e.kind for e in events] == ["condensed"]
    assert result.sent[-1] == conversation[-1] and result.sent[1] == conversation[1]
    assert len(result.sent[3]["content"]) < 1000 and result.sent[3]["content"].startswith("Old feedback.")
    assert requests_for(server, "small") == [400, 200]


@pytest.mark.parametrize(
    ("kind", "answered"), [("html", "an HTML page ('Welcome to nginx!')"), ("junk", "bytes that are not HTTP")]
)
async def test_an_answer_that_is_not_an_openai_endpoints_is_not_retried(kind, answered):
    """A web page or bytes that are not HTTP never become a completion: one line naming what came back,
    no waiting out the patience as for a 503."""
    events: list[EndpointEvent] = []
    with fake_endpoint(kind) as url:
        role = ModelSettings(model="m", base_url=url, api_key="k", patience_s=60.0)
        with listen(events.append), pytest.raises(ModelCallError) as caught:
            await complete(role, "coder", ASK)
    assert f"{url} is not an OpenAI-compatible endpoint: it answered {answered}" in str(caught.value)
    assert "\n" not in str(caught.value) and events == []  # no wait, no retry
