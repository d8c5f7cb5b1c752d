"""Limits for a whole sandbox (all its processes together): a cgroup, and the workspace size guard.

``SandboxCgroup`` puts one sandboxed command, and so everything it starts, in a cgroup of its own
with a process cap (``pids``), a memory cap (``memory``) and a CPU quota (``cpu``). cgroup v2 holds
the three in one folder; cgroup v1 has one hierarchy per controller, so the command joins one folder
in each. Each controller is used where the host lets this user make cgroups under it; what is
missing is said once per run (``limit_warnings``) and the per-process rlimits still hold.

``WorkspaceGuard`` polls the workspace's size while a sandboxed command runs and kills the
command's process group once it is over the cap. Hand-written: no disk quota works for an
arbitrary folder without root and a filesystem set up for it (project quotas).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from webgen_agent.core.context import SandboxSettings

Controller = Literal["pids", "memory", "cpu"]
CONTROLLERS: tuple[Controller, ...] = ("pids", "memory", "cpu")
_CGROUP_PARENT = "webgen-sandbox"
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_CPU_PERIOD_US = 100_000
# A file each controller's cgroup has, to tell that the controller really is there.
_PROBE_FILE: dict[Controller, dict[bool, str]] = {
    "pids": {True: "pids.max", False: "pids.max"},
    "memory": {True: "memory.max", False: "memory.limit_in_bytes"},
    "cpu": {True: "cpu.max", False: "cpu.cfs_quota_us"},
}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass(frozen=True)
class CgroupParent:
    """The folder under which this agent makes its sandboxes' cgroups for one controller."""

    path: Path
    v2: bool


def _sweep(parent: Path) -> None:
    """Remove cgroups left by agent processes that are gone (rmdir fails on one still in use)."""
    for child in parent.iterdir():
        owner = child.name.split("-", 1)[0]
        if child.is_dir() and owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()


def _usable_parent(base: Path, controller: Controller, v2: bool) -> CgroupParent | None:
    """``base/webgen-sandbox`` when a child cgroup with ``controller`` can be made there."""
    parent = base / _CGROUP_PARENT
    try:
        parent.mkdir(exist_ok=True)
        if v2:
            _write(parent / "cgroup.subtree_control", f"+{controller}")
        probe = parent / f"probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        ok = (probe / _PROBE_FILE[controller][v2]).exists()
        probe.rmdir()
    except OSError:
        return None
    if not ok:
        return None
    with contextlib.suppress(OSError):
        _sweep(parent)
    return CgroupParent(parent, v2)


@functools.cache
def cgroup_parent(controller: Controller) -> CgroupParent | None:
    """Where this agent can make cgroups with ``controller`` (cgroup v1 hierarchy or v2), or None."""
    v1 = _CGROUP_ROOT / controller
    if (v1 / "cgroup.procs").exists() and (found := _usable_parent(v1, controller, v2=False)):
        return found
    if controller in _read(_CGROUP_ROOT / "cgroup.controllers").split():
        return _usable_parent(_CGROUP_ROOT, controller, v2=True)
    return None


def missing_controllers() -> list[Controller]:
    """The controllers no sandbox cgroup gets on this machine."""
    return [c for c in CONTROLLERS if cgroup_parent(c) is None]


def limit_warnings(settings: SandboxSettings) -> list[str]:
    """One line when the sandbox's memory and CPU caps cannot be enforced for all its processes here."""
    if not settings.enabled:
        return []
    lost = [c for c in missing_controllers() if c != "pids"]  # pids falls back to RLIMIT_NPROC (sandbox.py)
    if not lost:
        return []
    return [
        f"No {' or '.join(lost)} cgroup can be made here (cgroup v1 or v2, writable by this user): the "
        f"sandbox's {' and '.join(lost)} limits hold per process only (prlimit), not for all its processes "
        f"together (sandbox_memory_mb={settings.sandbox_memory_mb} and cpus={settings.cpus:g} are not enforced)."
    ]


def _limits(settings: SandboxSettings, controller: Controller, v2: bool) -> list[tuple[str, str]]:
    """The files to write (in order) to cap ``controller`` for one sandbox."""
    if controller == "pids":
        return [("pids.max", str(settings.max_pids))]
    if controller == "memory":
        cap = str(settings.sandbox_memory_mb * 1024 * 1024)
        # Swap counted too where the host has it, or the cap would only move memory to swap.
        return (
            [("memory.max", cap), ("memory.swap.max", "0")]
            if v2
            else [("memory.limit_in_bytes", cap), ("memory.memsw.limit_in_bytes", cap)]
        )
    quota = str(max(1000, round(settings.cpus * _CPU_PERIOD_US)))
    if v2:
        return [("cpu.max", f"{quota} {_CPU_PERIOD_US}")]
    return [("cpu.cfs_period_us", str(_CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)]


_OPTIONAL_FILES = frozenset({"memory.swap.max", "memory.memsw.limit_in_bytes"})  # absent without swap accounting


@dataclass
class SandboxCgroup:
    """The cgroups of one sandboxed command (one folder per v1 hierarchy, or one v2 folder)."""

    paths: tuple[Path, ...]

    @classmethod
    def create(cls, settings: SandboxSettings) -> SandboxCgroup | None:
        """Cgroups for every controller the host offers, capped by ``settings``; None when it offers none."""
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        made: dict[Path, tuple[bool, list[Controller]]] = {}
        for controller in CONTROLLERS:
            parent = cgroup_parent(controller)
            if parent is not None:
                made.setdefault(parent.path / name, (parent.v2, []))[1].append(controller)
        paths: list[Path] = []
        try:
            for path, (v2, controllers) in made.items():
                path.mkdir()
                paths.append(path)
                for controller in controllers:
                    for file, value in _limits(settings, controller, v2):
                        try:
                            _write(path / file, value)
                        except OSError:
                            if file not in _OPTIONAL_FILES:
                                raise
        except OSError:
            cls(tuple(paths)).remove()
            return None
        return cls(tuple(paths)) if paths else None

    def enter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed by a shell that joins every cgroup, then execs the command in place."""
        # Writing 0 to cgroup.procs moves the writer; a failed join aborts rather than run uncapped.
        join = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
        procs = [str(path / "cgroup.procs") for path in self.paths]
        return ["/bin/sh", "-c", join, "webgen-cgroup", *procs, "--", *argv]

    def oom_kills(self) -> int:
        """How many of this sandbox's processes the kernel killed at its memory cap (0 without a memory cgroup)."""
        for path in self.paths:
            # v2 counts them in memory.events, v1 (kernel 4.13 and later) in memory.oom_control.
            for name in ("memory.events", "memory.oom_control"):
                for line in _read(path / name).splitlines():
                    key, _, count = line.partition(" ")
                    if key == "oom_kill" and count.strip().isdigit():
                        return int(count)
        return 0

    def remove(self) -> None:
        """Kill whatever is still inside (only ever this sandbox's processes), then remove the cgroups."""
        for path in self.paths:
            _remove_cgroup(path)


def _remove_cgroup(path: Path) -> None:
    for attempt in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            for pid in _read(path / "cgroup.procs").split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.01 * min(attempt + 1, 10))


# -- workspace size --------------------------------------------------------------------------------


def disk_usage(root: Path, *, seen: set[tuple[int, int]] | None = None, skip: frozenset[Path] = frozenset()) -> int:
    """Bytes of disk the files under ``root`` take (each inode once, symlinks not followed).

    ``seen``: inodes already counted (by an earlier call), updated; ``skip``: folders not entered.
    """
    seen = set() if seen is None else seen
    skipped = {str(folder) for folder in skip}
    total = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.path not in skipped:
                    stack.append(entry.path)
            elif (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def tree_usage(root: Path) -> int:
    """Bytes of disk the tree under ``root`` takes, counted by coreutils' ``du`` (each inode once,
    symlinks not followed, folders' own blocks included); ``disk_usage`` where du cannot say.

    du, not the walk above, for the checks a step waits on: the walk holds the interpreter's lock
    for 15 ms on a typical project (2,000 files in node_modules), longer while other runs share
    the process; du takes about 5 ms and holds none. Counting folders' blocks too, it never says
    less than the walk does.
    """
    try:
        done = subprocess.run(["du", "-s", "-B1", "--", str(root)], capture_output=True, check=False)
        # "BYTES<tab>PATH": the figure comes first (a path with a newline in it cannot mislead it).
        return int(done.stdout.split(b"\t", 1)[0])
    except (OSError, ValueError):
        return disk_usage(root)


def _filesystem_used(folders: Sequence[Path]) -> int:
    """Bytes used on the filesystems holding ``folders`` (each filesystem once): one cheap system call each."""
    seen: set[int] = set()
    total = 0
    for folder in folders:
        try:
            device = folder.stat().st_dev
            if device in seen:
                continue
            seen.add(device)
            info = os.statvfs(folder)
        except OSError:
            continue
        total += (info.f_blocks - info.f_bfree) * info.f_frsize
    return total


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists
        return True
    return True


# The slower clock of the guard's walks: at least every second, and never more than 5 % of a
# core on walking (a walk of a large node_modules takes tens of milliseconds).
_MIN_WALK_EVERY_S = 1.0
# Folders the command cannot write (a dev server's read-only node_modules) are walked again on a
# clock slower still: only another command (an install or shell action, with a guard of its own)
# can change them meanwhile.
_FROZEN_WALK_EVERY_S = 10.0


def _walk_every_s(walk_s: float) -> float:
    return max(_MIN_WALK_EVERY_S, 20 * walk_s)


class WorkspaceGuard:
    """Watches a workspace (and a private npm cache) while a command writes; kills its group past the cap.

    Walking the folders is too dear to repeat while npm writes thousands of files, so the guard
    walks them once, then every ``interval_s`` asks the filesystem how much it grew (``statvfs``)
    and walks again only when that growth could have taken the folders past the cap. The growth
    counts other writers on the same filesystem too: that only costs a walk. The overshoot is what
    the command writes in one interval and one walk (figures in docs/security.md). Space another
    process frees at the same time (another run's clean-up) hides as much of the command's writes
    from that growth, so the folders are also walked on a slower clock whatever the growth
    (``_walk_every_s``): a freed disk delays the kill by at most that long.

    ``frozen`` folders inside them are bound read-only in the command's sandbox (a dev server's
    node_modules, shared by hardlinks), except their ``thawed`` ones (its build caches): the slower
    clock's walk counts them as the last full walk found them (the bulk of a walk: thousands of
    files) and walks only what the command can write. Growth past the cap, and the slowest clock
    (``_FROZEN_WALK_EVERY_S``), walk everything.
    """

    def __init__(
        self,
        folders: Sequence[Path],
        cap_bytes: int,
        pgid: int,
        *,
        uncounted_bytes: int = 0,
        interval_s: float = 0.2,
        frozen: Sequence[Path] = (),
        thawed: Sequence[Path] = (),
    ) -> None:
        self.folders = tuple(folders)  # the workspace, and the command's private npm cache if it has one
        self.cap_bytes = cap_bytes
        # What the private npm cache held before the command (a copy of the shared one): not the
        # command's writes, so neither counted against the cap nor in the size the model is told.
        self.uncounted_bytes = uncounted_bytes
        self.pgid = pgid
        self.interval_s = interval_s
        self.frozen = frozenset(frozen)
        self.thawed = tuple(thawed)
        self._frozen_size: tuple[int, set[tuple[int, int]]] = (0, set())  # bytes, inodes: the last full walk
        self.tripped_at: int | None = None  # the size seen when it killed the command
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def _walk(self, *, full: bool) -> tuple[int, float]:
        """The folders' size and how long measuring it took (frozen folders as last walked unless ``full``)."""
        started = time.monotonic()
        if full:
            inodes: set[tuple[int, int]] = set()
            thawed = frozenset(self.thawed)
            self._frozen_size = sum(disk_usage(f, seen=inodes, skip=thawed) for f in self.frozen), inodes
        frozen_bytes, frozen_inodes = self._frozen_size
        seen = set(frozen_inodes)
        used = frozen_bytes - self.uncounted_bytes
        used += sum(disk_usage(folder, seen=seen, skip=self.frozen) for folder in self.folders)
        used += sum(disk_usage(folder, seen=seen) for folder in self.thawed)
        return used, time.monotonic() - started

    def run(self) -> None:
        """Poll until ``stop``, or until the cap is passed (then kill the group and return)."""
        baseline = _filesystem_used(self.folders)
        used, walk_s = self._walk(full=True)
        walked_at = walked_all_at = time.monotonic()
        while used <= self.cap_bytes:
            if self._stopped.wait(self.interval_s) or not _group_exists(self.pgid):
                return
            now, clock = _filesystem_used(self.folders), time.monotonic()
            full = used + (now - baseline) > self.cap_bytes or clock - walked_all_at >= _FROZEN_WALK_EVERY_S
            if full or clock - walked_at >= _walk_every_s(walk_s):
                baseline = now  # writes during the walk count in the next growth
                used, walk_s = self._walk(full=full)
                walked_at = time.monotonic()
                walked_all_at = walked_at if full else walked_all_at
        if not self._stopped.is_set():
            self.tripped_at = used
            with contextlib.suppress(OSError):
                os.killpg(self.pgid, signal.SIGKILL)

    def start(self) -> WorkspaceGuard:
        """Watch from a thread of its own (not tied to an event loop: a server outlives the loop it started in)."""
        self._thread = threading.Thread(target=self.run, name="webgen-workspace-guard", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching and wait for the thread (at most one walk), so it never signals a later group."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def message(self) -> str:
        """For the model: what was stopped and why."""
        seen = (self.tripped_at or 0) / 2**20
        return (
            f"The command was stopped: the project folder (with npm's cache, if it used one) reached {seen:.0f} MB "
            f"while it ran, over the {self.cap_bytes / 2**20:.0f} MB cap for a workspace (node_modules included). "
            "Write less (nothing may be written outside the project)."
        )
