"""Shared test fixtures."""

from __future__ import annotations

# ---- execution fixtures (tools/process.py, tools/site.py, tools/browser.py) --------------------
# One tiny React + Vite project installed once per session into a shared dependency cache, and one
# shared Chromium. Tests copy the template with ``vite_template.make_workspace(dir)`` and give
# ``SiteRunner`` the ``deps_cache_dir``: node_modules then comes from the cache by hardlinks.
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from filelock import AsyncFileLock, FileLock

# Plugins of the suite: the e2e marker means what it says; a shared fixture's failure is reported once.
pytest_plugins = ["tests.e2e_guard", "tests.fixture_failures"]

# Every npm install of the suite resolves packages as published before a fixed date. The registry
# this machine reaches can list a release before the releases it depends on (seen 2026-12-04:
# @babel/core 7.29.17 asked for @babel/generator ^7.29.17, not there yet, and every install of a
# Vite + React project failed with ETARGET); a fixed date keeps the suite off the registry's latest
# hours. npm settings pass into the sandbox, so installs inside it resolve the same way.
os.environ.setdefault("npm_config_before", "2026-11-20T00:00:00Z")

VITE_TEMPLATE_FILES = {
    "package.json": """{
  "name": "webgen-test-app",
  "private": true,
  "version": "0.0.0",
  "type": "module",
  "scripts": {"dev": "vite", "build": "vite build"},
  "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"},
  "devDependencies": {"vite": "^5.4.0", "@vitejs/plugin-react": "^4.3.0"}
}
""",
    "vite.config.js": """import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

export default defineConfig({ plugins: [react()] })
""",
    "index.html": """<!doctype html>
<html lang="en">
  <head><meta charset="UTF-8" /><title>Webgen Test App</title></head>
  <body>
    <div id="root"></div>
    <script type="module" src="/src/main.jsx"></script>
  </body>
</html>
""",
    "src/main.jsx": """import React from 'react'
import { createRoot } from 'react-dom/client'
import App from './App.jsx'

createRoot(document.getElementById('root')).render(<App />)
""",
    "src/App.jsx": """export default function App() {
  return <main><h1>Hello from Vite</h1><button>Click me</button></main>
}
""",
}


def _tools_available() -> str | None:
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@dataclass(frozen=True)
class ViteTemplate:
    source: Path  # pristine files, no node_modules
    deps_cache_dir: Path  # holds the installed node_modules for the template's dependencies
    install_s: float  # how long the one real npm install took

    def make_workspace(self, dest: Path) -> Path:
        """Copy the template files (not node_modules) into ``dest``."""
        shutil.copytree(self.source, dest, dirs_exist_ok=True)
        return dest


def shared_by_workers(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A session folder that pytest-xdist's workers share (their base folders' parent), or this
    session's own when the suite runs in one process."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def deps_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dependency cache for the whole suite, also across xdist workers: its entries are renamed
    into place, so workers storing and restoring at once is safe (tools/site/depcache.py)."""
    return shared_by_workers(tmp_path_factory, "deps-cache")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vite_template(tmp_path_factory: pytest.TempPathFactory, deps_cache_dir: Path) -> ViteTemplate:
    missing = _tools_available()
    if missing:
        pytest.skip(missing)
    from webgen_agent.tools.site import SiteRunner

    source = tmp_path_factory.mktemp("vite-template")
    for rel, text in VITE_TEMPLATE_FILES.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    warm = tmp_path_factory.mktemp("vite-warm")
    shutil.copytree(source, warm, dirs_exist_ok=True)
    runner = SiteRunner(warm, registry=None, log_dir=warm.parent / "vite-warm-logs", deps_cache_dir=deps_cache_dir)
    # One worker installs; the others wait, then restore the cached tree.
    async with AsyncFileLock(deps_cache_dir.parent / "vite-template.lock"):
        try:
            result = await runner.ensure_dependencies()
        finally:
            await runner.stop()
    if result.error:
        pytest.fail(f"installing the Vite template failed:\n{result.error}")
    return ViteTemplate(source=source, deps_cache_dir=deps_cache_dir, install_s=result.seconds)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    from webgen_agent.core.context import find_chromium
    from webgen_agent.core.errors import ConfigError

    try:  # the one the agent itself would launch
        return find_chromium()
    except ConfigError:
        pytest.skip("no Chromium installed")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_browser(chromium_path: str, tmp_path_factory: pytest.TempPathFactory):
    from webgen_agent.tools.browser import SharedBrowser
    from webgen_agent.tools.process import ProcessRegistry

    registry = ProcessRegistry(tmp_path_factory.mktemp("browser-registry") / "processes.jsonl")
    browser = SharedBrowser(chromium_path, registry=registry)
    await browser.start()
    try:
        yield browser
    finally:
        await browser.close()


@pytest.fixture(scope="session")
def playwright_test_dir(deps_cache_dir: Path) -> Path | str:
    """@playwright/test installed once per session (the newest release of the Python Playwright's minor
    version: npm's package can lag the Python one by a patch release) into a folder of the shared
    dependency cache; npm's error when it cannot install it (no registry here)."""

    folder = deps_cache_dir / "playwright-test"
    with FileLock(deps_cache_dir.parent / "playwright-test.lock"):  # one xdist worker installs it
        if (folder / "node_modules" / ".bin" / "playwright").exists():
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        return _install_playwright_test(folder)


def _install_playwright_test(folder: Path) -> Path | str:
    import importlib.metadata
    import os
    import subprocess

    major, minor = importlib.metadata.version("playwright").split(".")[:2]
    done = subprocess.run(
        ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", f"@playwright/test@~{major}.{minor}.0"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # Any release of that minor version: the suite's registry date cut-off (npm_config_before) may predate it.
        env={k: v for k, v in os.environ.items() if k.lower() != "npm_config_before"},
    )
    return folder if done.returncode == 0 else (done.stdout + done.stderr)[-1500:]


# ---- end of execution fixtures -----------------------------------------------------------------


# ---- one node at a time (tests/node_harness.py) ------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def node_harness(tmp_path: Path):
    """A node run without the graph: fresh store and workspace, scripted models, no browser."""
    from tests.node_harness import NodeHarness

    async with NodeHarness.open(tmp_path) as harness:
        yield harness


@pytest_asyncio.fixture(loop_scope="session")
async def browser_node_harness(tmp_path: Path, shared_browser):
    """``node_harness`` with the session's Chromium (for e2e tests: captures, GUI agents)."""
    from tests.node_harness import NodeHarness

    async with NodeHarness.open(tmp_path, browser=shared_browser) as harness:
        yield harness


# ---- whole-run fixtures ------------------------------------------------------------------------
# One uninterrupted run of the built-in demo, shared by the tests that compare against it.


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def demo_run(tmp_path_factory: pytest.TempPathFactory, chromium_path: str, vite_template):
    import os

    from webgen_agent.apps.demo import run_demo

    os.environ["WEBGEN_CHROMIUM"] = chromium_path
    base = tmp_path_factory.mktemp("demo")
    result = await run_demo(out_dir=base / "out", db_path=base / "db" / "webgen.db", console=None)
    return result, base


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def studio_server(tmp_path_factory: pytest.TempPathFactory, chromium_path: str, vite_template):
    """One ``langgraph dev`` for the session (SQLite store, three jobs per worker, the blocking-call
    detector on; see tests/studio.py), shared by every test that drives the server. Each test starts
    its own scripted model server and passes its URL in the run context. Stopped at the end."""
    from tests.studio import langgraph_dev, wait_until_ready

    with langgraph_dev(tmp_path_factory.mktemp("studio"), chromium_path) as server:
        await wait_until_ready(server)
        yield server


@pytest.fixture(scope="session", autouse=True)
def shared_deps_cache(deps_cache_dir: Path):
    """Every run in the session (in-process or CLI subprocess) shares one node_modules cache.

    The demo scenario's dependencies equal the Vite template's, so one npm install serves them all.
    """
    import os

    previous = os.environ.get("WEBGEN_DEPS_CACHE")
    os.environ["WEBGEN_DEPS_CACHE"] = str(deps_cache_dir)
    yield deps_cache_dir
    if previous is None:
        os.environ.pop("WEBGEN_DEPS_CACHE", None)
    else:
        os.environ["WEBGEN_DEPS_CACHE"] = previous


# ---- run databases -----------------------------------------------------------------------------
# Storage-dependent tests take ``db_target``: parametrized over SQLite (a fresh file) and PostgreSQL
# (a fresh database on one throwaway cluster per session, see tests/postgres.py).


@pytest.fixture(scope="session")
def postgres_cluster():
    from tests.postgres import postgres_bin, throwaway_cluster

    if postgres_bin() is None:
        if os.environ.get("CI") or os.environ.get("WEBGEN_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL is not installed (scripts/setup.sh --test installs it)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql, or run scripts/setup.sh --test)")
    with throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session", autouse=True)
def state_dir(tmp_path_factory: pytest.TempPathFactory):
    """This machine's working files (process registry, dependency cache) go to a session folder, never
    to the working folder's ./.webgen (their default)."""
    previous = os.environ.get("WEBGEN_STATE_DIR")
    os.environ["WEBGEN_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    yield Path(os.environ["WEBGEN_STATE_DIR"])
    if previous is None:
        os.environ.pop("WEBGEN_STATE_DIR", None)
    else:
        os.environ["WEBGEN_STATE_DIR"] = previous


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)]  # PostgreSQL runs a server: e2e


@pytest.fixture(params=STORES)
def db_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh run database per test, on each store in turn."""
    from tests.postgres import fresh_db

    return fresh_db(request, tmp_path)


# The shared Ray instance's CPUs: a count no machine's own cores give, so a test can tell which cluster it joined.
RAY_CPUS = 3


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray instance for a module's tests; the commands join it as a cluster."""
    ray = pytest.importorskip("ray")
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, configure_logging=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous
