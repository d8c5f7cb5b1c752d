"""Ship a run: a step's site as a zip of its sources, or built, checked in Chromium and packed.

The files come from the content-addressed store (the step's ``files`` manifest), never from a
workspace, so any step of any finished or stopped run can be shipped as it was. With a build, the
step is materialised into a temporary folder beside the database (so the dependency cache's
hardlinks work), its dependencies come from the same cache the executor uses, the ``build`` script
runs in its own process group with a timeout, and the static output is served and loaded in
Chromium: a page that throws or renders nothing is never packed.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.store import SKIPPED_FILES, BlobStore
from webgen_agent.core.context import AgentContext, SandboxSettings, find_chromium
from webgen_agent.core.state import Step
from webgen_agent.nodes.local_dirs import deps_cache_for, registry_for
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.capture import PageCapture
from webgen_agent.tools.process import ProcessRegistry, run_command, scrubbed_env
from webgen_agent.tools.replay.spec import (
    PLAYWRIGHT_CONFIG,
    STATIC_PLAYWRIGHT_CONFIG,
    STATIC_SERVER_JS,
    STATIC_SERVER_PATH,
    spec_js,
)
from webgen_agent.tools.replay.views import RecordedTest
from webgen_agent.tools.sandbox import require_sandbox
from webgen_agent.tools.site import SiteRunner, read_package_json
from webgen_agent.tools.site.logs import last_lines

# Never shipped: dependencies, version control, the agent's own marker files and logs.
_SKIPPED_DIRS = frozenset({"node_modules", ".git"})
_BUILD_SCRIPT = "build"
_DEFAULT_INSTALL_TIMEOUT_S = float(AgentContext.model_fields["install_timeout_s"].default)


class ShipError(ValueError):
    """Why a step cannot be shipped; the message is one line (a build failure adds its log tail)."""


class ShipResult(BaseModel):
    run_id: str
    step: int
    zip_path: str
    files: int = Field(description="Files in the zip.")
    bytes: int = Field(description="Size of the zip.")
    built: bool = False
    output_dir: str | None = Field(
        default=None, description="The static folder that was packed, relative to the project."
    )
    checked_url: str | None = Field(default=None, description="Where the packed index.html was loaded in Chromium.")
    page_title: str = ""
    build_seconds: float = 0.0
    tests: int = Field(default=0, description="Recorded GUI tests shipped as tests/e2e/*.spec.js (sources only).")


def shipped(rel_path: str) -> bool:
    """A project file that belongs in a shipped zip."""
    parts = rel_path.split("/")
    name = parts[-1]
    if any(part in _SKIPPED_DIRS for part in parts[:-1]):
        return False
    return not (name in SKIPPED_FILES or name.startswith(".webgen") or name.endswith(".log"))


def pick_step(state: dict[str, Any], run_id: str, index: int | None) -> Step:
    """The step to ship: ``index``, else the run's chosen step; ShipError when there is none or no files."""
    steps: list[Step] = state.get("steps", [])
    if not steps:
        raise ShipError(f"run {run_id} has no steps")
    if index is None:
        index = state.get("chosen_step")
        if index is None:
            raise ShipError(
                f"run {run_id} has no chosen step yet (status {state.get('status', 'running')}); pass --step N"
            )
    step = next((s for s in steps if s["index"] == index), None)
    if step is None:
        raise ShipError(f"run {run_id} has no step {index} (steps {steps[0]['index']}-{steps[-1]['index']})")
    if not step.get("files"):
        raise ShipError(f"step {index} of run {run_id} has no files")
    return step


def write_zip(out: Path, entries: Iterable[tuple[str, bytes]]) -> int:
    """Write ``entries`` (path, content) to ``out`` atomically, sorted; returns the number of files."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    count = 0
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for rel, data in sorted(entries):
                archive.writestr(rel, data)
                count += 1
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return count


def folder_entries(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Regular files under ``folder`` that belong in a zip (no symlinks, dependencies or markers)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_file() and not path.is_symlink() and shipped(rel):
                yield rel, path.read_bytes()


async def check_renders(
    folder: Path, *, browser: SharedBrowser, work_dir: Path, registry: ProcessRegistry | None = None
) -> PageCapture:
    """Serve ``folder`` from a local static server and load its index.html in Chromium.

    ShipError when there is no index.html, the server does not answer, or the page throws, shows
    an error overlay or renders nothing.
    """
    if not (folder / "index.html").is_file():
        raise ShipError(f"no index.html in {folder.name or folder}/ to serve")
    runner = SiteRunner(folder, registry=registry, log_dir=work_dir / "serve-logs")
    try:
        started = await runner.ensure_running()
        if not started.ok or started.url is None:
            raise ShipError(f"the static server did not serve {folder.name}/: {_one_line(started.error)}")
        capture = await browser.capture(started.url)
    finally:
        await runner.stop()
    if problem := capture.render_error:
        raise ShipError(f"the built page does not render cleanly: {_one_line(problem)}")
    return capture


def find_output(workspace: Path, since: float) -> Path:
    """The folder of the build's index.html: dist/, build/, out/, else the shallowest one written by the build."""
    for name in ("dist", "build", "out"):
        if (workspace / name / "index.html").is_file():
            return workspace / name
    written: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if d not in _SKIPPED_DIRS]
        folder = Path(dirpath)
        if folder != workspace and "index.html" in filenames and (folder / "index.html").stat().st_mtime >= since:
            written.append(folder)
    if not written:
        raise ShipError("the build wrote no index.html (looked in dist/, build/, out/ and every new folder)")
    return min(written, key=lambda p: (len(p.relative_to(workspace).parts), str(p)))


async def build_site(
    workspace: Path,
    *,
    deps_cache_dir: Path,
    registry: ProcessRegistry | None,
    work_dir: Path,
    timeout_s: float,
    sandbox: bool = True,
) -> tuple[Path, float]:
    """Install the dependencies (through the dependency cache) and run the ``build`` script.

    Returns the static output folder and the build's seconds; ShipError with the log tail on failure.
    """
    try:
        package = read_package_json(workspace)
    except ValueError as exc:
        raise ShipError(str(exc)) from None
    scripts = package.get("scripts") or {}
    if not isinstance(scripts, dict) or not str(scripts.get(_BUILD_SCRIPT) or "").strip():
        raise ShipError("package.json has no `build` script; ship without --build to pack the sources")
    if sandbox:
        require_sandbox()  # one line naming --no-sandbox, before anything runs
    runner = SiteRunner(
        workspace,
        registry=registry,
        install_timeout_s=max(timeout_s, _DEFAULT_INSTALL_TIMEOUT_S),
        log_dir=work_dir / "logs",
        deps_cache_dir=deps_cache_dir,
        sandbox=SandboxSettings(enabled=sandbox),
    )
    installed = await runner.ensure_dependencies()
    if installed.error:
        raise ShipError(f"installing the dependencies failed: {installed.error.strip()}")
    started = time.time()
    result = await run_command(
        ["npm", "run", _BUILD_SCRIPT],
        cwd=workspace,
        timeout_s=timeout_s,
        env=scrubbed_env({"NODE_ENV": "production"}),
        log_path=work_dir / "logs" / "build.log",
        registry=registry,
        tail_lines=30,
        sandbox=runner.confinement("server"),  # like a dev server: node_modules (the cache's) read-only
    )
    if not result.ok:
        why = f"did not finish within {timeout_s:g} s" if result.timed_out else f"failed (exit code {result.exit_code})"
        tail = last_lines(result.output_tail, 30).replace(f"{workspace}/", "")  # the folder is temporary
        raise ShipError(f"`npm run build` {why}; its log ends:\n{tail}")
    return find_output(workspace, started - 1.0), result.seconds


async def ship_run(
    run_id: str,
    *,
    out: Path,
    db_path: str | Path | Database,
    step: int | None = None,
    build: bool = False,
    chromium: str = "",
    timeout_s: float = 300.0,
    sandbox: bool = True,
    browser: SharedBrowser | None = None,
) -> ShipResult:
    """Pack a step of ``run_id`` into ``out`` (see the module docstring); ShipError says why not."""
    db_path = Database.of(db_path)
    await asyncio.to_thread(_check_paths, db_path, out)
    state = await final_state(db_path, run_id)
    if not state.get("steps") and await asyncio.to_thread(lambda: RunIndex(db_path).get(run_id)) is None:
        raise ShipError(f"no run {run_id} in {db_path}")
    chosen = pick_step(state, run_id, step)
    store = await asyncio.to_thread(BlobStore, db_path)
    try:
        if not build:
            tests = await asyncio.to_thread(recorded_run_tests, state, store)
            count, size = await asyncio.to_thread(_pack_sources, store, chosen["files"] or "", out, tests)
            return ShipResult(
                run_id=run_id, step=chosen["index"], zip_path=str(out), files=count, bytes=size, tests=len(tests)
            )
        await asyncio.to_thread(db_path.local_dir.mkdir, parents=True, exist_ok=True)
        scratch = await asyncio.to_thread(tempfile.TemporaryDirectory, prefix=".ship-", dir=db_path.local_dir)
        try:
            project = Path(scratch.name) / "project"
            await asyncio.to_thread(store.materialize, chosen["files"], project)
            return await _build_and_pack(
                run_id,
                chosen["index"],
                project,
                out,
                db_path=db_path,
                chromium=chromium,
                timeout_s=timeout_s,
                sandbox=sandbox,
                browser=browser,
            )
        finally:
            await asyncio.to_thread(scratch.cleanup)
    finally:
        store.close()


E2E_DIR = "tests/e2e"
README_LINE = (
    "End-to-end tests recorded from the GUI tests that passed while this site was built: "
    "`npm install -D @playwright/test && npx playwright test` ({serves}; or set BASE_URL "
    "to a running site, CHROMIUM_PATH to use an installed Chromium)."
)


def e2e_entries(tests: list[RecordedTest], project: dict[str, bytes]) -> list[tuple[str, bytes]]:
    """The recorded tests as files of the shipped project: one spec each, a Playwright config and a
    README line (the project's own config and README are kept: the line is appended). The config
    starts ``npm run dev``; a static site's (no package.json) serves the folder with node alone."""
    if not tests:
        return []
    entries = [(f"{E2E_DIR}/{test.name}.spec.js", spec_js(test).encode()) for test in tests]
    static = "package.json" not in project
    if not any(name.startswith("playwright.config.") for name in project):
        # .mjs for a static site: an ES module whatever package.json the tests later run under.
        config = (
            ("playwright.config.mjs", STATIC_PLAYWRIGHT_CONFIG)
            if static
            else ("playwright.config.js", PLAYWRIGHT_CONFIG)
        )
        entries.append((config[0], config[1].encode()))
    if static:
        entries.append((STATIC_SERVER_PATH, STATIC_SERVER_JS.encode()))
    serves = f"serves this folder with `node {STATIC_SERVER_PATH}`" if static else "starts `npm run dev`"
    readme = project.get("README.md", b"").decode("utf-8", "replace").rstrip()
    line = README_LINE.format(serves=serves)
    entries.append(("README.md", ((readme + "\n\n" if readme else "") + line + "\n").encode()))
    return entries


def recorded_run_tests(state: dict[str, Any], store: BlobStore) -> list[RecordedTest]:
    return [RecordedTest.model_validate(store.get_json(ref["hash"])) for ref in state.get("replay_tests") or []]


def _check_paths(db_path: Database, out: Path) -> None:
    if not db_path.exists():
        raise ShipError(f"no database at {db_path}")
    if out.is_dir():
        raise ShipError(f"{out} is a folder; --out names the zip file to write")


def _pack_sources(store: BlobStore, files: str, out: Path, tests: list[RecordedTest]) -> tuple[int, int]:
    """The step's files (as ``shipped`` keeps them) and the run's recorded tests zipped into ``out``:
    (files, zip bytes)."""
    manifest = {rel: blob for rel, blob in store.manifest(files).items() if shipped(rel)}
    blobs = store.get_many(manifest.values())
    project = {rel: blobs[blob] for rel, blob in manifest.items()}
    project.update(e2e_entries(tests, project))
    count = write_zip(out, project.items())
    return count, out.stat().st_size


def _pack_folder(output: Path, out: Path) -> tuple[int, int]:
    count = write_zip(out, folder_entries(output))
    return count, out.stat().st_size


async def _build_and_pack(
    run_id: str,
    index: int,
    project: Path,
    out: Path,
    *,
    db_path: Database,
    chromium: str,
    timeout_s: float,
    sandbox: bool,
    browser: SharedBrowser | None,
) -> ShipResult:
    registry = registry_for(db_path)
    work_dir = project.parent
    seconds = 0.0
    if await asyncio.to_thread((project / "package.json").is_file):
        output, seconds = await build_site(
            project,
            deps_cache_dir=deps_cache_for(db_path),
            registry=registry,
            work_dir=work_dir,
            timeout_s=timeout_s,
            sandbox=sandbox,
        )
    else:
        output = project  # a static site is its own output
    own = browser is None
    shared = browser or SharedBrowser(await asyncio.to_thread(find_chromium, chromium), registry=registry)
    try:
        capture = await check_renders(output, browser=shared, work_dir=work_dir, registry=registry)
    finally:
        if own:
            await shared.close()
    count, size = await asyncio.to_thread(_pack_folder, output, out)
    return ShipResult(
        run_id=run_id,
        step=index,
        zip_path=str(out),
        files=count,
        bytes=size,
        built=output != project,
        output_dir=output.relative_to(project).as_posix() if output != project else ".",
        checked_url=capture.url,
        page_title=capture.title,
        build_seconds=seconds,
    )


def _one_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " / ".join(lines[:4])[:600] or "no details"
