"""API keys are ``SecretStr`` and never stored: not in checkpoints, their metadata, the runs table,
run.json, the report or an export; the clients still get the plain key at the call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import AgentContext, ModelSettings, Settings, api_key_for, dump_with_secrets
from webgen_agent.tools.endpoints import fallback_settings
from webgen_agent.tools.models import chat_model

SECRET = "sk-test-SECRET-123"
FALLBACK_SECRET = "sk-test-FALLBACK-456"


def _with_keys(context: AgentContext) -> AgentContext:
    """The context as a user gives it: every role with its key and a fallback key (plain JSON)."""
    data = context.model_dump(mode="json")
    for role in ("coder", "vlm", "feedback"):
        data[role].update(api_key=SECRET, fallback_api_key=FALLBACK_SECRET)
    return AgentContext.model_validate(data)


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``secret`` (SQLite's -wal and -shm files included)."""
    return [str(path) for path in root.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]


async def test_a_key_is_hidden_everywhere_but_at_the_call():
    settings = ModelSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key=SecretStr(SECRET))
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert SECRET not in settings.model_dump_json() and SECRET not in json.dumps(settings.model_dump())
    assert ModelSettings.model_validate_json(settings.model_dump_json()).api_key.get_secret_value() == ""
    # The clients get the plain value.
    assert api_key_for(settings, "coder") == SECRET
    assert chat_model(settings, "coder").openai_api_key.get_secret_value() == SECRET  # type: ignore[union-attr]
    # Handed to a worker process of the same run (a Ray actor): kept.
    context = _with_keys(scripted_context("http://127.0.0.1:9/v1"))
    assert AgentContext.model_validate_json(dump_with_secrets(context)).coder.api_key.get_secret_value() == SECRET
    fallback = fallback_settings(context.coder.model_copy(update={"fallback_model": "other"}))
    assert fallback is not None and api_key_for(fallback, "coder") == FALLBACK_SECRET


def test_keys_from_the_environment_are_secret_too(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    context = Settings(model="m", base_url="http://127.0.0.1:9/v1").to_context()
    assert context.vlm.api_key.get_secret_value() == SECRET
    assert SECRET not in context.model_dump_json() and SECRET not in repr(context)


@pytest.mark.e2e
async def test_a_run_through_the_embedding_api_stores_no_key(tmp_path, chromium_path):
    from webgen_agent.apps.report.html import write_report
    from webgen_agent.checkpoints.export import export_trajectories
    from webgen_agent.checkpoints.formats import FORMATS
    from webgen_agent.graph.api import run_requirement

    page = '<boltArtifact id="p" title="p"><boltAction type="file" filePath="index.html"><h1>Hi</h1></boltAction></boltArtifact>'
    scenario = Scenario.model_validate(
        {
            "name": "secrets",
            "rules": [
                {"model": "scripted-coder", "turn": 0, "content": page},
                {"model": "scripted-coder", "content": "finish"},
                {"model": "scripted-vlm", "json": {"description": "A heading.", "score": 2, "suggestions": []}},
            ],
        }
    )
    db = tmp_path / "db" / "webgen.db"
    with ScriptedServer(scenario) as server:
        context = _with_keys(scripted_context(server.base_url, max_steps=2))
        result = await run_requirement("A page.", context=context, run_id="s", out_dir=tmp_path / "out", db_path=db)
    assert result.status == "finished", result
    report = await write_report("s", db_path=db)
    assert (Path(result.out_dir) / "run.json").exists() and report.exists()
    for export_format in FORMATS:
        await export_trajectories(export_format, tmp_path / "exports" / f"{export_format}.jsonl", db_path=db)
    assert any((tmp_path / "exports").iterdir())
    for secret in (SECRET, FALLBACK_SECRET):
        assert files_holding(tmp_path, secret) == []


async def test_checkpoint_metadata_keeps_no_key(tmp_path):
    """What LangGraph's server does with a run's context: copies it into the run's metadata (the
    checkpoint metadata) and its configurable (whose plain values LangGraph copies there too)."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from webgen_agent.checkpoints.saver import open_checkpointer

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("step", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    context = {"coder": {"model": "m", "api_key": SECRET, "fallback_api_key": FALLBACK_SECRET}}
    config = {"configurable": {"thread_id": "t", "api_key": SECRET, **context}, "metadata": context}
    db = tmp_path / "db" / "webgen.db"
    async with open_checkpointer(db) as saver:
        graph = builder.compile(checkpointer=saver)
        assert (await graph.ainvoke({"n": 1}, config))["n"] == 2  # type: ignore[arg-type]
        saved = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
    assert saved is not None and saved.metadata["step"] == 1 and "api_key" not in saved.metadata
    for secret in (SECRET, FALLBACK_SECRET):
        assert files_holding(db.parent, secret) == []


async def test_checkpoint_metadata_keeps_no_password_inside_an_endpoint_url(tmp_path):
    """A key can sit in a base URL (``https://user:key@host/v1``, as some gateways take it): LangGraph's
    server copied it into every checkpoint's metadata with the rest of the context."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from webgen_agent.checkpoints.saver import open_checkpointer

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("step", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    url = f"https://gateway-user:{SECRET}@llm.example.com/v1"
    context = {"coder": {"model": "m", "base_url": url}, "base_url": url}
    config = {"configurable": {"thread_id": "t", **context}, "metadata": context}
    db = tmp_path / "db" / "webgen.db"
    async with open_checkpointer(db) as saver:
        graph = builder.compile(checkpointer=saver)
        assert (await graph.ainvoke({"n": 1}, config))["n"] == 2  # type: ignore[arg-type]
        saved = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
    assert saved is not None and saved.metadata["step"] == 1
    assert (
        saved.metadata["base_url"] == "https://gateway-user:***@llm.example.com/v1"
    )  # where it went, not what unlocks it
    assert files_holding(db.parent, SECRET) == []
