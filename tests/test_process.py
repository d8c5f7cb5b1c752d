"""Process groups, timeouts, cancellation, scrubbed environment and orphan reaping, with real processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import eventually
from webgen_agent.tools.process import (
    ManagedProcess,
    ProcessRegistry,
    is_sensitive,
    read_tail,
    run_command,
    scrubbed_env,
)

# A child that starts a grandchild (same process group), records both pids, then sleeps.
SPAWNER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {grandchild.pid}")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    print("spawned", flush=True)
    time.sleep(120)
    """
)


def dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def wait_for_file(path: Path, timeout_s: float = 10.0) -> str:
    return await eventually(lambda: path.exists() and path.read_text(), timeout_s=timeout_s, what=f"{path} appearing")


async def wait_dead(pids: list[int], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(dead(p) for p in pids):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (a process group run to its timeout)
async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    started = time.monotonic()
    result = await run_command([sys.executable, "-c", SPAWNER, str(pids_file)], cwd=tmp_path, timeout_s=1.5)
    assert time.monotonic() - started < 15  # generous: a loaded 2-core machine
    assert result.timed_out and result.exit_code is None and not result.ok
    assert "spawned" in result.output_tail
    child, grandchild = map(int, pids_file.read_text().split())
    assert await wait_dead([child, grandchild])


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    registry = ProcessRegistry(tmp_path / "registry.jsonl")
    task = asyncio.create_task(
        run_command([sys.executable, "-c", SPAWNER, str(pids_file)], cwd=tmp_path, timeout_s=60, registry=registry)
    )
    child, grandchild = map(int, (await wait_for_file(pids_file)).split())
    assert registry.entries(), "a running command is recorded"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_dead([child, grandchild], timeout_s=3)
    assert registry.entries() == []


async def test_run_command_result_and_leftovers_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    result = await run_command(
        ["bash", "-c", f"sleep 60 & echo $! > {pid_file}; echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout_s=10
    )
    assert result.exit_code == 3 and not result.timed_out
    assert "out" in result.output_tail and "err" in result.output_tail
    assert await wait_dead([int(pid_file.read_text())]), "a backgrounded process outlives its command"


async def test_scrubbed_env_hides_secrets_from_a_real_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("WEBGEN_CODER_API_KEY", "sk-coder-secret")
    monkeypatch.setenv("FOO_TOKEN", "tok-secret")
    monkeypatch.setenv("LANGSMITH_PROJECT", "agent-setting")
    monkeypatch.setenv("my_password", "lower-case-secret")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    log = tmp_path / "env.log"
    result = await run_command(["env"], cwd=tmp_path, timeout_s=10, env=scrubbed_env({"EXTRA": "1"}), log_path=log)
    assert result.ok
    seen = dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line)
    for name in ("OPENAI_API_KEY", "WEBGEN_CODER_API_KEY", "FOO_TOKEN", "LANGSMITH_PROJECT", "my_password"):
        assert name not in seen
    for value in ("sk-parent-secret", "sk-coder-secret", "tok-secret", "lower-case-secret"):
        assert value not in log.read_text()
    assert seen["PLAIN_SETTING"] == "visible" and seen["EXTRA"] == "1"
    assert seen["PATH"] == os.environ["PATH"] and seen["HOME"] == os.environ["HOME"]
    assert seen["BROWSER"] == "none" and seen["CI"] == "1" and seen["NO_COLOR"] == "1" and seen["FORCE_COLOR"] == "0"


def test_sensitive_names() -> None:
    for name in (
        "GITHUB_TOKEN",
        "npm_config__authToken",
        "DB_PASSWORD",
        "AWS_REGION",
        "HF_HOME",
        "BASH_ENV",
        "XAUTHORITY",
    ):
        assert is_sensitive(name), name
    for name in ("PATH", "HOME", "LANG", "npm_config_cache", "NODE_OPTIONS", "TERM"):
        assert not is_sensitive(name), name


async def test_managed_process_lifecycle(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "registry.jsonl")
    log = tmp_path / "server.log"
    proc = ManagedProcess.start(
        ["bash", "-c", "for i in $(seq 1 100); do echo line $i; done; exec sleep 60"],
        cwd=tmp_path,
        log_path=log,
        registry=registry,
    )
    assert proc.alive and proc.returncode is None and os.getpgid(proc.pid) == proc.pid
    assert [e.pgid for e in registry.entries()] == [proc.pgid]
    await eventually(lambda: "line 100" in proc.log_tail(), timeout_s=5, what="line 100 in the log")
    assert proc.log_tail(lines=2).splitlines() == ["line 99", "line 100"]
    await proc.stop(grace_s=1)
    assert not proc.alive and proc.returncode == -signal.SIGTERM
    await proc.stop()  # twice is fine
    assert registry.entries() == []


async def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    proc = ManagedProcess.start(
        ["bash", "-c", "trap '' TERM; echo ready; while true; do sleep 0.1; done"],
        cwd=tmp_path,
        log_path=tmp_path / "log",
    )
    await eventually(lambda: "ready" in read_tail(proc.log_path), timeout_s=10, what="the command saying ready")
    started = time.monotonic()
    await proc.stop(grace_s=0.5)
    assert not proc.alive and proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10  # generous: a loaded 2-core machine


def _start_orphan_maker(tmp_path: Path, registry_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """An 'agent' in a separate Python that records a group in the registry and then waits to be killed."""
    pids_file = tmp_path / "orphan.pids"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from webgen_agent.tools.process import ManagedProcess, ProcessRegistry
        registry = ProcessRegistry({str(registry_path)!r})
        proc = ManagedProcess.start([sys.executable, "-c", {SPAWNER!r}, {str(pids_file)!r}],
                                    cwd=Path({str(tmp_path)!r}), log_path=Path({str(tmp_path / "orphan.log")!r}),
                                    registry=registry)
        print(proc.pid, flush=True)
        time.sleep(120)
        """
    )
    agent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    agent.stdout.readline()
    deadline = time.monotonic() + 10
    while not pids_file.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return agent, [int(p) for p in pids_file.read_text().split()]


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (an agent process killed hard and its orphans reaped)
async def test_reap_kills_orphans_of_a_hard_killed_agent(tmp_path: Path) -> None:
    registry_path = tmp_path / "registry.jsonl"
    agent, pids = _start_orphan_maker(tmp_path, registry_path)
    registry = ProcessRegistry(registry_path)
    # While the agent lives, its groups are not ours to reap.
    assert registry.reap() == []
    assert not any(dead(p) for p in pids)

    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert not any(dead(p) for p in pids), "the orphans survive their agent"

    killed = registry.reap()
    assert killed == [pids[0]]
    assert await wait_dead(pids)
    assert registry.entries() == [] and registry_path.read_text() == ""


def test_reap_skips_recycled_pids(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "registry.jsonl")
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        registry.path.write_text(
            # A record whose leader pid now belongs to a different (newer) process, and a dead owner.
            json.dumps(
                {
                    "pgid": bystander.pid,
                    "pid": bystander.pid,
                    "create_time": 1.0,
                    "argv": ["old"],
                    "owner_pid": 999999999,
                    "owner_create_time": 1.0,
                }
            )
            + "\n"
        )
        assert registry.reap() == []
        assert bystander.poll() is None
        assert registry.entries() == []
    finally:
        bystander.kill()
        bystander.wait()


async def test_kill_all_kills_this_process_groups(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "registry.jsonl")
    procs = [
        ManagedProcess.start(["sleep", "60"], cwd=tmp_path, log_path=tmp_path / f"{i}.log", registry=registry)
        for i in range(2)
    ]
    assert sorted(registry.kill_all()) == sorted(p.pgid for p in procs)
    for proc in procs:
        assert await proc.wait(5) == -signal.SIGKILL
    assert registry.entries() == []


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (an agent process killed and reaped)
def test_an_agent_killed_before_it_recorded_a_group_leaves_nothing_running(tmp_path: Path) -> None:
    """The command must not run until the registry holds its group: were the agent killed in between,
    neither its watchdog nor a later reap would know of it. The registry's lock is held here so that
    the agent is killed with its child forked and the record not yet written."""
    import fcntl

    registry_path = tmp_path / "registry.jsonl"
    ran = tmp_path / "ran.pid"
    command = f"import os, time; open({str(ran)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from webgen_agent.tools.process import ManagedProcess, ProcessRegistry
        ManagedProcess.start([sys.executable, "-c", {command!r}], cwd=Path({str(tmp_path)!r}),
                             log_path=Path({str(tmp_path / "cmd.log")!r}), registry=ProcessRegistry({str(registry_path)!r}))
        """
    )
    with open(ProcessRegistry(registry_path).lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the agent's registry.add waits for it
        agent = subprocess.Popen([sys.executable, "-c", script])
        deadline = time.monotonic() + 30
        while not psutil.Process(agent.pid).children():  # forked, waiting on the lock
            assert agent.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        child = psutil.Process(agent.pid).children()[0]
        time.sleep(0.5)  # ample time for a command already running to write its pid
        agent.kill()
        agent.wait()
    try:
        assert not ran.exists(), "the command ran before its group was recorded"
        child.wait(timeout=10)  # the gate saw its agent gone and exited without starting anything
    finally:
        if ran.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(ran.read_text()), signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            child.kill()
    assert ProcessRegistry(registry_path).entries() == []


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (two agent processes writing the registry for seconds)
def test_the_registry_file_always_holds_every_live_entry_while_another_agent_writes(tmp_path: Path) -> None:
    """What a reader sees without the lock is what an agent killed at that moment would leave behind:
    an agent killed while rewriting the file must not wipe the entries of the others."""
    path = tmp_path / "registry.jsonl"
    ProcessRegistry(path).add(os.getpid(), ["kept"])
    churn = f"""
from webgen_agent.tools.registry import ProcessRegistry
registry = ProcessRegistry({str(path)!r})
for pid in range(1000, 1300):
    registry.add(pid, ["churn"])
    registry.remove(pid)
"""
    writer = subprocess.Popen([sys.executable, "-c", churn])
    reads, missing = 0, 0
    while writer.poll() is None:
        reads += 1
        missing += '"kept"' not in path.read_text()
    assert writer.returncode == 0
    assert reads and missing == 0, f"{missing} of {reads} reads found the registry without the kept entry"
    assert [e.argv for e in ProcessRegistry(path).entries()] == [["kept"]]


def test_the_size_cap_holds_while_another_process_frees_more_than_the_command_writes(tmp_path: Path) -> None:
    """The guard notices growth by asking the filesystem; another run's clean-up freeing space at the
    same moment hid the command's writes from it (seen in a full suite run: the command was never
    stopped). The folders are also walked on a slower clock, so the cap still holds."""
    from webgen_agent.tools.limits import WorkspaceGuard

    workspace = tmp_path / "ws"
    workspace.mkdir()
    other = tmp_path / "another-runs-tree.bin"  # on the same filesystem, freed as the command writes
    other.write_bytes(bytes(256 * 2**20))  # more than other writers on the machine add in the wait below
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    guard = WorkspaceGuard((workspace,), 16 * 2**20, sleeper.pid).start()
    try:
        other.unlink()
        (workspace / "fill.bin").write_bytes(bytes(18 * 2**20))
        assert sleeper.wait(timeout=10) == -signal.SIGKILL  # the slower clock walks every second
        assert "reached 18 MB" in guard.message(), guard.message()
    finally:
        guard.stop()
        with contextlib.suppress(ProcessLookupError):
            sleeper.kill()


@contextlib.contextmanager
def _guarded_command(confinement: Any) -> Iterator[tuple[Any, subprocess.Popen[bytes]]]:
    """A command (a sleeper in its own process group) under ``size_guard``; both ended on leaving."""
    from webgen_agent.tools.process import size_guard

    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    guard = size_guard(confinement, sleeper.pid)
    assert guard is not None
    try:
        yield guard, sleeper
    finally:
        guard.stop()
        with contextlib.suppress(ProcessLookupError):
            sleeper.kill()


def _server_workspace(tmp_path: Path, node_modules_mb: int) -> tuple[Path, Any]:
    """A workspace whose node_modules holds ``node_modules_mb`` and is confined as a dev server's."""
    from webgen_agent.core.context import SandboxSettings
    from webgen_agent.tools.sandbox import Confinement

    workspace = tmp_path / "ws"
    (workspace / "node_modules" / "react").mkdir(parents=True)
    (workspace / "node_modules" / "react" / "index.js").write_bytes(bytes(node_modules_mb * 2**20))
    (workspace / "node_modules" / ".vite").mkdir()
    confinement = Confinement(
        workspace,
        settings=SandboxSettings(workspace_mb=16),
        read_only=(workspace / "node_modules",),
        writable=(workspace / "node_modules" / ".vite",),
    )
    return workspace, confinement


@pytest.mark.parametrize("written_to", [".", "node_modules/.vite"])
def test_a_dev_servers_guard_counts_its_read_only_node_modules_with_what_it_writes(
    tmp_path: Path, written_to: str
) -> None:
    """A dev server's node_modules is read-only to it, so its guard walks that tree only on its
    slowest clock; the tree still counts, and so does what the server writes beside it or into its
    build cache inside node_modules."""
    workspace, confinement = _server_workspace(tmp_path, node_modules_mb=10)
    with _guarded_command(confinement) as (guard, sleeper):
        time.sleep(1.5)  # past the first walk: later ones count node_modules as that walk found it
        (workspace / written_to / "fill.bin").write_bytes(bytes(8 * 2**20))
        assert sleeper.wait(timeout=30) == -signal.SIGKILL  # 10 + 8 MB: past the 16 MB cap
        assert "reached 18 MB" in guard.message(), guard.message()


def test_node_modules_grown_under_a_running_dev_server_still_counts_while_space_is_freed_elsewhere(
    tmp_path: Path,
) -> None:
    """Another command (a shell action) may grow node_modules while a dev server runs; the growth
    check sees it, and when another run's clean-up hides that growth, the slowest clock's full walk does."""
    workspace, confinement = _server_workspace(tmp_path, node_modules_mb=4)
    other = tmp_path / "another-runs-tree.bin"
    other.write_bytes(bytes(256 * 2**20))
    with _guarded_command(confinement) as (guard, sleeper):
        time.sleep(1.5)
        other.unlink()
        (workspace / "node_modules" / "react" / "big.js").write_bytes(bytes(14 * 2**20))
        assert sleeper.wait(timeout=40) == -signal.SIGKILL  # within the slowest clock (10 s)
        assert "reached 18 MB" in guard.message(), guard.message()


def test_a_dev_servers_guard_does_not_walk_its_read_only_node_modules_every_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk of node_modules (thousands of files) was most of the agent's own CPU in a demo run:
    a dev server's guard walked it every second though the server cannot write it."""
    from webgen_agent.tools import limits

    workspace, confinement = _server_workspace(tmp_path, node_modules_mb=1)
    node_modules = workspace / "node_modules"
    walked: list[Path] = []  # each walk's root
    entered: list[Path] = []  # the walks that went through node_modules
    real = limits.disk_usage

    def counted(root: Path, **kwargs: Any) -> int:
        walked.append(root)
        if root == node_modules or (root == workspace and node_modules not in kwargs.get("skip", ())):
            entered.append(root)
        return real(root, **kwargs)

    monkeypatch.setattr(limits, "disk_usage", counted)
    with _guarded_command(confinement):
        time.sleep(3.5)  # the first walk, then one a second of what the server can write
    assert walked.count(workspace) >= 2, walked
    assert len(entered) == 1, entered  # the first walk only


def test_the_size_cap_counts_what_a_command_writes_not_the_seeded_npm_cache(tmp_path: Path) -> None:
    """A private npm cache starts as a copy of the shared one: that copy is not the command's doing.
    The guard trips on the command's own writes past the workspace cap, and tells the model that
    cap and the size the command wrote (it used to name the cap plus the copy, a number that changed
    with whatever the shared cache held: the hostile corpus's "over the 32 MB cap" failed by test order)."""
    from webgen_agent.core.context import SandboxSettings
    from webgen_agent.tools.sandbox import Confinement

    workspace, cache = tmp_path / "ws", tmp_path / "npm-cache"
    workspace.mkdir()
    cache.mkdir()
    (cache / "seed.bin").write_bytes(bytes(20 * 2**20))  # what the shared cache held
    confinement = Confinement(
        workspace, settings=SandboxSettings(workspace_mb=16), npm_cache=cache, npm_cache_seed_bytes=20 * 2**20
    )
    with _guarded_command(confinement) as (guard, sleeper):
        (workspace / "fill.bin").write_bytes(bytes(18 * 2**20))  # the command's writes: 18 MB
        assert sleeper.wait(timeout=30) == -signal.SIGKILL  # past the 16 MB cap: killed
        assert "reached 18 MB" in guard.message() and "over the 16 MB cap" in guard.message(), guard.message()


def test_a_trees_size_counts_each_file_once_follows_no_link_and_is_never_under_the_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size a step's cap check reads (``tree_usage``, by du): a hardlinked file once, a link
    to a large file outside not followed, a folder whose name has a newline read right; and the
    walk's figure where du cannot run."""
    from webgen_agent.tools.limits import disk_usage, tree_usage

    outside = tmp_path / "outside.bin"
    outside.write_bytes(os.urandom(8 * 2**20))
    root = tmp_path / "project\nname"
    (root / "src").mkdir(parents=True)
    (root / "src" / "data.bin").write_bytes(os.urandom(2 * 2**20))
    os.link(root / "src" / "data.bin", root / "src" / "same-data.bin")
    (root / "big").symlink_to(outside)
    measured = tree_usage(root)
    assert 2 * 2**20 <= measured < 3 * 2**20, measured
    assert measured >= disk_usage(root)
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools-here"))
    assert tree_usage(root) == disk_usage(root)
