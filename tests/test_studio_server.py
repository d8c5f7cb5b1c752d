"""The graph served by ``langgraph dev`` (what LangGraph Studio talks to), driven with langgraph_sdk.

On the session's dev server (``studio_server``, started the standard way: blocking-call detector
on), one module fixture plays the demo scenario through the server's API against a scripted model
server, and forks the thread from an earlier checkpoint (the fork's run started by another app's
graph through LangGraph's ``RemoteGraph``). The tests then check what it recorded. Stopping a server
is watched in tests/test_studio_postgres.py, which starts one of its own.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tests.studio import DevServer
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import AgentContext

pytestmark = pytest.mark.e2e

# The tasks whose results a run keeps as they arrive (model replies), beside the nodes.
KEPT_TASKS = {"coder_reply", "test_instruction_reply"}
NODES = {"generator", "executor", "screenshot_judge", "gui_tester", "critic", "refiner", "backtrack", "finalize"}
# The WebLoop loop's nodes: in the same graph, never reached by the default loop the demo runs.
LOOP_NODES = {"checker", "code_critic"}
# Where a run whose budget is spent stops (docs/costs.md): never reached without a budget.
BUDGET_NODES = {"budget"}
STUDIO_SECRET = "sk-test-SECRET-123"
EDITED_INSTRUCTION = "Type 'Buy milk', click 'Add item' and check that 'Buy milk' is listed. (edited in a fork)"


@dataclass
class StudioSession:
    graph: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    parts: list[tuple[str, Any]] = field(default_factory=list)  # (event, data) of the main run
    final: dict[str, Any] = field(default_factory=dict)  # thread state after the main run
    history: list[dict[str, Any]] = field(default_factory=list)
    fork_from: dict[str, Any] = field(default_factory=dict)  # the earlier checkpoint forked from
    fork_update: dict[str, Any] = field(default_factory=dict)
    fork_parts: list[tuple[str, Any]] = field(default_factory=list)
    fork_final: dict[str, Any] = field(default_factory=dict)
    history_after_fork: list[dict[str, Any]] = field(default_factory=list)
    host_final: dict[str, Any] = field(default_factory=dict)  # the other app's graph after the fork
    gui_instruction_after_fork: str = ""
    thread_id: str = ""
    runs_dir: Path = Path()
    log: str = ""


async def _collect(stream) -> list[tuple[str, Any]]:
    return [(part.event, part.data) async for part in stream]


async def _play(session: StudioSession, server: DevServer, scripted_url: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server.url)
    assistant = (await client.assistants.search(graph_id="webgen_agent"))[0]
    assistant_id = assistant["assistant_id"]
    session.graph = await client.assistants.get_graph(assistant_id)
    session.schemas = await client.assistants.get_schemas(assistant_id)
    # runs_dir left out, as a Studio user leaves it: the server's default, relative to where it was
    # started, must not be resolved on the server's event loop (its blocking-call detector is on).
    context = scripted_context(scripted_url, max_steps=8).model_dump(exclude={"runs_dir"})
    # API keys typed into Studio's settings form: the server puts the context in the run's config.
    for role in ("coder", "vlm", "feedback"):
        context[role]["api_key"] = STUDIO_SECRET

    thread = await client.threads.create()
    session.thread_id = thread["thread_id"]
    # Only the requirement, as a Studio user types it: run_id and out_dir default in the graph.
    session.parts = await _collect(
        client.runs.stream(
            session.thread_id,
            assistant_id,
            input={"requirement": DEMO_REQUIREMENT},
            context=context,
            stream_mode=["updates", "custom"],
        )
    )
    session.final = (await client.threads.get_state(session.thread_id))["values"]
    session.history = await client.threads.get_history(session.thread_id, limit=200)

    # Fork: the checkpoint where step 3 was judged and the GUI test is next; edit the test
    # instruction as the screenshot judge, and run again from the new checkpoint.
    session.fork_from = next(
        h for h in session.history if h["next"] == ["gui_tester"] and len(h["values"]["steps"]) == 4
    )
    session.fork_update = await client.threads.update_state(
        session.thread_id,
        {"test_instruction": EDITED_INSTRUCTION},
        as_node="screenshot_judge",
        checkpoint_id=session.fork_from["checkpoint"]["checkpoint_id"],
    )
    # The fork runs from another app's graph: a node of its own that drives the served graph.
    host = _host_graph(server.url, session.fork_parts)
    session.host_final = await host.ainvoke(
        {"remote_thread": session.thread_id, "remote_checkpoint": session.fork_update["checkpoint"]["checkpoint_id"]},
        context=scripted_context(scripted_url, max_steps=8, runs_dir=str(server.runs_dir)),
    )
    session.fork_final = (await client.threads.get_state(session.thread_id))["values"]
    session.history_after_fork = await client.threads.get_history(session.thread_id, limit=200)
    gui_run = session.fork_final["steps"][3]["gui_run"]
    session.gui_instruction_after_fork = BlobStore(server.db).get_json(gui_run)["instruction"]


class HostState(TypedDict, total=False):
    """The state of another app's graph that runs the served agent as one of its nodes."""

    remote_thread: str  # the server thread to run
    remote_checkpoint: str  # and the checkpoint to run from
    status: str
    chosen_step: int | None
    site_dir: str | None


def _host_graph(url: str, parts: list[tuple[str, Any]]) -> Any:
    """Another app's graph whose ``website`` node runs the served graph through ``RemoteGraph``,
    passing on its own run context; the remote stream parts are collected into ``parts``."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.pregel.remote import RemoteGraph
    from langgraph.runtime import Runtime

    remote = RemoteGraph("webgen_agent", url=url)

    async def website(state: HostState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
        config = {"configurable": {"thread_id": state["remote_thread"], "checkpoint_id": state["remote_checkpoint"]}}
        async for part in remote.astream(
            None, config, context=runtime.context.model_dump(), stream_mode=["updates", "custom"]
        ):
            parts.append((part.event, part.data))
        values = (await remote.aget_state({"configurable": {"thread_id": state["remote_thread"]}})).values
        return {key: values.get(key) for key in ("status", "chosen_step", "site_dir")}

    builder = StateGraph(HostState, context_schema=AgentContext)
    builder.add_node("website", website)
    builder.add_edge(START, "website")
    builder.add_edge("website", END)
    return builder.compile()


@pytest.fixture(scope="module")
async def studio(studio_server: DevServer) -> StudioSession:
    session = StudioSession(runs_dir=studio_server.runs_dir)
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as scripted:
        try:
            await asyncio.wait_for(_play(session, studio_server, scripted.base_url), timeout=400)
        finally:
            session.log = studio_server.log.read_text()[-4000:]
    return session


def _updated_nodes(parts: list[tuple[str, Any]]) -> list[str]:
    """The graph's nodes in the order of their updates (the kept model replies, updates of the
    ``coder_reply`` and ``test_instruction_reply`` tasks, left out)."""
    return [node for event, data in parts if event == "updates" for node in data if node not in KEPT_TASKS]


def _progress(parts: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [data["webgen"] for event, data in parts if event == "custom" and "webgen" in data]


def test_server_draws_the_graph_with_conditional_edges(studio: StudioSession) -> None:
    nodes = {node["id"] for node in studio.graph["nodes"]}
    assert nodes == NODES | LOOP_NODES | BUDGET_NODES | {"__start__", "__end__"}
    edges = {(e["source"], e["target"]): e.get("conditional", False) for e in studio.graph["edges"]}
    assert edges[("__start__", "generator")] is False
    assert edges[("executor", "screenshot_judge")] and edges[("executor", "backtrack")]
    assert edges[("gui_tester", "finalize")] and edges[("critic", "refiner")]
    assert edges[("backtrack", "generator")] and edges[("finalize", "__end__")] is False


def test_studio_gets_the_settings_form_and_input_schema(studio: StudioSession) -> None:
    context = studio.schemas["context_schema"]
    assert {"coder", "vlm", "feedback", "max_steps", "error_limit", "critic"} <= set(context["properties"])
    assert context["$defs"]["ModelSettings"]["required"] == ["model", "base_url"]
    assert "site_dir" in studio.schemas["output_schema"]["properties"]
    # The input form: the requirement, and optional fields a person can fill (no blob hashes).
    given = studio.schemas["input_schema"]
    assert given["required"] == ["requirement"]
    assert set(given["properties"]) == {"requirement", "run_id", "out_dir", "group_id", "requirements"}
    checks = given["properties"]["requirements"]
    assert checks["type"] == "array" and given["$defs"]["RequirementCheck"]["required"] == ["task", "expected_result"]
    assert all(field.get("description") for field in given["properties"].values())


def test_studio_shows_the_conversation_the_screenshot_and_the_files(
    studio: StudioSession, studio_server: DevServer
) -> None:
    """The finished thread's state as Studio gets it: the conversation as chat messages, the latest
    step's screenshot as an image block, its grades and its files as text."""
    final = studio.final
    messages = final["messages"]
    assert [m["type"] for m in messages[:2]] == ["system", "human"] and DEMO_REQUIREMENT in messages[1]["content"]
    replies = [m for m in messages if m["type"] == "ai" and m.get("name") != "results"]
    assert len(replies) == 4 and all("<boltArtifact" in m["content"] for m in replies)
    assert [m["type"] for m in messages[2:-1]] == ["ai", "human"] * 3 + ["ai"]  # reply, feedback, ...
    results = messages[-1]
    assert results["type"] == "ai" and results["name"] == "results"
    text, image = results["content"]
    assert "Screenshot: 5/5" in text["text"] and "GUI test: passed, 5/5" in text["text"]
    header, encoded = image["image_url"]["url"].split(",")
    assert header == "data:image/png;base64"
    store = BlobStore(studio_server.db)
    assert base64.b64decode(encoded) == store.get(final["steps"][3]["screenshot"])  # the step's own PNG

    latest = final["latest_step"]
    assert (latest["index"], latest["screenshot_score"], latest["gui_score"], latest["gui_passed"]) == (3, 5, 5, True)
    assert latest["run"] == "ok"
    files = final["latest_files"]
    site = Path(final["site_dir"])
    assert files["src/App.jsx"] == (site / "src" / "App.jsx").read_text() and "Add item" in files["src/App.jsx"]
    # Each earlier checkpoint shows its own latest step: the history reads as the run went.
    judged = [h["values"]["latest_step"] for h in studio.history if "screenshot" in h["values"].get("latest_step", {})]
    assert {view["index"] for view in judged} >= {1, 2, 3}


def test_stream_yields_node_updates_and_progress_events(studio: StudioSession) -> None:
    errors = [data for event, data in studio.parts if event == "error"]
    assert errors == [], studio.log
    updated = _updated_nodes(studio.parts)
    assert updated[0] == "generator" and updated[-1] == "finalize"
    # Each coder reply and the GUI test instruction are kept as they arrive (nodes/coding.py,
    # nodes/gui_testing.py): Studio shows each as a task update.
    tasks = {name for event, data in studio.parts if event == "updates" for name in data if name not in NODES}
    assert tasks == KEPT_TASKS
    assert set(updated) == NODES - {"backtrack"}
    progress = _progress(studio.parts)
    ends = [e for e in progress if e["phase"] == "end"]
    assert [e["node"] for e in ends] == updated  # one end event per node run, in order
    assert all(e["seconds"] >= 0 for e in ends)
    gui = [e for e in ends if e["node"] == "gui_tester"]
    assert [e["gui_score"] for e in gui] == [2, 5]
    assert any(e["node"] == "screenshot_judge" and e["screenshot_score"] == 5 for e in ends)
    assert sum(e["input_tokens"] for e in ends) > 0


def test_run_defaults_its_id_and_folder_and_finishes(studio: StudioSession) -> None:
    final = studio.final
    assert final["status"] == "finished" and final["chosen_step"] == 3
    assert final["run_id"] == studio.thread_id
    assert final["out_dir"] == str((studio.runs_dir / studio.thread_id).resolve())
    assert (Path(final["site_dir"]) / "src" / "App.jsx").is_file()


def test_history_has_a_checkpoint_for_every_node(studio: StudioSession) -> None:
    history = list(reversed(studio.history))  # oldest first
    next_nodes = [h["next"][0] for h in history if h["next"]]
    assert next_nodes[0] == "__start__"
    assert next_nodes[1:] == _updated_nodes(studio.parts)
    assert history[-1]["next"] == [] and history[-1]["values"]["status"] == "finished"


def test_fork_from_an_earlier_checkpoint_continues_from_there(studio: StudioSession) -> None:
    assert studio.fork_update["checkpoint"]["checkpoint_id"] != studio.fork_from["checkpoint"]["checkpoint_id"]
    assert _updated_nodes(studio.fork_parts) == ["gui_tester", "finalize"]  # nothing before the fork re-ran
    assert studio.fork_final["status"] == "finished" and studio.fork_final["chosen_step"] == 3
    assert studio.gui_instruction_after_fork == EDITED_INSTRUCTION
    # The original branch is still in the history; the fork's first checkpoint hangs off the earlier one.
    ids = {h["checkpoint"]["checkpoint_id"]: h for h in studio.history_after_fork}
    assert studio.fork_from["checkpoint"]["checkpoint_id"] in ids
    update = ids[studio.fork_update["checkpoint"]["checkpoint_id"]]
    assert update["parent_checkpoint"]["checkpoint_id"] == studio.fork_from["checkpoint"]["checkpoint_id"]
    assert len(studio.history_after_fork) > len(studio.history)


def test_another_app_runs_the_served_graph_as_a_node_through_remote_graph(studio: StudioSession) -> None:
    # The fork above ran from the host graph's node: the context it passed reached the GUI test's
    # model (the scripted server), and the node handed the remote output back to the host.
    assert _updated_nodes(studio.fork_parts) == ["gui_tester", "finalize"]
    assert any(e["node"] == "gui_tester" and e.get("gui_score") == 5 for e in _progress(studio.fork_parts))
    assert studio.host_final["status"] == "finished" and studio.host_final["chosen_step"] == 3
    assert studio.host_final["site_dir"] == studio.fork_final["site_dir"]
    assert studio.host_final["remote_thread"] == studio.thread_id


def test_no_api_key_given_in_studio_is_stored(studio: StudioSession, studio_server: DevServer) -> None:
    """Not in the checkpoints, their metadata or the runs table (the server's database and its
    -wal file), nor in the run's folder (run.json, site, logs)."""
    assert studio.final["status"] == "finished"
    database_folder = Path(studio_server.db).parent
    stored = [database_folder, Path(studio.final["out_dir"])]
    holding = [
        str(path)
        for folder in stored
        for path in folder.rglob("*")
        if path.is_file() and STUDIO_SECRET.encode() in path.read_bytes()
    ]
    snippets = []
    for name in holding:
        data = Path(name).read_bytes()
        at = data.find(STUDIO_SECRET.encode())
        snippets.append(data[max(0, at - 300) : at + 40])  # what holds it
    assert holding == [], snippets
