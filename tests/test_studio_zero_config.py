"""A Studio run that gives only its requirement: the server's environment names the models, with
the CLI's variables and precedence; without them the run fails with one error naming them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.studio import DevServer, langgraph_dev, wait_until_ready
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import ROLES

pytestmark = pytest.mark.e2e

MODEL_VARIABLES = ("WEBGEN_MODEL", "OPENAI_MODEL", *(f"WEBGEN_{role.upper()}_MODEL" for role in ROLES))


async def _run_requirement_only(server: DevServer) -> tuple[list[tuple[str, object]], dict[str, object]]:
    from langgraph_sdk import get_client

    client = get_client(url=server.url)
    thread = await client.threads.create()
    parts = [
        (part.event, part.data)
        async for part in client.runs.stream(
            thread["thread_id"], "webgen_agent", input={"requirement": DEMO_REQUIREMENT}, stream_mode="updates"
        )
    ]
    return parts, (await client.threads.get_state(thread["thread_id"]))["values"]


async def test_only_a_requirement_runs_on_the_models_the_server_environment_names(
    tmp_path: Path, chromium_path: str, vite_template
) -> None:
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as scripted:
        # The CLI's variables: one endpoint for every role, a model per role (the scenario's names).
        env = {"OPENAI_BASE_URL": scripted.base_url, "OPENAI_API_KEY": "scripted", "WEBGEN_MODEL": ""}
        env |= {f"WEBGEN_{role.upper()}_MODEL": f"scripted-{role}" for role in ROLES}
        with langgraph_dev(tmp_path, chromium_path, env=env) as server:
            await wait_until_ready(server)
            parts, final = await asyncio.wait_for(_run_requirement_only(server), timeout=400)
            log = server.log.read_text()[-3000:]
    assert [data for event, data in parts if event == "error"] == [], log
    assert final["status"] == "finished" and final["chosen_step"] == 3, log


async def test_a_run_without_a_model_fails_with_one_error_naming_the_variables(studio_server: DevServer) -> None:
    if any(os.environ.get(name) for name in MODEL_VARIABLES):
        pytest.skip("this environment names a model, which the session's server inherits")
    parts, _ = await asyncio.wait_for(_run_requirement_only(studio_server), timeout=120)
    errors = [data for event, data in parts if event == "error"]
    assert len(errors) == 1, parts
    message = str(errors[0])
    assert "No coder model" in message
    assert all(name in message for name in ("WEBGEN_MODEL", "WEBGEN_CODER_MODEL", "OPENAI_BASE_URL")), message
    assert not any(event == "updates" for event, _ in parts)  # no node ran
