"""Several threads at once on the dev server, another app's graph using it, and server threads in the CLI's store.

Three threads run at the same time on the session's ``langgraph dev`` (three jobs per worker)
against one scripted model server: two streamed with langgraph_sdk, one started by another app's
graph through ``RemoteGraph``, with the code docs/embedding.md shows, run as written there. They
must overlap: every thread has shown progress before any thread showed its last (with one job per
worker the second would start only after the first ended). Then the CLI, as a user runs it on the
server's ``WEBGEN_DB``, lists them (``runs``), shows one's steps (``history``) and writes its report.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tests.studio import DevServer, cli
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import AgentContext

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
SDK_THREADS = 2
DOCUMENTED_URL = "http://127.0.0.1:2024"


class PipelineState(TypedDict, total=False):
    """The state of the app whose graph docs/embedding.md extends with the served agent."""

    brief: str
    requirement: str
    run_id: str
    status: str
    chosen_step: int | None
    site_dir: str | None
    review: str


def documented_pipeline(url: str, show: Any) -> Any:
    """The ``RemoteGraph`` example of docs/embedding.md, as written there, pointed at ``url``; the
    app's own nodes (``planner``, ``review``) and ``show`` are the ones the docs leave to the app."""
    text = (REPO / "docs" / "embedding.md").read_text()
    section = text.split("## A served graph from another app: `RemoteGraph`", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    invoke = 'await pipeline.ainvoke({"brief": "a coffee shop"}, context=context)\n'
    assert DOCUMENTED_URL in code and code.endswith(invoke)

    async def planner(state: PipelineState) -> dict[str, Any]:
        return {"requirement": DEMO_REQUIREMENT}

    async def review(state: PipelineState) -> dict[str, Any]:
        return {"review": f"{state['status']}: {state['site_dir']}"}

    namespace = {"PipelineState": PipelineState, "planner": planner, "review": review, "show": show}
    exec(compile(code.replace(DOCUMENTED_URL, url).removesuffix(invoke), "docs/embedding.md", "exec"), namespace)
    return namespace["pipeline"]


@dataclass
class Streamed:
    thread_id: str
    first_update: float = 0.0  # monotonic time of its first node update, as the client saw it
    last_update: float = 0.0
    errors: list[Any] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)  # the other app's output (RemoteGraph thread)


@pytest.fixture(scope="module")
async def three_threads(studio_server: DevServer) -> list[Streamed]:
    from langgraph_sdk import get_client

    client = get_client(url=studio_server.url)
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as scripted:
        context = scripted_context(scripted.base_url, max_steps=8, runs_dir=str(studio_server.runs_dir)).model_dump()
        runs = [Streamed((await client.threads.create())["thread_id"]) for _ in range(SDK_THREADS)]

        async def play(run: Streamed) -> None:
            stream = client.runs.stream(
                run.thread_id,
                "webgen_agent",
                input={"requirement": DEMO_REQUIREMENT},
                context=context,
                stream_mode=["updates"],
            )
            async for part in stream:
                if part.event == "updates":
                    run.first_update = run.first_update or time.monotonic()
                    run.last_update = time.monotonic()
                elif part.event == "error":
                    run.errors.append(part.data)
            run.final = (await client.threads.get_state(run.thread_id))["values"]

        remote = Streamed("")

        def show(event: dict[str, Any]) -> None:
            remote.first_update = remote.first_update or time.monotonic()
            remote.last_update = time.monotonic()

        async def host() -> None:
            pipeline = documented_pipeline(studio_server.url, show)
            remote.host = await pipeline.ainvoke({"brief": "a to-do list"}, context=AgentContext(**context))
            remote.thread_id = remote.host["run_id"]  # the server's run id is its thread id
            remote.final = (await client.threads.get_state(remote.thread_id))["values"]

        await asyncio.wait_for(asyncio.gather(*(play(run) for run in runs), host()), timeout=600)
    return [*runs, remote]


def test_three_threads_run_at_once_and_all_finish(three_threads: list[Streamed], studio_server: DevServer) -> None:
    for run in three_threads:
        assert run.errors == [], studio_server.log.read_text()[-3000:]
        assert run.final["status"] == "finished" and run.final["chosen_step"] == 3
        assert (Path(run.final["site_dir"]) / "src" / "App.jsx").is_file()
    # Overlap: all three were under way before the first of them ended.
    assert max(r.first_update for r in three_threads) < min(r.last_update for r in three_threads)


def test_another_app_runs_the_served_graph_as_docs_show(three_threads: list[Streamed]) -> None:
    remote = three_threads[-1]
    assert remote.host["status"] == "finished" and remote.host["chosen_step"] == 3
    assert remote.host["site_dir"] == remote.final["site_dir"]
    assert remote.host["review"] == f"finished: {remote.final['site_dir']}"  # the app's next node got it
    assert remote.first_update < remote.last_update  # progress events reached the app's show()


def test_server_threads_are_listed_by_runs(three_threads: list[Streamed], studio_server: DevServer) -> None:
    listed = cli("runs", "--json", db=studio_server.db)
    assert listed.returncode == 0, listed.stderr
    records = {r["run_id"]: r for r in map(json.loads, listed.stdout.splitlines())}
    for run in three_threads:
        record = records[run.thread_id]
        assert record["status"] == "finished" and record["requirement"] == DEMO_REQUIREMENT
        assert record["chosen_step"] == 3 and record["steps"] == len(run.final["steps"])
        assert record["best_screenshot"] == 5 and record["best_gui"] == 5
        assert record["out_dir"] == run.final["out_dir"]


def test_history_and_report_read_a_server_thread(three_threads: list[Streamed], studio_server: DevServer) -> None:
    run = three_threads[0]
    history = cli("history", run.thread_id, db=studio_server.db)
    assert history.returncode == 0, history.stderr
    assert f"run {run.thread_id} (finished)" in history.stdout
    steps = [
        int(m[1]) for line in history.stdout.splitlines() if (m := re.match(r"^\W*(\d+)\W+(generator|refiner)", line))
    ]
    assert steps == list(range(len(run.final["steps"])))

    report = cli("report", run.thread_id, db=studio_server.db)
    assert report.returncode == 0, report.stderr
    page = Path(run.final["out_dir"]) / "report.html"
    assert f"report: {page}" in report.stdout
    text = page.read_text()
    assert DEMO_REQUIREMENT in text and "data:image/png;base64," in text
