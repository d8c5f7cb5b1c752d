"""The scripted model server answers the real client stacks over HTTP (openai SDK, langchain-openai,
browser-use's ChatOpenAI) with text, JSON, tool calls, streams, faults and scripted agent steps."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from tests.scripted_agent import agent_state_message, browser_use_output_model
from webgen_agent.apps.scripted.engine import IMAGE_TOKENS, MALFORMED_CONTENT, whitespace_tokens
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario, ScenarioError

TINY_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002"
        "00000100ffff03000006000557bfabd40000000049454e44ae426082"
    )
).decode()


SCENARIO = {
    "name": "client-stacks",
    "description": "Rules for the client tests; each test uses its own model name.",
    "rules": [
        {"model": "chat", "turn": 0, "contains": ["hello"], "content": "Hi there, I am scripted."},
        {"model": "chat", "turn": 1, "last_contains": ["again"], "content": "Second turn answer."},
        {"model": "chat", "turn": 1, "content": "Second turn, other question."},
        {"model": "judge", "schema": "Verdict", "json": {"passed": True, "score": 4, "notes": "looks fine"}},
        {"model": "fc", "json": {"passed": False, "score": 2, "notes": "via tool"}},
        {"model": "tools", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {
            "model": "flaky",
            "times": 1,
            "fault": {"status": 500, "message": "temporary", "retry_after_s": 0.01},
        },
        {"model": "flaky", "content": "recovered"},
        {"model": "broken", "fault": {"malformed": True}},
        {"model": "garbage", "fault": {"invalid_body": True}},
        {"model": "down", "fault": {"status": 503, "message": "overloaded", "retry_after_s": 0.01}},
        {"model": "slow", "delay_s": 0.6, "content": "slow answer"},
        {"model": "vision", "content": "I see a tiny image."},
        {
            "model": "agent",
            "turn": 0,
            "page_contains": ["What needs doing?"],
            "agent": {
                "actions": [
                    {"input": {"target": "What needs doing?", "text": "Buy milk"}},
                    {"click": {"target": "add item"}},
                ],
                "memory": "typed and clicked",
            },
        },
        {
            "model": "agent",
            "turn": 1,
            "page_contains": ["Todo: Buy milk"],
            "agent": {
                "actions": [{"done": {"text": "YES - listed", "success": True}}],
            },
        },
        {"model": "agent", "turn": 2, "agent": {"actions": [{"click": {"target": "No such button"}}]}},
        {"model": "agent", "turn": 3, "agent": {"actions": [{"scroll": "down"}, {"wait": {"seconds": 1}}]}},
        {"model": "*", "contains": ["catch-all"], "content": "caught"},
    ],
}


class Verdict(BaseModel):
    passed: bool = Field(description="Whether the site passed.")
    score: int = Field(ge=1, le=5, description="Grade 1-5.")
    notes: str = Field(description="Short notes.")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Scenario.model_validate(SCENARIO)) as running:
        yield running


def records(server: ScriptedServer, model: str) -> list[tuple[int | None, int | None, int]]:
    return [(r.turn, r.rule_index, r.status) for r in server.requests if r.model == model]


def client(server: ScriptedServer, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", **kwargs)


# ---- openai SDK ----


def test_openai_sdk_plain_text_with_usage(server: ScriptedServer) -> None:
    prompt = "hello scripted model, how are you?"
    reply = client(server).chat.completions.create(model="chat", messages=[{"role": "user", "content": prompt}])
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.content == "Hi there, I am scripted."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == -(-len(prompt) // 4)
    assert reply.usage.completion_tokens == -(-len("Hi there, I am scripted.") // 4)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_turn_counts_assistant_messages_and_last_contains(server: ScriptedServer) -> None:
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi there, I am scripted."},
    ]
    sdk = client(server)
    again = sdk.chat.completions.create(model="chat", messages=[*history, {"role": "user", "content": "say it again"}])
    other = sdk.chat.completions.create(model="chat", messages=[*history, {"role": "user", "content": "what now?"}])
    assert again.choices[0].message.content == "Second turn answer."
    assert other.choices[0].message.content == "Second turn, other question."


def test_image_inputs_cost_fixed_tokens(server: ScriptedServer) -> None:
    content = [
        {"type": "text", "text": "describe this"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{TINY_PNG}", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{TINY_PNG}"}},
    ]
    reply = client(server).chat.completions.create(model="vision", messages=[{"role": "user", "content": content}])
    assert reply.choices[0].message.content == "I see a tiny image."
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == -(-len("describe this") // 4) + 2 * IMAGE_TOKENS


def test_streaming_answer_ends_with_done_and_usage(server: ScriptedServer) -> None:
    stream = client(server).chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "hello stream"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hi there, I am scripted."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0

    raw = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "chat", "messages": [{"role": "user", "content": "hello"}], "stream": True},
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.text.rstrip().endswith("data: [DONE]")


def test_streamed_tool_calls(server: ScriptedServer) -> None:
    stream = client(server).chat.completions.create(
        model="tools", messages=[{"role": "user", "content": "weather?"}], stream=True
    )
    arguments = ""
    names = []
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.function and call.function.name:
                names.append(call.function.name)
            arguments += (call.function.arguments or "") if call.function else ""
    assert names == ["get_weather"]
    assert json.loads(arguments) == {"city": "Paris"}


def test_logprobs_one_entry_per_whitespace_token(server: ScriptedServer) -> None:
    reply = client(server).chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "hello"}], logprobs=True, top_logprobs=2
    )
    entries = reply.choices[0].logprobs.content
    assert [e.token for e in entries] == ["Hi", " there,", " I", " am", " scripted."]
    assert all(e.logprob == 0.0 for e in entries)
    assert "".join(e.token for e in entries) == reply.choices[0].message.content
    assert whitespace_tokens("  a b  ") == ["  a", " b  "]


def test_token_ids_as_vllm_returns_them(server: ScriptedServer) -> None:
    """``return_token_ids``: ``prompt_token_ids`` on the response, ``token_ids`` on the choice, one per
    logprobs entry; stand-in ids that the same token always gets."""
    reply = client(server).chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "say hello hello"}],
        logprobs=True,
        extra_body={"return_token_ids": True},
    )
    data = reply.model_dump()
    ids = data["choices"][0]["token_ids"]
    assert len(ids) == len(reply.choices[0].logprobs.content) == 5
    prompt_ids = data["prompt_token_ids"]
    assert len(prompt_ids) == 3 and prompt_ids[1] == prompt_ids[2] != prompt_ids[0]
    plain = client(server).chat.completions.create(model="chat", messages=[{"role": "user", "content": "hello"}])
    assert plain.model_dump().get("prompt_token_ids") is None and plain.choices[0].model_dump().get("token_ids") is None


def test_models_and_health(server: ScriptedServer) -> None:
    models = client(server).models.list()
    assert "chat" in [m.id for m in models.data]
    health = httpx.get(server.base_url.removesuffix("/v1") + "/health").json()
    assert health == {"status": "ok", "scenario": "client-stacks"}


# ---- langchain-openai ----


async def test_langchain_text_and_usage_metadata(server: ScriptedServer) -> None:
    llm = ChatOpenAI(model="chat", base_url=server.base_url, api_key="k", max_retries=0)
    message = await llm.ainvoke("hello from langchain")
    assert message.content == "Hi there, I am scripted."
    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == -(-len("hello from langchain") // 4)
    assert message.usage_metadata["output_tokens"] > 0


async def test_langchain_streaming(server: ScriptedServer) -> None:
    llm = ChatOpenAI(model="chat", base_url=server.base_url, api_key="k", stream_usage=True)
    pieces = [chunk async for chunk in llm.astream("hello, streaming")]
    assert "".join(str(p.content) for p in pieces) == "Hi there, I am scripted."
    assert sum((p.usage_metadata or {}).get("output_tokens", 0) for p in pieces) > 0


async def test_langchain_structured_output_json_schema(server: ScriptedServer) -> None:
    llm = ChatOpenAI(model="judge", base_url=server.base_url, api_key="k", max_retries=0)
    verdict = await llm.with_structured_output(Verdict, method="json_schema").ainvoke("grade the site")
    assert verdict == Verdict(passed=True, score=4, notes="looks fine")


async def test_json_reply_becomes_forced_tool_call(server: ScriptedServer) -> None:
    llm = ChatOpenAI(model="fc", base_url=server.base_url, api_key="k", max_retries=0)
    verdict = await llm.with_structured_output(Verdict, method="function_calling").ainvoke("grade")
    assert verdict == Verdict(passed=False, score=2, notes="via tool")


async def test_langchain_tool_calls(server: ScriptedServer) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    llm = ChatOpenAI(model="tools", base_url=server.base_url, api_key="k").bind_tools([get_weather])
    message = await llm.ainvoke("what is the weather in Paris?")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert message.usage_metadata is not None and message.usage_metadata["total_tokens"] > 0


# ---- faults, delay, errors, statelessness ----


def test_fault_500_once_then_client_retry_succeeds(server: ScriptedServer) -> None:
    reply = client(server, max_retries=2).chat.completions.create(
        model="flaky", messages=[{"role": "user", "content": "please"}]
    )
    assert reply.choices[0].message.content == "recovered"
    assert records(server, "flaky") == [(0, 6, 500), (0, 7, 200)]


def test_persistent_503_exhausts_bounded_retries(server: ScriptedServer) -> None:
    with pytest.raises(openai.InternalServerError, match="overloaded"):
        client(server, max_retries=2).chat.completions.create(model="down", messages=[{"role": "user", "content": "x"}])
    assert [status for _, _, status in records(server, "down")] == [503, 503, 503]


async def test_malformed_json_content_breaks_structured_parsing(server: ScriptedServer) -> None:
    reply = client(server).chat.completions.create(model="broken", messages=[{"role": "user", "content": "grade"}])
    assert reply.choices[0].message.content == MALFORMED_CONTENT
    with pytest.raises(ValueError):
        json.loads(reply.choices[0].message.content or "")
    llm = ChatOpenAI(model="broken", base_url=server.base_url, api_key="k", max_retries=0)
    with pytest.raises(ValueError):  # pydantic's ValidationError on the cut-off JSON
        await llm.with_structured_output(Verdict, method="json_schema", include_raw=False).ainvoke("grade")


def test_invalid_body_is_not_json(server: ScriptedServer) -> None:
    with pytest.raises(json.JSONDecodeError):
        client(server, max_retries=0).chat.completions.create(
            model="garbage", messages=[{"role": "user", "content": "x"}]
        )


async def test_delay_is_concurrent(server: ScriptedServer) -> None:
    sdk = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
    started = time.monotonic()
    replies = await asyncio.gather(
        *(sdk.chat.completions.create(model="slow", messages=[{"role": "user", "content": f"q{i}"}]) for i in range(6))
    )
    elapsed = time.monotonic() - started
    assert [r.choices[0].message.content for r in replies] == ["slow answer"] * 6
    # Each answer waits 0.6 s: one after another they would take 3.6 s.
    assert 0.55 <= elapsed < 2.4


def test_no_rule_is_a_helpful_400_without_retries(server: ScriptedServer) -> None:
    question = "Unscripted question " + "x" * 300
    with pytest.raises(openai.BadRequestError) as caught:
        client(server, max_retries=3).chat.completions.create(
            model="nobody", messages=[{"role": "user", "content": question}]
        )
    message = str(caught.value)
    assert "'nobody'" in message and "turn 0" in message
    assert question[:200] in message and question[:201] not in message
    assert records(server, "nobody") == [(0, None, 400)]


def test_same_request_same_answer(server: ScriptedServer) -> None:
    body = {"model": "chat", "messages": [{"role": "user", "content": "hello, determinism"}]}
    first = httpx.post(f"{server.base_url}/chat/completions", json=body).json()
    with ScriptedServer(Scenario.model_validate(SCENARIO)) as fresh:
        again = httpx.post(f"{fresh.base_url}/chat/completions", json=body).json()
    assert first == again


def test_catch_all_model_star(server: ScriptedServer) -> None:
    reply = client(server).chat.completions.create(
        model="whatever", messages=[{"role": "user", "content": "catch-all"}]
    )
    assert reply.choices[0].message.content == "caught"


# ---- scenario files ----


def test_scenario_load_reads_content_file(tmp_path: Path) -> None:
    (tmp_path / "replies").mkdir()
    (tmp_path / "replies" / "page.txt").write_text("<file>index.html</file>", encoding="utf-8")
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"name": "files", "rules": [{"content_file": "replies/page.txt"}]}), encoding="utf-8")
    scenario = Scenario.load(path)
    assert scenario.rules[0].content == "<file>index.html</file>"
    with ScriptedServer(scenario) as running:
        reply = client(running).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.content == "<file>index.html</file>"


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ([{"content": "a", "json": 1}], "exactly one reply"),
        ([{"turn": 0}], "exactly one reply"),
        ([{"content_file": "missing.txt"}], "cannot be read"),
        ([{"fault": {"status": 500, "malformed": True}}], "exactly one of"),
        ([{"agent": {"actions": [{"click": {}, "input": {}}]}}], "exactly one key"),
        ([{"content": "a", "colour": "red"}], "colour"),
    ],
)
def test_invalid_scenarios_are_refused_with_reasons(tmp_path: Path, rules: list, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "rules": rules}), encoding="utf-8")
    with pytest.raises(ScenarioError, match=problem):
        Scenario.load(path)


def test_missing_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not found"):
        Scenario.load(tmp_path / "nope.json")


# ---- browser-use agent steps ----


@pytest.mark.parametrize("schema_in_system_prompt", [False, True])
async def test_browser_use_client_gets_resolved_agent_steps(
    server: ScriptedServer, schema_in_system_prompt: bool
) -> None:
    from browser_use.llm.messages import SystemMessage, UserMessage
    from browser_use.llm.openai.chat import ChatOpenAI as BrowserUseChatOpenAI

    output_model = browser_use_output_model()
    llm = BrowserUseChatOpenAI(
        model="agent",
        base_url=server.base_url,
        api_key="k",
        max_retries=0,
        add_schema_to_system_prompt=schema_in_system_prompt,
        dont_force_structured_output=schema_in_system_prompt,
    )
    system = SystemMessage(content="You are a browser agent.")
    first = await llm.ainvoke([system, UserMessage(content=agent_state_message(step=0))], output_format=output_model)
    actions = [a.model_dump(exclude_unset=True) for a in first.completion.action]
    assert actions == [{"input": {"index": 4, "text": "Buy milk", "clear": True}}, {"click": {"index": 6}}]
    assert first.completion.memory == "typed and clicked"
    assert first.usage is not None and first.usage.prompt_tokens > 0

    second = await llm.ainvoke([system, UserMessage(content=agent_state_message(step=1))], output_format=output_model)
    assert second.completion.action[0].model_dump(exclude_unset=True)["done"]["text"] == "YES - listed"


async def test_unresolvable_target_is_a_400_naming_the_rule(server: ScriptedServer) -> None:
    body = {"model": "agent", "messages": [{"role": "user", "content": agent_state_message(step=2)}]}
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{server.base_url}/chat/completions", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "agent_step_unresolved"
    assert "rule 15" in error["message"] and "No such button" in error["message"]


def test_agent_step_turn_comes_from_step_info(server: ScriptedServer) -> None:
    body = {
        "model": "agent",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": agent_state_message(step=3)}]},
            {"role": "user", "content": "BUDGET WARNING: a context message after the state message"},
        ],
    }
    answer = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert answer.status_code == 200
    content = json.loads(answer.json()["choices"][0]["message"]["content"])
    assert [next(iter(a)) for a in content["action"]] == ["scroll", "wait"]
    assert server.requests[-1].agent_step and server.requests[-1].turn == 3


def test_with_delay_slows_only_the_rules_it_names() -> None:
    from webgen_agent.apps.demo import scenario_path

    landing = Scenario.load(scenario_path("landing"))
    judged = landing.with_delay(2.0, schema="ScreenshotJudgement")
    assert [r.delay_s for r in judged.rules] == [
        2.0 if r.schema_name == "ScreenshotJudgement" else r.delay_s for r in landing.rules
    ]
    assert any(r.delay_s == 2.0 for r in judged.rules) and any(r.delay_s == 0 for r in judged.rules)
    coder = landing.with_delay(1.0, model="scripted-coder")
    assert {r.model for r in coder.rules if r.delay_s == 1.0} == {"scripted-coder"}
    assert all(r.delay_s == 0.5 for r in landing.with_delay(0.5).rules)
