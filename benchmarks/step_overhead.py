"""Step overhead on a React + Vite app, model time excluded, against an upstream-style baseline.

The agent: ``run_requirement`` with a scripted coder (no delay) that writes a 7-file todo app, then
makes source-only edits (the heading in src/App.jsx), then adds one dependency (clsx in
package.json and an import), then one more source edit. Per-node wall times come from the run's
step records; the executor's time is the step overhead (write, install if needed, keep or restart
the dev server, capture). Each repetition gets its own run database folder whose dependency cache
holds the base install only, so the dependency edit really runs npm (with npm's own cache warm).

The baseline, written here without SiteRunner or SharedBrowser, does what upstream WebGen-Agent
does at every step: a fresh copy of the project without node_modules, `npm install`, `npm run dev`
until the log prints the URL, a fixed 3 s wait, a new Chromium for one screenshot.

    .venv/bin/python -m benchmarks.step_overhead [--no-sandbox]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

from playwright.async_api import async_playwright

from benchmarks.common import (
    REPEATS,
    Stopwatch,
    app_files,
    artifact,
    hardlink_copy,
    median,
    print_header,
    run_main,
)
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import SandboxSettings, find_chromium
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.tools.site import NPM_INSTALL, SiteRunner, free_port

SOURCE_STEPS = (1, 2, 3, 4, 6)  # coder turns that change src/App.jsx only
DEPENDENCY_STEP = 5  # adds clsx to package.json
STEPS = 7
UPSTREAM_WAIT_S = 3.0  # upstream's fixed wait after the server printed its URL
_URL = re.compile(r"https?://(?:localhost|127\.0\.0\.1):\d+/?")


def heading(step: int) -> str:
    return f"Todos, version {step}"


def step_files(step: int) -> dict[str, str]:
    """The whole project as it stands after coder turn ``step``."""
    return app_files(heading(step), with_dependency=step >= DEPENDENCY_STEP)


def scenario() -> dict:
    rules = [{"model": "scripted-coder", "turn": 0, "content": artifact(step_files(0))}]
    for step in range(1, STEPS):
        files = step_files(step)
        changed = ["src/App.jsx"] + (["package.json"] if step == DEPENDENCY_STEP else [])
        rules.append({"model": "scripted-coder", "turn": step, "content": artifact({p: files[p] for p in changed})})
    rules += [
        # 3/5: good enough to keep going, not good enough for a GUI test: every step is edit + judge.
        {
            "model": "scripted-vlm",
            "schema": "ScreenshotJudgement",
            "json": {"description": "A todo card.", "score": 3, "suggestions": ["Polish the heading."]},
        },
        {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Add a todo."}},
    ]
    return {"name": "step-overhead", "description": "source-only edits and one dependency edit", "rules": rules}


# ---- the agent ---------------------------------------------------------------------------------


async def warm_base_cache(base: Path) -> Path:
    """A dependency cache holding the base app's install (npm runs here, untimed)."""
    cache = base / "deps-base"
    workspace = base / "warm"
    for rel, text in step_files(0).items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    runner = SiteRunner(workspace, log_dir=base / "warm-logs", deps_cache_dir=cache)
    result = await runner.ensure_dependencies()
    if result.error:
        raise SystemExit(f"npm install of the benchmark app failed:\n{result.error}")
    return cache


async def agent_run(base: Path, server_url: str, rep: int, base_cache: Path) -> list[dict]:
    """One run; its step records (with per-node timings and execution details)."""
    folder = base / f"agent-{rep}"
    db = folder / "webgen.db"
    folder.mkdir()
    cache = hardlink_copy(base_cache, folder / "deps-cache")  # this database folder's own cache
    # --no-sandbox measures the same steps with generated code unconfined (the sandbox's cost).
    sandbox = SandboxSettings(enabled="--no-sandbox" not in sys.argv)
    context = scripted_context(server_url, max_steps=STEPS, backtrack=False, sandbox=sandbox)
    async with use_resources(Resources(db, deps_cache_dir=cache)):
        await run_requirement("A todo app.", context=context, run_id=f"steps-{rep}", out_dir=folder / "out", db_path=db)
    steps = (await final_state(db, f"steps-{rep}"))["steps"]
    store = BlobStore(db)
    for step in steps:  # what the judge saw: the page text of each capture
        step["visible_text"] = store.get_json(step["page"])["visible_text"] if step.get("page") else ""
    store.close()
    return steps


# ---- the upstream-style baseline ---------------------------------------------------------------


async def upstream_step(files: dict[str, str], base: Path, playwright, chromium: str) -> dict[str, float]:
    """One step the upstream way; seconds per phase."""
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        project = Path(tmp)
        for rel, text in files.items():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(text)
        started = time.monotonic()
        install = await asyncio.create_subprocess_exec(
            *NPM_INSTALL, cwd=project, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        if await install.wait() != 0:
            raise SystemExit("baseline npm install failed")
        times["install"] = time.monotonic() - started
        mark = time.monotonic()
        server = await asyncio.create_subprocess_exec(
            "npm",
            "run",
            "dev",
            "--",
            "--port",
            str(free_port()),
            "--host",
            "127.0.0.1",
            "--strictPort",
            cwd=project,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            url = await asyncio.wait_for(_printed_url(server), 30)
            times["start"] = time.monotonic() - mark
            await asyncio.sleep(UPSTREAM_WAIT_S)  # the baseline's fixed wait, on purpose
            mark = time.monotonic()
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1024, "height": 768})
            await page.goto(url, wait_until="load")
            text = await page.inner_text("body")
            await page.screenshot()
            await browser.close()
            times["screenshot"] = time.monotonic() - mark
            if heading_of(files) not in text:
                raise SystemExit(f"baseline captured the wrong page: {text[:200]!r}")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            await server.wait()
        times["total"] = time.monotonic() - started
    return times


async def _printed_url(server: asyncio.subprocess.Process) -> str:
    assert server.stdout is not None
    while line := await server.stdout.readline():
        match = _URL.search(re.sub(r"\x1b\[[0-9;]*m", "", line.decode(errors="replace")))
        if match:
            return match.group(0)
    raise SystemExit("the baseline dev server exited before printing its URL")


def heading_of(files: dict[str, str]) -> str:
    match = re.search(r"Todos, version \d+", files["src/App.jsx"])
    if match is None:
        raise SystemExit("the scripted app has no 'Todos, version N' heading")
    return match.group(0)


# ---- report ------------------------------------------------------------------------------------


def node_total(step: dict) -> float:
    return sum(step.get("timings", {}).values())


async def main() -> dict[str, float]:
    print_header("1. Step overhead on a React + Vite app (scripted model, zero delay)")
    with tempfile.TemporaryDirectory(prefix="webgen-bench-steps-") as scratch:
        base = Path(scratch)
        base_cache = await warm_base_cache(base)
        (base / "scenario.json").write_text(json.dumps(scenario()))
        runs: list[list[dict]] = []
        with ScriptedServer(Scenario.load(base / "scenario.json")) as server:
            for rep in range(REPEATS):
                with Stopwatch() as watch:
                    runs.append(await agent_run(base, server.base_url, rep, base_cache))
                print(f"  agent run {rep + 1}/{REPEATS}: {len(runs[-1])} steps in {watch.seconds:.1f} s", flush=True)

        baseline: dict[str, list[dict[str, float]]] = {"source": [], "dependency": []}
        chromium = find_chromium("")
        async with async_playwright() as playwright:
            for rep in range(REPEATS):
                for kind, step in (("source", SOURCE_STEPS[rep % len(SOURCE_STEPS)]), ("dependency", DEPENDENCY_STEP)):
                    baseline[kind].append(await upstream_step(step_files(step), base, playwright, chromium))
                print(
                    f"  baseline round {rep + 1}/{REPEATS}: source edit {baseline['source'][-1]['total']:.1f} s, "
                    f"dependency edit {baseline['dependency'][-1]['total']:.1f} s",
                    flush=True,
                )

    source = [s for run in runs for s in run if s["index"] in SOURCE_STEPS]
    dependency = [s for run in runs for s in run if s["index"] == DEPENDENCY_STEP]
    stale = [s["index"] for s in source + dependency if heading(s["index"]) not in s["visible_text"]]
    kept = sum(not s["execution"]["server_restarted"] and not s["execution"]["install_ran"] for s in source)
    installed = sum(s["execution"]["install_ran"] and not s["execution"]["install_cached"] for s in dependency)
    figures = {
        "source_executor_s": median(s["timings"]["executor"] for s in source),
        "source_step_s": median(node_total(s) for s in source),
        "source_fresh_s": median(s["execution"].get("fresh_s", 0.0) for s in source),
        "source_capture_s": median(s["execution"].get("capture_s", 0.0) for s in source),
        "dependency_executor_s": median(s["timings"]["executor"] for s in dependency),
        "dependency_install_s": median(s["execution"].get("install_s", 0.0) for s in dependency),
        "dependency_step_s": median(node_total(s) for s in dependency),
        "baseline_source_s": median(b["total"] for b in baseline["source"]),
        "baseline_dependency_s": median(b["total"] for b in baseline["dependency"]),
        "baseline_install_s": median(b["install"] for b in baseline["source"] + baseline["dependency"]),
        "baseline_start_s": median(b["start"] for b in baseline["source"] + baseline["dependency"]),
        "baseline_screenshot_s": median(b["screenshot"] for b in baseline["source"] + baseline["dependency"]),
    }
    figures["source_ratio"] = figures["source_executor_s"] / figures["baseline_source_s"]
    figures["dependency_ratio"] = figures["dependency_executor_s"] / figures["baseline_dependency_s"]

    print(
        f"  (a) source-only edit: executor {figures['source_executor_s']:.2f} s "
        f"(of which freshness check {figures['source_fresh_s']:.3f} s, capture {figures['source_capture_s']:.2f} s); "
        f"whole step, all nodes {figures['source_step_s']:.2f} s "
        f"[median of {len(source)} steps in {REPEATS} runs]"
    )
    print(
        f"      dev server kept and no install on {kept}/{len(source)} source-only steps; "
        f"captures showing the step's own heading: {len(source) + len(dependency) - len(stale)}/{len(source) + len(dependency)}"
        + (f" (STALE at steps {stale})" if stale else "")
    )
    print(
        f"  (b) dependency edit: executor {figures['dependency_executor_s']:.2f} s "
        f"(npm install {figures['dependency_install_s']:.2f} s, ran on {installed}/{len(dependency)}); "
        f"whole step {figures['dependency_step_s']:.2f} s [median of {len(dependency)} runs]"
    )
    print(
        f"  (c) upstream-style baseline: source edit {figures['baseline_source_s']:.2f} s, dependency edit "
        f"{figures['baseline_dependency_s']:.2f} s (npm install {figures['baseline_install_s']:.2f} s, "
        f"server up {figures['baseline_start_s']:.2f} s, fixed wait {UPSTREAM_WAIT_S:.0f} s, new browser + screenshot "
        f"{figures['baseline_screenshot_s']:.2f} s) [median of {REPEATS} each]"
    )
    print(
        f"  ratio (a)/(c): {figures['source_ratio']:.3f} (target <= 0.2); "
        f"dependency edit (b)/(c): {figures['dependency_ratio']:.3f}"
    )
    return figures


if __name__ == "__main__":
    run_main(main)
