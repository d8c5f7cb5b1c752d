"""No blocking call on the event loop: a whole scripted run under the LangGraph dev server's blocking-call detector.

``langgraph dev`` activates blockbuster around the runs it serves and turns a synchronous file,
SQLite, socket or subprocess call on the event loop into a ``BlockingError`` that fails the run (on a
deployed server the same call would stall every other run of the worker). This test switches the
detector on with the server's own configuration and plays the demo scenario through
``run_requirement``: real npm, Vite, Chromium, browser-use and checkpoints, every node, router and
resource, on both run databases; then the WebLoop loop's nodes (requirement checks, code critic)
on a scaffold-free counter page. libpq waits for PostgreSQL inside C code, where the detector
cannot see it, so on PostgreSQL psycopg's synchronous entry points are added to the detector.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.graph.api import run_requirement

pytestmark = pytest.mark.e2e

WEBLOOP_REQUIREMENT = (
    "Build a counter page: an 'Add one' button that raises a visible count, and a footer that says 'Made with care'."
)


def _synchronous_psycopg() -> list:
    """Detector entries for psycopg's synchronous calls (the async driver's are other classes)."""
    import psycopg
    import psycopg_pool
    from blockbuster import BlockBusterFunction

    return [
        BlockBusterFunction(psycopg.Connection, "execute"),
        BlockBusterFunction(psycopg.Cursor, "execute"),
        BlockBusterFunction(psycopg_pool.ConnectionPool, "getconn"),
    ]


async def test_scripted_run_makes_no_blocking_call_on_the_event_loop(
    tmp_path: Path, chromium_path: str, vite_template, db_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = pytest.importorskip("langgraph_runtime_inmem.queue")
    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    extra = _synchronous_psycopg() if Database.of(db_target).is_postgres else []
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        context = scripted_context(server.base_url, max_steps=8, runs_dir=str(tmp_path / "runs"))
        detector = queue._enable_blockbuster()  # exactly what `langgraph dev` switches on
        for function in extra:
            function.activate()
        try:
            result = await run_requirement(DEMO_REQUIREMENT, context=context, run_id="async-clean", db_path=db_target)
        finally:
            for function in extra:
                function.deactivate()
            detector.deactivate()
    assert result.status == "finished" and result.chosen_step == 3
    step3 = result.summary.steps[3]
    assert step3.gui_passed and step3.gui_score == 5  # the GUI agent ran, under the detector too
    assert (Path(result.site_dir or "") / "src" / "App.jsx").is_file()


async def test_webloop_run_makes_no_blocking_call_on_the_event_loop(
    tmp_path: Path, chromium_path: str, vite_template, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = pytest.importorskip("langgraph_runtime_inmem.queue")
    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    with ScriptedServer(Scenario.load(scenario_path("webloop"))) as server:
        context = scripted_context(
            server.base_url,
            max_steps=4,
            gui_max_actions=3,
            loop="webloop",
            shared_policy=True,
            critique_rounds=1,
            runs_dir=str(tmp_path / "runs"),
        )
        detector = queue._enable_blockbuster()
        try:
            result = await run_requirement(
                WEBLOOP_REQUIREMENT, context=context, run_id="webloop-clean", db_path=tmp_path / "db" / "webgen.db"
            )
        finally:
            detector.deactivate()
    assert result.status == "finished"
    steps = (await final_state(tmp_path / "db" / "webgen.db", "webloop-clean"))["steps"]
    assert any(step.get("checks") for step in steps), "the requirement checks ran"
    assert any(step.get("critique") for step in steps), "the code critic ran"
