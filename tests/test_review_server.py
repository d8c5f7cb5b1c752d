"""Human review through LangGraph's server, as Studio and langgraph_sdk use it.

On the session's ``langgraph dev`` (``studio_server``, blocking-call detector on), a run with ``review: ["critique"]`` stops with an interrupt, a malformed
resume value is asked again with the reason, and the note sent through the SDK reaches the
refiner's prompt on the scripted server.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest

from tests.studio import DevServer, cli
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario

pytestmark = pytest.mark.e2e

REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."
NOTE = "Put the opening hours in a card."


async def _interrupts(stream: Any) -> list[dict[str, Any]]:
    """The interrupts a streamed run stopped with (empty when it ran to the end)."""
    found: list[dict[str, Any]] = []
    async for part in stream:
        assert part.event != "error", part.data
        if part.event == "updates" and "__interrupt__" in part.data:
            found += part.data["__interrupt__"]
    return found


async def test_critique_review_is_answered_through_the_sdk(studio_server: DevServer) -> None:
    from langgraph_sdk import get_client

    server = studio_server
    with ScriptedServer(Scenario.load(scenario_path("review"))) as scripted:
        client = get_client(url=server.url)
        assistant_id = (await client.assistants.search(graph_id="webgen_agent"))[0]["assistant_id"]
        context = scripted_context(
            scripted.base_url, max_steps=2, runs_dir=str(server.runs_dir), review=["critique"]
        ).model_dump()
        thread_id = (await client.threads.create())["thread_id"]

        async def stream(**kwargs: Any) -> list[dict[str, Any]]:
            run = client.runs.stream(thread_id, assistant_id, context=context, stream_mode=["updates"], **kwargs)
            return await asyncio.wait_for(_interrupts(run), timeout=300)

        schema = (await client.assistants.get_schemas(assistant_id))["context_schema"]
        first = await stream(input={"requirement": REQUIREMENT})
        waiting = await client.threads.get(thread_id)
        listed = await asyncio.to_thread(cli, "runs", "--json", db=server.db)  # the runs table says so too
        shown = (await client.threads.get_state(thread_id))["interrupts"]  # what Studio shows
        calls_before = len(scripted.requests)
        refused = await stream(command={"resume": {"action": "sure"}})
        calls_while_waiting = len(scripted.requests) - calls_before
        last = await stream(command={"resume": {"action": "edit", "note": NOTE}})
        final = (await client.threads.get_state(thread_id))["values"]
        coder = [r for r in scripted.requests if r.model == "scripted-coder"]

    # Studio's settings form offers the points.
    assert schema["properties"]["review"]["items"]["enum"] == ["plan", "critique", "shell", "finalize"]
    assert len(first) == 1 and waiting["status"] == "interrupted"
    record = next(json.loads(line) for line in listed.stdout.splitlines() if thread_id in line)
    assert record["status"] == "review"
    request = first[0]["value"]
    assert [i["value"] for i in shown] == [request]
    assert (request["kind"], request["point"], request["step"], request["run_id"]) == (
        "review",
        "critique",
        0,
        thread_id,
    )
    assert "opening hours" in request["text"] and request["error"] == ""
    # A malformed answer loses nothing: the same request comes back saying what was wrong.
    assert len(refused) == 1 and refused[0]["value"]["text"] == request["text"]
    assert "invalid review answer" in refused[0]["value"]["error"] and "action" in refused[0]["value"]["error"]
    assert calls_while_waiting == 0  # the refiner ran again up to its question, and asked no model
    assert last == []
    assert final["status"] == "finished" and final["chosen_step"] == 1
    assert Counter(r.turn for r in coder) == {0: 1, 1: 1}
    assert coder[1].last_user_text.rstrip().endswith(f"Note from the reviewer: {NOTE}")
    assert [e["kind"] for e in final["events"]] == ["review", "finalize"]
