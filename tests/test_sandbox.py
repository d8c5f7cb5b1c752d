"""The sandbox for generated code, with real bwrap: what a confined command can and cannot do, its limits,
the dependency cache it cannot write, and the one-line error and warning around it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from tests.helpers import eventually, pids_limit_enforced
from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.process import ManagedProcess, ProcessRegistry, run_command
from webgen_agent.tools.sandbox import (
    Confinement,
    SandboxUnavailable,
    require_sandbox,
    sandbox_problem,
)
from webgen_agent.tools.site import SiteRunner

# Every test here runs bubblewrap (and most npm, a dev server or Chromium inside it).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]


@pytest.fixture
def planted_secret():
    """A secret file in the real home folder, removed afterwards."""
    path = Path.home() / f".webgen-planted-secret-{uuid.uuid4().hex[:8]}"
    path.write_text("PLANTED-SECRET-VALUE")
    yield path
    path.unlink(missing_ok=True)


async def confined(workspace: Path, script: str, *, timeout_s: float = 30.0, **limits: int):
    sandbox = Confinement(workspace=workspace, settings=SandboxSettings(**limits))
    return await run_command(["bash", "-c", script], cwd=workspace, timeout_s=timeout_s, sandbox=sandbox, tail_lines=80)


async def test_a_confined_command_writes_only_its_workspace_and_reads_no_home_secret(tmp_path, planted_secret):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = Path("/var/tmp") / f"webgen-escape-{uuid.uuid4().hex[:8]}"
    script = f"""
        cat {planted_secret} || echo "secret: unreadable"
        echo x > {tmp_path}/beside-the-workspace.txt && echo "beside: private"
        echo x > {outside} && echo "var-tmp: private"
        echo x > /etc/webgen-escape || echo "etc: refused"
        echo x > ~/in-home.txt && echo "home: private"
        echo ok > inside.txt
        echo "env: $(env | grep -c -i -E 'openai|secret|token')"
    """
    os.environ["WEBGEN_TEST_SECRET_TOKEN"] = "do-not-leak"
    try:
        result = await confined(workspace, script)
    finally:
        del os.environ["WEBGEN_TEST_SECRET_TOKEN"]
    out = result.output_tail
    assert result.ok, out
    assert "PLANTED-SECRET-VALUE" not in out and "secret: unreadable" in out
    assert "beside: private" in out and "var-tmp: private" in out and "etc: refused" in out
    assert "home: private" in out and "env: 0" in out
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert not (tmp_path / "beside-the-workspace.txt").exists() and not outside.exists()
    assert not (Path.home() / "in-home.txt").exists()


async def test_everything_a_command_started_dies_with_it(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # A daemonised grandchild (own session, parent gone) would outlive a plain process group.
    result = await confined(workspace, "setsid sleep 300 & disown; echo started")
    assert result.ok and "started" in result.output_tail
    await asyncio.sleep(0.5)
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "300"]]


@pytest.mark.skipif(not pids_limit_enforced(), reason="root without a writable pids cgroup: no process cap here")
async def test_a_fork_bomb_is_held_at_the_process_cap(tmp_path):
    import asyncio

    from webgen_agent.tools.process import ManagedProcess

    workspace = tmp_path / "ws"
    workspace.mkdir()
    started = time.monotonic()
    sandbox = Confinement(workspace=workspace, settings=SandboxSettings(max_pids=64))
    bomb = ManagedProcess.start(
        ["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived"],
        cwd=workspace,
        log_path=tmp_path / "bomb.log",
        sandbox=sandbox,
    )
    peak = 0
    try:
        while bomb.alive and time.monotonic() - started < 20:
            try:
                peak = max(peak, len(psutil.Process(bomb.pid).children(recursive=True)))
            except psutil.Error:
                pass
            await asyncio.sleep(0.05)
    finally:
        await bomb.stop()
    assert 8 < peak <= 64 + 2  # it did fork; the cap held (plus bwrap's own two processes)
    assert time.monotonic() - started < 20  # it ended by itself: the bomb did not hold it


async def test_cpu_memory_and_file_size_limits_stop_a_runaway_process(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cpu = await confined(workspace, "node -e 'for(;;){}'", cpu_s=1, timeout_s=30)
    assert not cpu.timed_out and cpu.exit_code != 0
    memory = await confined(
        workspace, "node -e 'const a=[]; for(;;) a.push(new Array(1e6).fill(1))'", memory_mb=256, timeout_s=60
    )
    assert not memory.timed_out and memory.exit_code != 0
    big = await confined(workspace, "head -c 20000000 /dev/zero > big.bin", file_size_mb=1)
    assert big.exit_code != 0 and (workspace / "big.bin").stat().st_size <= 1024 * 1024


async def test_a_dev_server_cannot_write_into_the_shared_dependency_cache(tmp_path, vite_template):
    workspace = vite_template.make_workspace(tmp_path / "ws")
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", deps_cache_dir=vite_template.deps_cache_dir)
    installed = await runner.ensure_dependencies()
    assert installed.cached  # node_modules is the cache's tree, by hardlinks
    package = (workspace / "package.json").read_text()
    # The dev script (not part of what decides node_modules: no reinstall) first tries to rewrite a
    # cached file (a hardlink shared with every other run).
    (workspace / "package.json").write_text(
        package.replace('"dev": "vite"', '"dev": "echo pwned >> node_modules/react/index.js; vite"')
    )
    try:
        result = await runner.ensure_running()
        assert result.ok, result.error
        assert not result.install_ran
        log = runner.server.log_tail(80) if runner.server else ""
        assert "Read-only file system" in log
    finally:
        await runner.stop()
    cached = next(vite_template.deps_cache_dir.glob("*/node_modules/react/index.js"))
    assert b"pwned" not in cached.read_bytes()
    assert b"pwned" not in (workspace / "node_modules" / "react" / "index.js").read_bytes()
    assert (workspace / "node_modules" / ".vite").is_dir()  # vite's own cache stayed writable


async def test_a_shell_action_gets_a_private_copy_of_node_modules(tmp_path, vite_template):
    workspace = vite_template.make_workspace(tmp_path / "ws")
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", deps_cache_dir=vite_template.deps_cache_dir)
    installed = await runner.ensure_dependencies()
    assert installed.cached
    result = await runner.shell("echo mine >> node_modules/react/index.js", timeout_s=60)
    assert result.ok, result.output_tail
    assert (workspace / "node_modules" / "react" / "index.js").read_text().endswith("mine\n")
    cached = next(vite_template.deps_cache_dir.glob("*/node_modules/react/index.js"))
    assert b"mine" not in cached.read_bytes()


def test_without_bwrap_the_error_is_one_line_naming_no_sandbox(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable) as raised:
            require_sandbox()
    finally:
        monkeypatch.undo()
        sandbox_problem.cache_clear()
    message = str(raised.value)
    assert "\n" not in message and "--no-sandbox" in message and "bubblewrap" in message


def test_the_cli_stops_with_that_line_before_the_run_starts(tmp_path):
    env = {**os.environ, "PATH": "/nonexistent", "WEBGEN_DB": str(tmp_path / "webgen.db")}
    done = subprocess.run(
        [sys.executable, "-m", "webgen_agent", "run", "A page.", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--no-sandbox" in done.stderr and "bwrap" in done.stderr
    assert not (tmp_path / "webgen.db").exists()


def test_node_and_npm_are_found_inside(tmp_path):
    """The tools the sandbox needs stay visible even when they live in a hidden folder."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = Confinement(workspace=workspace).command(["npm", "--version"], dict(os.environ))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip()[0].isdigit(), done.stderr
    assert shutil.which("bwrap")


async def test_no_sandbox_runs_unconfined_with_a_warning_in_run_json_and_the_progress_view(tmp_path, chromium_path):
    import json

    from rich.console import Console

    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.apps.progress import ProgressView
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.graph.api import run_requirement

    page = '<boltArtifact id="p" title="p"><boltAction type="file" filePath="index.html"><h1>Hi</h1></boltAction></boltArtifact>'
    scenario = Scenario.model_validate(
        {
            "name": "unconfined",
            "rules": [
                {"model": "scripted-coder", "turn": 0, "content": page},
                {"model": "scripted-coder", "content": "finish"},
                {"model": "scripted-vlm", "json": {"description": "A heading.", "score": 2, "suggestions": []}},
            ],
        }
    )
    console = Console(record=True, width=200)
    with ScriptedServer(scenario) as server:
        context = scripted_context(server.base_url, max_steps=2, sandbox=SandboxSettings(enabled=False))
        with ProgressView(console, "unconfined") as view:
            result = await run_requirement(
                "A page.",
                context=context,
                run_id="u",
                out_dir=tmp_path / "out",
                db_path=tmp_path / "webgen.db",
                on_progress=view.on_event,
            )
    summary = json.loads((Path(result.out_dir) / "run.json").read_text())
    assert any("--no-sandbox" in w and "unconfined" in w for w in summary["warnings"])
    assert "warning: The sandbox is off" in console.export_text()


async def test_a_kept_dev_server_that_fills_the_workspace_is_stopped_at_the_next_step(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "package.json").write_text('{"name": "filler", "private": true, "scripts": {"dev": "node server.js"}}')
    # Writes 40 MB into the project (each file under the per-file limit) when asked to, after it started.
    (workspace / "server.js").write_text(
        "const fs = require('fs');"
        "require('http').createServer((q, s) => { if (q.url === '/fill') { for (let i = 0; i < 4; i++)"
        " fs.writeFileSync('fill' + i + '.bin', Buffer.alloc(10000000)); } s.end('<h1>ok</h1>'); })"
        ".listen(Number(process.env.PORT), '127.0.0.1');"
    )
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", sandbox=SandboxSettings(workspace_mb=32))
    try:
        first = await runner.ensure_running()
        assert first.ok and first.url, first.error
        server = runner.server
        async with httpx.AsyncClient() as client:
            # The workspace guard may kill the server before it answers (tests/test_hostile_limits.py).
            with contextlib.suppress(httpx.HTTPError):
                await client.get(first.url.rstrip("/") + "/fill", timeout=60)
        assert server is not None
        second = await runner.ensure_running(set())  # the next step, nothing edited: the server is kept
        assert not second.ok and second.stage == "start" and "over the 32 MB cap" in (second.error or ""), second
        assert runner.server is None and not server.alive
    finally:
        await runner.stop()


async def test_every_process_of_a_sandbox_is_in_the_group_the_registry_records(tmp_path):
    """The watchdog and reaps kill recorded groups; bwrap arms the sandbox's parent-death signal only
    after its set-up, so a sandbox in a session of its own would outlive an agent killed during it."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = f"webgen-group-{uuid.uuid4().hex[:8]}"
    registry = ProcessRegistry(tmp_path / "registry.jsonl")
    proc = ManagedProcess.start(
        ["bash", "-c", f"exec -a {marker} sleep 300"],
        cwd=workspace,
        log_path=tmp_path / "cmd.log",
        registry=registry,
        sandbox=Confinement(workspace=workspace, settings=SandboxSettings()),
    )
    try:

        def sandbox_tree() -> list[psutil.Process]:
            tree = psutil.Process(proc.pid).children(recursive=True)
            # bwrap's inner process carries the command line too until it forks the command: wait for both.
            return tree if len(tree) >= 2 and any(marker in " ".join(p.cmdline()) for p in tree) else []

        tree = await eventually(sandbox_tree, timeout_s=20, what="the sandboxed command starting")
        assert len(tree) >= 2  # bwrap's process inside the namespaces, the command
        assert {os.getpgid(p.pid) for p in tree} == {proc.pgid}
        assert registry.kill_all() == [proc.pgid]  # what the watchdog does for a dead agent
        gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive
    finally:
        proc.kill_now()
