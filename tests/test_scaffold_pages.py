"""Scaffolds, multi-page capture and the cascaded reward on the scripted server (real npm, Chromium).

- ``pages`` scenario: a three-page site on the react-router scaffold (a fixed-file edit refused, the
  judge grading three screenshots, the GUI agent moving to another page, then a route without a
  page stopped by the structural check); a static site without scaffold whose links are captured
  up to the cap.
- ``cascade`` scenario: single-pass rollouts on the static-pages scaffold, one failing at each stage.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import scripted_models
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import load_trajectories
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.graph.api import run_requirement
from webgen_agent.tools.scaffolds import load_scaffold

CLI = str(Path(sys.executable).parent / "webgen-agent")
e2e = pytest.mark.e2e


@pytest.fixture(scope="module")
def cafe(tmp_path_factory, chromium_path):
    """The three-page cafe run, with the judge's requests kept."""
    base = tmp_path_factory.mktemp("cafe")
    judged: list[dict[str, Any]] = []
    lock = threading.Lock()
    original = scripted_server.request_facts

    def recording(body: dict[str, Any]):
        if body.get("model") == "scripted-vlm" and "ScreenshotJudgement" in json.dumps(body.get("response_format", "")):
            with lock:
                judged.append(body)
        return original(body)

    patch = pytest.MonkeyPatch()
    patch.setattr(scripted_server, "request_facts", recording)
    patch.setenv("WEBGEN_CHROMIUM", chromium_path)
    try:
        with ScriptedServer(Scenario.load(scenario_path("pages"))) as server:
            context = scripted_context(server.base_url, scaffold="react-router", max_steps=2, gui_max_actions=3)
            result = asyncio.run(
                run_requirement(
                    "Build a cafe website with a menu page and a contact page.",
                    context=context,
                    run_id="cafe",
                    out_dir=base / "out",
                    db_path=base / "webgen.db",
                )
            )
    finally:
        patch.undo()
    (trajectory,) = asyncio.run(load_trajectories(base / "webgen.db"))
    return result, trajectory, judged, base


@e2e
def test_a_scaffold_site_of_three_pages_is_captured_as_three_pages(cafe):
    result, trajectory, judged, base = cafe
    first = trajectory.steps[0]
    store = BlobStore(base / "webgen.db")
    try:
        pages = store.get_json(first["pages"])
        assert [p["path"] for p in pages] == ["/", "/menu", "/contact"]
        texts = [p["visible_text"] for p in pages]
        assert "Corner Cafe" in texts[0] and "Espresso 2.50" in texts[1] and "555-0134" in texts[2]
        assert len({p["screenshot"] for p in pages}) == 3  # three different screenshots
    finally:
        store.close()
    images = [part for part in judged[0]["messages"][-1]["content"] if part.get("type") == "image_url"]
    assert len(images) == 3  # the judge graded the set
    assert all(base64.b64decode(i["image_url"]["url"].split(",", 1)[1])[:4] == b"\x89PNG" for i in images)
    run = json.loads((Path(result.out_dir) / "run.json").read_text())
    shown = run["steps"][0]["pages"]
    assert [p["path"] for p in shown] == ["/", "/menu", "/contact"]
    assert all((Path(result.out_dir) / p["screenshot"]).is_file() for p in shown)


@e2e
def test_a_fixed_file_edit_is_refused_and_the_model_is_told(cafe):
    result, trajectory, _, base = cafe
    first, second = trajectory.steps[0], trajectory.steps[1]
    refusal = [p for p in first["problems"] if p.startswith("src/App.jsx")]
    assert refusal and "fixed file of the react-router scaffold" in refusal[0]
    site_app = (Path(result.site_dir) / "src" / "App.jsx").read_text()
    assert site_app == (load_scaffold("react-router").files_dir / "src" / "App.jsx").read_text()
    store = BlobStore(base / "webgen.db")
    try:
        prompt = " ".join(store.get_text(m["hash"]) for m in store.get_json(second["prompt"]))
    finally:
        store.close()
    assert "fixed file of the react-router scaffold" in prompt  # the next turn read why
    assert "src/routes.json" in store_prompt_first(base, first)  # and the first was told what it fills


def store_prompt_first(base: Path, step: dict[str, Any]) -> str:
    store = BlobStore(base / "webgen.db")
    try:
        return " ".join(store.get_text(m["hash"]) for m in store.get_json(step["prompt"]))
    finally:
        store.close()


@e2e
def test_the_gui_test_moves_between_pages(cafe):
    _, trajectory, _, base = cafe
    store = BlobStore(base / "webgen.db")
    try:
        run = store.get_json(trajectory.steps[0]["gui_run"])
    finally:
        store.close()
    assert [a["name"] for a in run["actions"]][:1] == ["click"]
    assert run["final_answer"].startswith("YES - the menu page lists Espresso")


@e2e
def test_a_route_without_its_page_fails_the_structural_check_before_anything_runs(cafe):
    _, trajectory, _, _ = cafe
    execution = trajectory.steps[1]["execution"]
    assert execution["ok"] is False and execution["stage"] == "structure"
    assert "src/pages/Blog.jsx does not exist" in execution["error"]
    assert not execution.get("url") and not execution.get("install_ran")
    assert trajectory.steps[1]["structure_ok"] is False


@e2e
def test_without_scaffold_same_origin_links_are_captured_up_to_the_cap(tmp_path, chromium_path, monkeypatch):
    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    with ScriptedServer(Scenario.load(scenario_path("pages"))) as server:
        context = scripted_context(server.base_url, max_steps=1, max_pages=3, gui_max_actions=2)
        asyncio.run(
            run_requirement(
                "Build a bakery website.",
                context=context,
                run_id="bakery",
                out_dir=tmp_path / "out",
                db_path=tmp_path / "webgen.db",
            )
        )
    (trajectory,) = asyncio.run(load_trajectories(tmp_path / "webgen.db"))
    store = BlobStore(tmp_path / "webgen.db")
    try:
        pages = store.get_json(trajectory.steps[0]["pages"])
    finally:
        store.close()
    assert [p["path"] for p in pages] == ["/", "/breads.html", "/cakes.html"]  # not /visit.html (cap), nor elsewhere
    assert "Sourdough" in pages[1]["visible_text"]


# ---- the cascaded reward ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cascade(tmp_path_factory, chromium_path):
    base = tmp_path_factory.mktemp("cascade")
    db = base / "webgen.db"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    records = Path(scenario_path("cascade")).parent / "cascade" / "records.jsonl"
    with ScriptedServer(Scenario.load(scenario_path("cascade"))) as server:
        done = subprocess.run(
            [
                CLI,
                "rollout",
                "--profile",
                "default",
                "--data",
                str(records),
                "--samples",
                "1",
                "--workers",
                "2",
                "--loop",
                "single",
                "--scaffold",
                "static-pages",
                "--reward",
                "cascaded",
                "--gui-max-actions",
                "2",
                "--name",
                "c",
                "--out",
                str(base / "runs"),
                "--db",
                str(db),
                *scripted_models(server.base_url),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    out = base / "rewards.jsonl"
    done = subprocess.run(
        [CLI, "export", "--format", "rewards", "--reward", "cascaded", "--out", str(out), "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rewards = {json.loads(line)["group_id"]: json.loads(line) for line in out.read_text().splitlines()}
    trajectories = {t.group_id: t for t in asyncio.run(load_trajectories(db))}
    return rewards, trajectories


@e2e
def test_cascaded_rewards_follow_the_gates(cascade):
    rewards, trajectories = cascade
    assert rewards["tea"]["rewards"] == [0.0]  # structure failed: nothing from later stages
    assert rewards["garden"]["rewards"] == [pytest.approx(0.1)]  # execution failed: the structure credit only
    assert rewards["books"]["rewards"] == [pytest.approx(0.1 + 4 + 5 * 0.5)]  # one of two checks passed
    tea = trajectories["tea"].steps[0]["execution"]
    assert tea["stage"] == "structure" and "teas.html does not exist" in tea["error"]
    garden = trajectories["garden"].steps[0]["execution"]
    assert garden["stage"] == "render" and "/about.html" in garden["error"] and "garden map failed" in garden["error"]


@e2e
def test_the_report_shows_every_page(cafe):
    from webgen_agent.apps.report.html import write_report

    _, _, _, base = cafe
    out = base / "report.html"
    asyncio.run(write_report("cafe", db_path=base / "webgen.db", out=out))
    html = out.read_text()
    assert "Landing page after step 0" in html
    assert "Page /menu after step 0" in html and "Page /contact after step 0" in html
