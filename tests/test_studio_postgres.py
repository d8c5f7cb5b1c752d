"""The LangGraph server on a PostgreSQL store, and how a server stops.

A ``langgraph dev`` of its own with ``WEBGEN_DB=postgresql://...`` (a fresh database on the
session's throwaway cluster) serves the demo scenario end to end through langgraph_sdk: its
checkpoints, blobs and runs-table row land in PostgreSQL, where the CLI reads them. Then the server
is stopped the way a service manager stops it (SIGTERM to it alone): nothing it started (Chromium,
dev servers, their watchdog) may outlive it. The store plays no part in stopping, so this one
server stands for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import checkpoint_count
from tests.studio import cli, descendants, langgraph_dev, wait_until_ready
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.store import BlobStore

pytestmark = pytest.mark.e2e


@dataclass
class Served:
    db: str = ""
    thread_id: str = ""
    errors: list[Any] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    listed: list[dict[str, Any]] = field(default_factory=list)  # `webgen-agent runs --json`
    runs_dir: Path = Path()
    started: list[int] = field(default_factory=list)  # pids the server started
    still_alive: list[str] = field(default_factory=list)  # of those, after the server stopped


@pytest.fixture(scope="module")
async def served(
    tmp_path_factory: pytest.TempPathFactory, chromium_path: str, vite_template, postgres_cluster
) -> Served:
    from langgraph_sdk import get_client

    result = Served(db=postgres_cluster.new_database())
    base = tmp_path_factory.mktemp("studio-postgres")
    with (
        ScriptedServer(Scenario.load(scenario_path("demo"))) as scripted,
        langgraph_dev(base, chromium_path, db=result.db) as server,
    ):
        result.runs_dir = server.runs_dir
        await wait_until_ready(server)
        client = get_client(url=server.url)
        context = scripted_context(scripted.base_url, max_steps=8, runs_dir=str(server.runs_dir)).model_dump()
        result.thread_id = (await client.threads.create())["thread_id"]
        stream = client.runs.stream(
            result.thread_id, "webgen_agent", input={"requirement": DEMO_REQUIREMENT}, context=context
        )

        async def play() -> None:
            async for part in stream:
                if part.event == "error":
                    result.errors.append(part.data)

        await asyncio.wait_for(play(), timeout=400)
        result.final = (await client.threads.get_state(result.thread_id))["values"]
        result.started = [p.pid for p in descendants(server.proc.pid)]
        listed = await asyncio.to_thread(cli, "runs", "--json", db=result.db)
        assert listed.returncode == 0, listed.stderr
        result.listed = [json.loads(line) for line in listed.stdout.splitlines()]
    result.still_alive = server.left_after_stop  # measured before any cleanup by force
    return result


def test_a_run_is_served_end_to_end_on_postgresql(served: Served) -> None:
    assert served.errors == []
    assert served.final["status"] == "finished" and served.final["chosen_step"] == 3
    assert (Path(served.final["site_dir"]) / "src" / "App.jsx").is_file()
    assert checkpoint_count(served.db, served.thread_id) > 10  # one per node run, in PostgreSQL
    screenshot = served.final["steps"][3]["screenshot"]
    assert BlobStore(served.db).get(screenshot).startswith(b"\x89PNG")  # the blobs too
    [record] = served.listed
    assert (record["run_id"], record["status"], record["chosen_step"]) == (served.thread_id, "finished", 3)


def test_sigterm_stops_the_server_and_everything_it_started(served: Served) -> None:
    assert served.started, "the server started no dev server or browser?"
    assert served.still_alive == []
    leftovers = []
    for proc in psutil.process_iter(["cwd"]):
        with contextlib.suppress(psutil.Error):
            if (proc.info["cwd"] or "").startswith(str(served.runs_dir)):
                leftovers.append(proc.pid)
    assert leftovers == []
