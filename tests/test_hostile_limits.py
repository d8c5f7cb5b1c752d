"""Attacks on the sandbox's limits from generated code, each closed (beside test_hostile_sandbox.py).

- Memory by many processes: each under the per-process limit (RLIMIT_DATA), together over what the
  sandbox may take (3 x 1.5 GiB took 5 GB of host memory).
- Filling the workspace: the cap was checked only after a command (2.4 GB written past a 2 GB cap),
  and ``site/`` then copied what was written; a kept dev server could write until the next step.
- Kernel escape calls (ptrace, reading another process's memory, mount, unshare): denied by the
  sandbox's seccomp filter.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.limits import SandboxCgroup, cgroup_parent, disk_usage, limit_warnings
from webgen_agent.tools.process import run_command
from webgen_agent.tools.sandbox import Confinement, sandbox_problem, workspace_confinement
from webgen_agent.tools.site.deps import dependency_key, install_dependencies
from webgen_agent.tools.site.shell import run_shell

# Every test here runs bubblewrap (and most npm, a dev server or Chromium inside it).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

# The system's Python: always under /usr, which the sandbox shows (a user's pyenv shim is hidden).
PYTHON = "/usr/bin/python3"
no_memory_cgroup = pytest.mark.skipif(
    cgroup_parent("memory") is None, reason="no memory cgroup here (limit_warnings says so in the run)"
)


@no_memory_cgroup
async def test_three_processes_under_the_per_process_limit_cannot_together_pass_the_sandboxs_memory(tmp_path):
    # Each holds 150 MB (under its 256 MB RLIMIT_DATA); the three together (450 MB) are over 320 MB.
    hold = (
        f"{PYTHON} -c \"import time; b = b'x' * (150 << 20); print('held', flush=True); "
        "time.sleep(4); print('survived', flush=True)\""
    )
    settings = SandboxSettings(memory_mb=256, sandbox_memory_mb=320)
    result = await run_command(
        ["bash", "-c", f"for i in 1 2 3; do {hold} & done; wait"],
        cwd=tmp_path,
        timeout_s=60,
        sandbox=Confinement(workspace=tmp_path, settings=settings),
    )
    assert "Killed" in result.output_tail
    assert result.output_tail.splitlines().count("survived") < 3, result.output_tail


def test_a_sandbox_cgroup_carries_the_memory_and_cpu_caps():
    settings = SandboxSettings(sandbox_memory_mb=300, cpus=0.5)
    cgroup = SandboxCgroup.create(settings)
    if cgroup is None:
        assert limit_warnings(settings), "no cgroup at all, and the run would not say so"
        return
    wanted = ("memory.max", "memory.limit_in_bytes", "cpu.max", "cpu.cfs_quota_us", "pids.max")
    try:
        caps = {
            name: (path / name).read_text().strip()
            for path in cgroup.paths
            for name in wanted
            if (path / name).exists()
        }
    finally:
        cgroup.remove()
    if cgroup_parent("memory") is not None:
        assert str(300 * 2**20) in (caps.get("memory.max"), caps.get("memory.limit_in_bytes"))
    if cgroup_parent("cpu") is not None:
        assert caps.get("cpu.cfs_quota_us") == "50000" or caps.get("cpu.max") == "50000 100000"
    if cgroup_parent("pids") is not None:
        assert caps.get("pids.max") == str(settings.max_pids)
    assert all(not path.exists() for path in cgroup.paths)


def test_a_host_without_memory_or_cpu_cgroups_says_so_in_one_line(monkeypatch):
    import webgen_agent.tools.limits as limits

    monkeypatch.setattr(limits, "cgroup_parent", lambda controller: None)
    warnings = limit_warnings(SandboxSettings())
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "memory" in warnings[0] and "cpu" in warnings[0]
    assert limit_warnings(SandboxSettings(enabled=False)) == []


ESCAPE_CALLS = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local, remote = IoVec(ctypes.addressof(buf), 8), IoVec(ctypes.addressof(buf), 8)
calls = {
    "ptrace": lambda: libc.ptrace(0, 0, 0, 0),  # PTRACE_TRACEME: allowed to anyone without the filter
    "process_vm_readv": lambda: libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0),
    "unshare": lambda: libc.unshare(0x00020000),
    "mount": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
}
for name, call in calls.items():
    ctypes.set_errno(0)
    rc = call()
    print(name, "EPERM" if rc == -1 and ctypes.get_errno() == errno.EPERM else f"ALLOWED rc={rc} errno={ctypes.get_errno()}")
"""


async def test_kernel_escape_calls_fail_with_eperm_inside(tmp_path):
    result = await run_command(
        [PYTHON, "-c", ESCAPE_CALLS], cwd=tmp_path, timeout_s=60, sandbox=Confinement(workspace=tmp_path)
    )
    assert result.ok, result.output_tail
    for call in ("ptrace", "process_vm_readv", "unshare", "mount"):
        assert f"{call} EPERM" in result.output_tail, result.output_tail


FILL = "for i in $(seq 1 {count}); do head -c 8388608 /dev/zero > fill$i.bin; done; echo filled"


async def test_a_shell_action_filling_the_workspace_is_stopped_near_the_cap(tmp_path):
    # 2.4 GB in 8 MB files (each under the per-file limit) against a 64 MB cap.
    settings = SandboxSettings(workspace_mb=64)
    result = await run_shell(
        FILL.format(count=300), cwd=tmp_path, timeout_s=120, sandbox=Confinement(workspace=tmp_path, settings=settings)
    )
    assert result.over_size_cap and not result.ok, result
    assert "filled" not in result.output_tail and "over the 64 MB cap" in result.output_tail
    # The overshoot is what is written during about three walks of the folder (docs/security.md).
    assert disk_usage(tmp_path) < 512 * 2**20


async def test_an_install_filling_the_workspace_is_stopped_and_not_retried(tmp_path):
    (tmp_path / "package.json").write_text(
        json.dumps({"name": "filler", "version": "1.0.0", "scripts": {"preinstall": FILL.format(count=300)}})
    )
    logs: list[Path] = []

    def log_path() -> Path:
        logs.append(tmp_path.parent / f"{tmp_path.name}-install-{len(logs)}.log")
        return logs[-1]

    settings = SandboxSettings(workspace_mb=64)
    result = await install_dependencies(
        tmp_path,
        dependency_key(tmp_path),
        cache=None,
        timeout_s=120,
        registry=None,
        log_path=log_path,
        sandbox=workspace_confinement(tmp_path, settings, "install"),
    )
    assert result.error and "size cap" in result.error, result
    assert len(logs) == 1  # not retried with --force and --legacy-peer-deps
    assert disk_usage(tmp_path) < 512 * 2**20


async def test_a_workspace_filled_by_a_shell_action_never_reaches_the_store_or_site(tmp_path, chromium_path):
    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.graph.api import run_requirement

    # Each file is under the cap, the sum is over it: the shell action is let run, then the step's
    # workspace goes back to its file actions before anything is recorded.
    reply = (
        '<boltArtifact id="p" title="p"><boltAction type="file" filePath="index.html"><h1>Hi</h1></boltAction>'
        '<boltAction type="shell">for i in 1 2 3 4 5; do head -c 8000000 /dev/zero > big$i.bin; done</boltAction>'
        "</boltArtifact>"
    )
    scenario = Scenario.model_validate(
        {
            "name": "filler",
            "rules": [
                {"model": "scripted-coder", "turn": 0, "content": reply},
                {"model": "scripted-coder", "content": "finish"},
                {"model": "scripted-vlm", "json": {"description": "A heading.", "score": 2, "suggestions": []}},
            ],
        }
    )
    with ScriptedServer(scenario) as server:
        context = scripted_context(
            server.base_url, max_steps=2, allow_shell=True, sandbox=SandboxSettings(workspace_mb=32)
        )
        result = await run_requirement(
            "A page.", context=context, run_id="f", out_dir=tmp_path / "out", db_path=tmp_path / "webgen.db"
        )
    site = Path(result.out_dir) / "site"
    assert (site / "index.html").is_file()
    assert not list(site.glob("big*.bin"))
    assert disk_usage(site) < 2**20
    assert (tmp_path / "webgen.db").stat().st_size < 16 * 2**20  # the store never held the 40 MB


async def test_a_dev_server_filling_the_workspace_is_killed_while_it_runs(tmp_path):
    import httpx

    from tests.helpers import eventually
    from webgen_agent.tools.site import SiteRunner

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "package.json").write_text('{"name": "filler", "private": true, "scripts": {"dev": "node server.js"}}')
    # On request, writes 8 MB files until stopped (each under the per-file limit).
    (workspace / "server.js").write_text(
        "const fs = require('fs');"
        "require('http').createServer((q, s) => { s.end('<h1>ok</h1>'); if (q.url === '/fill') { let i = 0;"
        " setInterval(() => fs.writeFileSync('fill' + (i++) + '.bin', Buffer.alloc(8000000)), 20); } })"
        ".listen(Number(process.env.PORT), '127.0.0.1');"
    )
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", sandbox=SandboxSettings(workspace_mb=32))
    try:
        started = await runner.ensure_running()
        assert started.ok and started.url, started.error
        server = runner.server
        assert server is not None
        async with httpx.AsyncClient() as client:
            assert (await client.get(started.url.rstrip("/") + "/fill", timeout=60)).status_code == 200
        await eventually(lambda: not server.alive, timeout_s=60, what="the server killed at the cap")
        assert disk_usage(workspace) < 256 * 2**20
    finally:
        await runner.stop()


def test_without_libseccomp_the_sandbox_does_not_start_and_says_why(monkeypatch):
    import sys

    from webgen_agent.tools import sandbox, seccomp

    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # as if it could not be imported
    seccomp.seccomp_program.cache_clear()
    sandbox.sandbox_problem.cache_clear()
    try:
        problem = sandbox.sandbox_problem()
        assert problem is not None and "seccomp" in problem and "\n" not in problem
    finally:
        monkeypatch.undo()
        seccomp.seccomp_program.cache_clear()
        sandbox.sandbox_problem.cache_clear()
    assert sandbox.sandbox_problem() is None


# Holds 8 MB more (touched, so really resident): up to 1 GB before it listens, or every 20 ms once
# asked for /grow.
_GROWING_SERVER = (
    "const keep = []; const grow = () => setInterval(() => keep.push(Buffer.alloc(8 << 20, 1)), 20);"
    "if (process.env.GROW_AT_START) for (let i = 0; i < 128; i++) keep.push(Buffer.alloc(8 << 20, 1));"
    "require('http').createServer((q, s) => { s.end('<h1>ok</h1>'); if (q.url === '/grow') grow(); })"
    ".listen(Number(process.env.PORT), '127.0.0.1');"
)


def _growing_site(workspace: Path, *, at_start: bool) -> None:
    workspace.mkdir()
    dev = ("GROW_AT_START=1 " if at_start else "") + "node server.js"
    (workspace / "package.json").write_text(json.dumps({"name": "grower", "private": True, "scripts": {"dev": dev}}))
    (workspace / "server.js").write_text(_GROWING_SERVER)


# Each of the sandbox's two memory limits at 128 MB: the cgroup's (all processes together, the kernel
# kills) and RLIMIT_DATA (per process, an allocation fails).
_MEMORY_LIMITS = [
    pytest.param(
        SandboxSettings(sandbox_memory_mb=128), "all its processes together", id="cgroup", marks=no_memory_cgroup
    ),
    pytest.param(SandboxSettings(memory_mb=128), "per process", id="rlimit"),
]


def _names_the_memory_limit(text: str | None, which: str) -> None:
    assert text and "memory limit" in text and "128 MB" in text and which in text and "less memory" in text, text


@pytest.mark.parametrize(("settings", "which"), _MEMORY_LIMITS)
async def test_a_dev_server_killed_by_its_memory_limit_at_start_is_the_sites_error_naming_the_limit(
    tmp_path, settings, which
):
    from webgen_agent.tools.site import SiteRunner

    workspace = tmp_path / "ws"
    _growing_site(workspace, at_start=True)
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", sandbox=settings)
    try:
        result = await runner.ensure_running()
        assert not result.ok and result.stage == "start"
        _names_the_memory_limit(result.error, which)
    finally:
        await runner.stop()


@pytest.mark.parametrize(("settings", "which"), _MEMORY_LIMITS)
async def test_a_dev_server_killed_by_its_memory_limit_later_is_told_at_the_next_step(tmp_path, settings, which):
    import httpx

    from tests.helpers import eventually
    from webgen_agent.tools.site import SiteRunner

    workspace = tmp_path / "ws"
    _growing_site(workspace, at_start=False)
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", sandbox=settings)
    try:
        started = await runner.ensure_running()
        assert started.ok and started.url and runner.take_memory_note() is None, started.error
        server = runner.server
        assert server is not None
        async with httpx.AsyncClient() as client:  # as a capture or a GUI test would
            assert (await client.get(started.url.rstrip("/") + "/grow", timeout=60)).status_code == 200
        await eventually(lambda: not server.alive, timeout_s=60, what="the server killed at its memory limit")
        again = await runner.ensure_running()  # the next step: started again, and told why it had died
        assert again.ok and again.server_restarted, again.error
        _names_the_memory_limit(runner.take_memory_note(), which)
        await runner.ensure_running()
        assert runner.take_memory_note() is None  # told once
    finally:
        await runner.stop()
