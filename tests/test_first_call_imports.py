"""A run's first model call is not slowed down by browser-use's import (a fresh process, as a CLI run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

# A run whose model takes a minute to answer: the script stops it once browser-use is imported
# (which the generator starts beside the first calls), or after 60 s.
RUN = """
import asyncio, sys
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.tools.gui_agent.patches import import_browser_use

async def main(base):
    scenario = Scenario.load(scenario_path("demo")).with_delay(60)
    with ScriptedServer(scenario) as server:
        async with use_resources(Resources(base + "/webgen.db")):
            run = asyncio.create_task(run_requirement(
                DEMO_REQUIREMENT, context=scripted_context(server.base_url), out_dir=base + "/out",
                db_path=base + "/webgen.db"))
            for _ in range(600):
                if "browser_use" in sys.modules and "langchain_openai" in sys.modules:
                    break
                await asyncio.sleep(0.1)
            await asyncio.to_thread(import_browser_use)  # waits for the import under way to finish
            run.cancel()
            await asyncio.wait({run})

asyncio.run(main(sys.argv[1]))
"""


def finished_imports(importtime: str) -> list[str]:
    """Module names in the order their imports finished (``-X importtime`` prints a line as each one does)."""
    names = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2 and "cumulative" not in line:
            names.append(line.rsplit("|", 1)[1].strip())
    return names


def test_browser_use_is_imported_after_the_model_clients(tmp_path: Path) -> None:
    """Both imports at once share one interpreter and each takes about twice as long: the first
    coder call would reach the endpoint about a second later. The model clients come first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names = finished_imports(done.stderr)
    browser_use = [i for i, name in enumerate(names) if name.split(".")[0] == "browser_use"]
    assert "langchain_openai" in names and browser_use, names[-20:]
    first_browser_use = browser_use[0]
    assert names.index("langchain_openai") < first_browser_use
    assert names.index("openai") < first_browser_use
