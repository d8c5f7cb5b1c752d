"""A run cancelled with rollback through the server (what Studio's cancel does) leaves none of its
checkpoints: the server calls the project's checkpointer's ``adelete_for_runs``."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from tests.studio import DevServer
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario

pytestmark = pytest.mark.e2e


def _checkpoints_of_run(db: str, run_id: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM checkpoints WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') = ?", (run_id,)
        ).fetchone()
    return int(row[0])


async def test_a_run_cancelled_with_rollback_leaves_no_checkpoints(studio_server: DevServer) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=studio_server.url)
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as scripted:
        context = scripted_context(scripted.base_url, max_steps=8, runs_dir=str(studio_server.runs_dir))
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"], "webgen_agent", input={"requirement": DEMO_REQUIREMENT}, context=context.model_dump()
        )
        deadline = time.monotonic() + 120
        while await asyncio.to_thread(_checkpoints_of_run, studio_server.db, run["run_id"]) < 3:
            assert time.monotonic() < deadline, "the run saved no checkpoints"
            await asyncio.sleep(0.2)
        await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True, action="rollback")
        # The server deletes a rolled-back run's checkpoints once its worker has stopped the run.
        deadline = time.monotonic() + 60
        while (left := await asyncio.to_thread(_checkpoints_of_run, studio_server.db, run["run_id"])) > 0:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    assert left == 0, studio_server.log.read_text()[-3000:]
