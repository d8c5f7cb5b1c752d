"""Human review through LangGraph's server, as Studio and langgraph_sdk use it.

On the session's ``langgraph dev`` (``studio_server``, blocking-call detector on), a run with every
review point stops with an interrupt at each, a malformed resume value is asked again with the
reason, and what the answers say (a note, a refused command) reaches the coder's prompts on the
scripted server.
"""

from __future__ import annotations

import asyncio
import json
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


async def test_every_review_point_is_answered_through_the_sdk(studio_server: DevServer) -> None:
    """plan (rejected, then approved), shell (approved, refused), critique (a malformed answer, then a
    note), finalize (approved), all through the server with its blocking-call detector on."""
    from langgraph_sdk import get_client

    server = studio_server
    answers = {
        "plan": [{"action": "reject", "note": "Add a build note."}, "approve"],
        "shell": ["approve", {"action": "reject", "note": "No stray files."}],
        "critique": [{"action": "sure"}, {"action": "edit", "note": NOTE}],
        "finalize": ["approve"],
    }
    with ScriptedServer(Scenario.load(scenario_path("review"))) as scripted:
        client = get_client(url=server.url)
        assistant_id = (await client.assistants.search(graph_id="webgen_agent"))[0]["assistant_id"]
        context = scripted_context(
            scripted.base_url,
            max_steps=2,
            runs_dir=str(server.runs_dir),
            review=["plan", "critique", "shell", "finalize"],
        ).model_dump()
        thread_id = (await client.threads.create())["thread_id"]
        schema = (await client.assistants.get_schemas(assistant_id))["context_schema"]

        asked: list[dict[str, Any]] = []
        shown: list[list[dict[str, Any]]] = []  # the thread state's interrupts: what Studio shows
        calls: list[int] = []  # model calls the server had made when each request came
        kwargs: dict[str, Any] = {"input": {"requirement": REQUIREMENT}}
        while True:
            run = client.runs.stream(thread_id, assistant_id, context=context, stream_mode=["updates"], **kwargs)
            stopped = await asyncio.wait_for(_interrupts(run), timeout=300)
            if not stopped:
                break
            assert len(stopped) == 1
            asked.append(stopped[0]["value"])
            shown.append((await client.threads.get_state(thread_id))["interrupts"])
            calls.append(len(scripted.requests))
            assert (await client.threads.get(thread_id))["status"] == "interrupted"
            if len(asked) == 1:  # the runs table says so too
                listed = await asyncio.to_thread(cli, "runs", "--json", db=server.db)
            kwargs = {"command": {"resume": answers[asked[-1]["point"]].pop(0)}}
        final = (await client.threads.get_state(thread_id))["values"]
        coder = [r for r in scripted.requests if r.model == "scripted-coder"]

    # Studio's settings form offers the points.
    assert schema["properties"]["review"]["items"]["enum"] == ["plan", "critique", "shell", "finalize"]
    assert [(r["point"], r["step"]) for r in asked] == [
        ("plan", 0),
        ("plan", 0),
        ("shell", 0),
        ("shell", 0),
        ("critique", 0),
        ("critique", 0),
        ("finalize", 1),
    ]
    assert all(r["kind"] == "review" and r["run_id"] == thread_id for r in asked)
    record = next(json.loads(line) for line in listed.stdout.splitlines() if thread_id in line)
    assert record["status"] == "review"
    assert [[i["value"] for i in s] for s in shown] == [[r] for r in asked]
    assert [r["text"] for r in asked[2:4]] == ["echo planned > build-note.txt", "touch refused.txt"]
    critique, refused = asked[4], asked[5]
    assert "opening hours" in critique["text"] and critique["error"] == ""
    # A malformed answer loses nothing: the same request comes back saying what was wrong.
    assert refused["text"] == critique["text"]
    assert "invalid review answer" in refused["error"] and "action" in refused["error"]
    assert calls[5] == calls[4]  # the refiner ran again up to its question, and asked no model
    assert asked[6]["screenshot"] and asked[6]["screenshot_path"].endswith("/steps/1.png")
    assert final["status"] == "finished" and final["chosen_step"] == 1
    # Each coder call once, though the generator and the executor ran again on every resume.
    assert len(coder) == 3 and len({r.last_user_text for r in coder}) == 3
    assert "Note from the reviewer: Add a build note." in coder[1].last_user_text
    assert "Shell action not run (the reviewer refused it): touch refused.txt" in coder[2].last_user_text
    assert coder[2].last_user_text.rstrip().endswith(f"Note from the reviewer: {NOTE}")
    assert [e["kind"] for e in final["events"]].count("review") == 6
