"""The whole loop, end to end: scripted model over HTTP, real npm + Vite, real Chromium, real browser-use.

This is the built-in demo scenario (README): a syntax error the executor catches, a bare page judged
poorly, a good-looking page whose Add button is broken (the GUI agent finds out), and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.e2e


async def test_demo_story_is_played_for_real(demo_run):
    result, _ = demo_run
    assert result.status == "finished"
    steps = {s.index: s for s in result.summary.steps}
    assert sorted(steps) == [0, 1, 2, 3]

    assert steps[0].errored and steps[0].execution_stage == "render"
    assert "App.jsx" in (steps[0].execution_error or "")
    assert steps[0].screenshot_score == 0

    assert (steps[1].screenshot_score, steps[1].errored, steps[1].gui_score) == (2, True, 0)
    assert (steps[2].screenshot_score, steps[2].gui_passed, steps[2].gui_score) == (4, False, 2)
    assert (steps[3].screenshot_score, steps[3].gui_passed, steps[3].gui_score) == (5, True, 5)
    assert result.chosen_step == 3


async def test_demo_outputs_site_screenshots_and_accounting(demo_run):
    result, _ = demo_run
    out = Path(result.out_dir)
    app = (out / "site" / "src" / "App.jsx").read_text()
    assert "setItems([...items, text])" in app
    assert not (out / "site" / "node_modules").exists()
    for index in range(4):
        png = (out / "steps" / f"{index}.png").read_bytes()
        assert png.startswith(b"\x89PNG")
    run = json.loads((out / "run.json").read_text())
    assert run["chosen_step"] == 3 and len(run["steps"]) == 4
    step3 = run["steps"][3]
    assert {"refiner", "executor", "screenshot_judge", "gui_tester"} <= set(step3["timings"])
    assert step3["tokens"]["refiner"]["output"] > 0 and step3["tokens"]["gui_tester"]["calls"] >= 3
    assert run["input_tokens"] > 0 and run["wall_seconds"] > 0
    # The scripted model is free: every cost is known, $0 (no "?" beside "$0.0000").
    assert run["cost_usd"] == 0 and all(step["cost_usd"] == 0 for step in run["steps"]), run["cost_usd"]


async def test_demo_leaves_no_server_or_browser_behind(demo_run):
    result, _ = demo_run
    workspace = str(Path(result.out_dir) / "workspace")
    leftovers = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if proc.info["cwd"] and proc.info["cwd"].startswith(workspace):
                leftovers.append(proc.info)
        except psutil.Error:
            continue
    assert leftovers == []


async def test_a_slow_grade_hides_the_gui_sessions_start(tmp_path: Path, chromium_path: str, vite_template) -> None:
    """With a grading model slower than PREPARE_GUI_AFTER_S, each GUI test gets its session opened ahead."""
    from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.checkpoints.history import final_state
    from webgen_agent.checkpoints.store import BlobStore
    from webgen_agent.graph.api import run_requirement

    # 0.8 s: a grade as a fast hosted model gives it, and long enough to hide most of the opening.
    slow_grades = Scenario.load(scenario_path("demo")).with_delay(0.8, schema="ScreenshotJudgement")
    db = tmp_path / "webgen.db"
    with ScriptedServer(slow_grades) as server:
        context = scripted_context(server.base_url, max_steps=8).model_copy(update={"chromium": chromium_path})
        result = await run_requirement(
            DEMO_REQUIREMENT, context=context, run_id="slow-grades", out_dir=tmp_path / "out", db_path=db
        )
    assert result.status == "finished" and result.chosen_step == 3
    steps = {s["index"]: s for s in (await final_state(db, "slow-grades"))["steps"]}
    store = BlobStore(db)
    try:
        gui_runs = {i: store.get_json(steps[i]["gui_run"]) for i in (2, 3)}
    finally:
        store.close()
    # Steps 2 and 3 were graded well enough for a GUI test; both used the session opened ahead.
    assert {i: (run["prepared"], run["stopped_reason"]) for i, run in gui_runs.items()} == {
        2: (True, "done"),
        3: (True, "done"),
    }
    assert "gui_run" not in steps[1]  # graded 2/5: no GUI test, and its prepared session was closed


def test_the_demo_runs_without_the_registry_once_its_packages_are_cached(demo_run, tmp_path, chromium_path):
    """After one demo (the session's), the dependency cache holds its packages: no registry needed."""
    import os

    from tests.test_cli import cli

    shared = os.environ["WEBGEN_DEPS_CACHE"]  # the session's cache, which the demo fixture filled
    dead = {"npm_config_registry": "http://127.0.0.1:9/", "WEBGEN_CHROMIUM": chromium_path, "WEBGEN_DEPS_CACHE": shared}
    cached = cli("demo", "--out", str(tmp_path / "o"), "--db", str(tmp_path / "db" / "w.db"), env=dead, timeout=600)
    assert cached.returncode == 0, cached.stdout[-2000:] + cached.stderr
    assert "needs npm's registry" not in cached.stdout + cached.stderr

    empty = {**dead, "WEBGEN_DEPS_CACHE": str(tmp_path / "empty-cache")}
    args = ["demo", "--out", str(tmp_path / "o2"), "--db", str(tmp_path / "db2" / "w.db")]
    offline = cli(*args, env=empty, timeout=600)
    assert offline.returncode == 1
    assert "needs npm's registry" in offline.stderr and "connection refused" in offline.stderr
