"""``webgen-agent ship``: a run's step as a zip, sources or built with real npm and Vite, checked in Chromium.

The Vite app is the session's demo run (tests/conftest.py ``demo_run``: step 0 does not compile,
step 3 is chosen); the static site is a run of the ``landing`` scenario (no npm). Every zip is
unpacked and, when it holds a built site, served and loaded in the shared Chromium.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.helpers import site_files
from webgen_agent.apps.cli.main import app
from webgen_agent.apps.ship import ShipError, check_renders, pick_step
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.tools.capture import PageCapture
from webgen_agent.tools.site import SiteRunner

pytestmark = pytest.mark.e2e


def _db(base: Path) -> Path:
    return base / "db" / "webgen.db"


def ship(*args: str) -> Result:
    return CliRunner().invoke(app, ["ship", *args])


def zip_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def unzip(path: Path, dest: Path) -> Path:
    with zipfile.ZipFile(path) as archive:
        archive.extractall(dest)
    return dest


async def serve_and_capture(folder: Path, browser: Any, logs: Path) -> PageCapture:
    """Serve ``folder`` with the executor's static server and load it in the shared Chromium."""
    runner = SiteRunner(folder, log_dir=logs)
    try:
        started = await runner.ensure_running()
        assert started.ok and started.url, started.error
        return await browser.capture(started.url)
    finally:
        await runner.stop()


@pytest.fixture(scope="module")
def vite_ship(demo_run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo run shipped three ways through the CLI: built, as sources, and step 1's sources."""
    result, base = demo_run
    out = tmp_path_factory.mktemp("ship-vite")
    db = str(_db(base))
    shipped = {
        "built": ship(result.run_id, "--out", str(out / "built.zip"), "--build", "--db", db),
        "sources": ship(result.run_id, "--out", str(out / "sources.zip"), "--db", db),
        "step1": ship(result.run_id, "--step", "1", "--out", str(out / "step1.zip"), "--db", db),
    }
    for name, invoked in shipped.items():
        assert invoked.exit_code == 0, f"{name}: {invoked.output}"
    return {"run": result, "base": base, "out": out, "cli": shipped}


async def test_built_vite_app_zip_renders_in_chromium(
    vite_ship: dict[str, Any], shared_browser, tmp_path: Path
) -> None:
    built = vite_ship["out"] / "built.zip"
    output = vite_ship["cli"]["built"].output
    assert f"shipped step 3 of {vite_ship['run'].run_id}" in output and "built output dist/" in output
    assert "rendered in Chromium" in output
    files = zip_files(built)
    # The static output only: the built page and its bundle, no sources, dependencies or markers.
    assert "index.html" in files
    assert any(name.startswith("assets/") and name.endswith(".js") for name in files)
    assert not any(name.startswith(("node_modules/", "src/")) or "/node_modules/" in name for name in files)
    assert "package.json" not in files and not any(".webgen" in name for name in files)
    assert b"/src/main.jsx" not in files["index.html"]  # the built page, not the source one

    capture = await serve_and_capture(unzip(built, tmp_path / "site"), shared_browser, tmp_path / "logs")
    assert capture.page_errors == [] and capture.render_error is None, capture.render_error
    assert not capture.blank
    assert "My Todos" in capture.visible_text and "Items: 0" in capture.visible_text
    assert capture.title == "Todo list"


def test_sources_zip_is_the_chosen_step_without_node_modules(vite_ship: dict[str, Any]) -> None:
    files = zip_files(vite_ship["out"] / "sources.zip")
    site = site_files(Path(vite_ship["run"].site_dir))  # finalize wrote the chosen step here
    recorded = {"tests/e2e/step-3.spec.js", "playwright.config.js", "README.md"}  # the run's recorded GUI test
    assert recorded <= set(files) and {k: v for k, v in files.items() if k not in recorded} == site
    assert {"package.json", "index.html", "src/App.jsx", "vite.config.js"} <= set(files)
    assert not any("node_modules" in name or name.endswith(".log") or ".webgen" in name for name in files)


async def test_shipped_e2e_tests_pass_with_npx_playwright_against_the_shipped_site(
    vite_ship: dict[str, Any],
    playwright_test_dir: Path | str,
    chromium_path: str,
    deps_cache_dir: Path,
    tmp_path: Path,
) -> None:
    """The recorded GUI test ships as a @playwright/test spec that passes against the shipped sources."""
    files = zip_files(vite_ship["out"] / "sources.zip")
    assert b'getByRole("button", { name: "Add item", exact: true }).click()' in files["tests/e2e/step-3.spec.js"]
    assert b"npx playwright test" in files["README.md"]
    if isinstance(playwright_test_dir, str):
        pytest.skip(f"npm could not install @playwright/test here (docs/replay.md): {playwright_test_dir}")
    # Unpacked below the shared @playwright/test install: the specs' imports resolve to it, as they
    # would to the project's own after `npm install -D @playwright/test`.
    project = unzip(vite_ship["out"] / "sources.zip", Path(tempfile.mkdtemp(dir=playwright_test_dir)))
    runner = SiteRunner(project, log_dir=tmp_path / "logs", deps_cache_dir=deps_cache_dir)
    try:
        started = await runner.ensure_running()
        assert started.ok and started.url, started.error
        env = {
            **os.environ,
            "BASE_URL": started.url,
            "CHROMIUM_PATH": chromium_path,
        }
        cli = str(playwright_test_dir / "node_modules" / ".bin" / "playwright")
        done = await asyncio.to_thread(
            subprocess.run,
            [cli, "test", "--reporter=line"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        await runner.stop()
        shutil.rmtree(project, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_step_option_picks_that_step(vite_ship: dict[str, Any]) -> None:
    db = _db(vite_ship["base"])
    state = await final_state(db, vite_ship["run"].run_id)
    store = BlobStore(db)
    try:
        manifest = store.manifest(state["steps"][1]["files"])
        step1_app = store.get(manifest["src/App.jsx"])
    finally:
        store.close()
    files = zip_files(vite_ship["out"] / "step1.zip")
    assert "shipped step 1 of" in vite_ship["cli"]["step1"].output
    assert files["src/App.jsx"] == step1_app
    assert files["src/App.jsx"] != zip_files(vite_ship["out"] / "sources.zip")["src/App.jsx"]


def test_errors_are_one_line_and_write_nothing(demo_run, tmp_path: Path) -> None:
    result, base = demo_run
    db = str(_db(base))
    out = tmp_path / "never.zip"

    unknown_run = ship("no-such-run", "--out", str(out), "--db", db)
    assert unknown_run.exit_code == 2 and f"no run no-such-run in {db}" in unknown_run.output

    unknown_step = ship(result.run_id, "--step", "9", "--out", str(out), "--db", db)
    assert unknown_step.exit_code == 2
    assert f"run {result.run_id} has no step 9 (steps 0-3)" in unknown_step.output

    folder = ship(result.run_id, "--out", str(tmp_path), "--db", db)
    assert folder.exit_code == 2 and "is a folder" in folder.output

    no_db = ship(result.run_id, "--out", str(out), "--db", str(tmp_path / "missing.db"))
    assert no_db.exit_code == 2 and "no database at" in no_db.output

    # Step 0's App.jsx does not compile: the build fails and the error shows the build's log tail.
    broken = ship(result.run_id, "--step", "0", "--build", "--out", str(out), "--db", db)
    assert broken.exit_code == 2
    first, *tail = broken.output.strip().splitlines()
    assert "error: `npm run build` failed (exit code" in first
    assert "App.jsx" in "\n".join(tail)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_step_without_files_cannot_be_shipped() -> None:
    state = {"chosen_step": 0, "steps": [{"index": 0, "files": None}]}
    with pytest.raises(ShipError, match="step 0 of run r has no files"):
        pick_step(state, "r", None)
    with pytest.raises(ShipError, match="has no chosen step yet"):
        pick_step({"steps": state["steps"], "status": "running"}, "r", None)


async def test_a_page_that_throws_or_is_missing_is_not_packed(shared_browser, tmp_path: Path) -> None:
    throws = tmp_path / "throws"
    throws.mkdir()
    (throws / "index.html").write_text(
        "<!doctype html><title>t</title><h1>Shop</h1><script>window.cart.items.push(1)</script>"
    )
    with pytest.raises(ShipError, match="does not render cleanly: .*Uncaught errors") as caught:
        await check_renders(throws, browser=shared_browser, work_dir=tmp_path / "w1")
    assert "\n" not in str(caught.value)

    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "index.html").write_text("<!doctype html><title>b</title><div id='root'></div>")
    with pytest.raises(ShipError, match="rendered nothing visible"):
        await check_renders(blank, browser=shared_browser, work_dir=tmp_path / "w2")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ShipError, match="no index.html in empty/"):
        await check_renders(empty, browser=shared_browser, work_dir=tmp_path / "w3")


@pytest.fixture(scope="module")
async def landing_run(tmp_path_factory: pytest.TempPathFactory, chromium_path: str) -> tuple[Any, Path]:
    """A finished run of the small static-site scenario (no package.json)."""
    import os

    from webgen_agent.apps.demo import scenario_path, scripted_context
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.graph.api import run_requirement

    os.environ["WEBGEN_CHROMIUM"] = chromium_path
    base = tmp_path_factory.mktemp("ship-static")
    async with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        context = scripted_context(server.base_url, max_steps=6, runs_dir=str(base / "runs"))
        result = await run_requirement(
            "A one-page website for a coffee shop with its menu and a button that reveals the opening hours.",
            context=context,
            run_id="static-site",
            db_path=_db(base),
        )
    assert result.status == "finished" and result.chosen_step == 1
    return result, base


@pytest.fixture(scope="module")
def static_ship(landing_run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result, base = landing_run
    out = tmp_path_factory.mktemp("ship-static-out")
    db = str(_db(base))
    invoked = {
        "plain": ship(result.run_id, "--out", str(out / "plain.zip"), "--db", db),
        "build": ship(result.run_id, "--out", str(out / "build.zip"), "--build", "--db", db),
    }
    for name, cli in invoked.items():
        assert cli.exit_code == 0, f"{name}: {cli.output}"
    return {"run": result, "out": out, "cli": invoked}


async def test_static_site_ships_as_is_and_build_only_checks_it(
    static_ship: dict[str, Any], shared_browser, tmp_path: Path
) -> None:
    site = site_files(Path(static_ship["run"].site_dir))
    plain = zip_files(static_ship["out"] / "plain.zip")
    built = zip_files(static_ship["out"] / "build.zip")
    recorded = {"playwright.config.mjs", "tests/e2e/serve.mjs", "README.md"}  # and the specs
    assert {k: v for k, v in plain.items() if k not in recorded and not k.endswith(".spec.js")} == built == site
    assert b"Show opening hours" in plain["index.html"]
    output = static_ship["cli"]["build"].output
    assert "(sources, index.html rendered in Chromium (Bean There))" in output

    capture = await serve_and_capture(
        unzip(static_ship["out"] / "build.zip", tmp_path / "site"), shared_browser, tmp_path / "logs"
    )
    assert capture.render_error is None and "Bean There" in capture.visible_text


async def test_a_static_sites_recorded_tests_ship_and_pass_with_npx_playwright(
    static_ship: dict[str, Any], playwright_test_dir: Path | str, chromium_path: str
) -> None:
    """A static site's recorded GUI test ships with a Playwright config that serves the folder (node
    alone, no dev server): `npx playwright test` in the unpacked zip passes, nothing else started."""
    files = zip_files(static_ship["out"] / "plain.zip")
    specs = [name for name in files if name.startswith("tests/e2e/") and name.endswith(".spec.js")]
    assert len(specs) == 1 and b"Show opening hours" in files[specs[0]]
    assert {"playwright.config.mjs", "tests/e2e/serve.mjs"} <= set(files) and "package.json" not in files
    assert b"node tests/e2e/serve.mjs" in files["README.md"]
    if isinstance(playwright_test_dir, str):
        pytest.skip(f"npm could not install @playwright/test here (docs/replay.md): {playwright_test_dir}")
    project = unzip(static_ship["out"] / "plain.zip", Path(tempfile.mkdtemp(dir=playwright_test_dir)))
    with socket.socket() as probe:  # a free port for the config's server (PORT)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "BASE_URL"} | {"CHROMIUM_PATH": chromium_path, "PORT": str(port)}
    cli = str(playwright_test_dir / "node_modules" / ".bin" / "playwright")
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [cli, "test", "--reporter=line"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        shutil.rmtree(project, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
