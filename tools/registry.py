"""The registry of process groups the agent started, and the watchdog that kills them when it dies.

A ``ProcessRegistry`` file records every live group so that a later run can reap what a hard-killed
agent (kill -9, OOM) left behind, and so that the agent's watchdog can kill them as soon as it is
gone. ``ManagedProcess`` (``tools.process``) records each group before its command may run.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil
from pydantic import BaseModel, Field

# -- process groups ------------------------------------------------------------------------------


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a group. Zombies are dead: their parent just has not reaped them."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(_group_members(pgid))


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class RegistryEntry(BaseModel):
    pgid: int
    pid: int
    create_time: float = Field(description="psutil create_time of the group leader (guards against pid reuse).")
    argv: list[str]
    owner_pid: int = Field(description="The agent process that started it.")
    owner_create_time: float


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _same_process(pid: int, create_time: float) -> bool:
    actual = _create_time(pid)
    return actual is not None and abs(actual - create_time) < 0.05


class ProcessRegistry:
    """A JSON-lines file listing every process group this and other agent processes started.

    ``reap()`` (call it at start-up) kills groups whose owning agent is gone; ``kill_all()`` kills the
    groups this process owns (for atexit / signal handlers; it is synchronous on purpose). A file
    lock makes concurrent agents sharing one registry safe.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def lock_path(self) -> Path:
        """The file whose lock every reader and writer of the registry holds."""
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[RegistryEntry]]:
        """Yield the entries under an exclusive lock; the (possibly mutated) list is written back.

        A new version is written beside the file and renamed over it: an agent killed while it
        writes (kill -9 lands anywhere) leaves the old list or the new one, never a truncated file
        that would hide every other agent's groups from their watchdogs and reaps.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = ""
            entries: list[RegistryEntry] = []
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    entries.append(RegistryEntry.model_validate_json(line))
            before = list(entries)
            yield entries
            if entries != before:
                fresh = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
                fresh.write_text("".join(entry.model_dump_json() + "\n" for entry in entries), encoding="utf-8")
                os.replace(fresh, self.path)

    def entries(self) -> list[RegistryEntry]:
        with self._locked() as entries:
            return list(entries)

    def add(self, pid: int, argv: Sequence[str]) -> None:
        me = os.getpid()
        entry = RegistryEntry(
            pgid=pid,  # started with start_new_session: the leader's pid is the group id
            pid=pid,
            create_time=_create_time(pid) or time.time(),
            argv=list(argv),
            owner_pid=me,
            owner_create_time=_create_time(me) or 0.0,
        )
        with self._locked() as entries:
            entries.append(entry)

    def remove(self, pgid: int) -> None:
        with self._locked() as entries:
            entries[:] = [e for e in entries if e.pgid != pgid]

    @staticmethod
    def _kill_recorded(entry: RegistryEntry) -> bool:
        """SIGKILL a recorded group if it is still ours; True when something was killed."""
        if _same_process(entry.pid, entry.create_time):
            signal_group(entry.pgid, signal.SIGKILL)
            return True
        if psutil.pid_exists(entry.pid):
            return False  # the leader's pid now belongs to another process: not ours
        # Leader gone; Linux does not hand out a pid while a group of that id exists, so members
        # still carrying this pgid are the orphans of the recorded group.
        members = _group_members(entry.pgid)
        if members:
            signal_group(entry.pgid, signal.SIGKILL)
        return bool(members)

    def reap(self) -> list[int]:
        """Kill groups left by agent processes that are gone; returns the pgids killed."""
        killed = []
        with self._locked() as entries:
            keep = []
            for entry in entries:
                owner_alive = _same_process(entry.owner_pid, entry.owner_create_time)
                if owner_alive and entry.owner_pid != os.getpid():
                    keep.append(entry)  # another live agent's process: not ours to kill
                elif not owner_alive and self._kill_recorded(entry):
                    killed.append(entry.pgid)
                elif owner_alive:
                    keep.append(entry)  # our own live processes are stopped by their owners / kill_all
            entries[:] = keep
        return killed

    def kill_all(self) -> list[int]:
        """SIGKILL every group this process recorded (synchronous: safe in atexit and signal paths)."""
        return self.kill_owned(os.getpid())

    def kill_owned(self, owner_pid: int, owner_create_time: float | None = None) -> list[int]:
        """SIGKILL every group the given agent process recorded (the watchdog's job once it died)."""
        killed = []

        def owned(entry: RegistryEntry) -> bool:
            return entry.owner_pid == owner_pid and (
                owner_create_time is None or abs(entry.owner_create_time - owner_create_time) < 0.05
            )

        with self._locked() as entries:
            for entry in entries:
                if owned(entry) and self._kill_recorded(entry):
                    killed.append(entry.pgid)
            entries[:] = [e for e in entries if not owned(e)]
        return killed

    def register_atexit(self) -> None:
        """Kill this process's groups at interpreter exit (also after Ctrl-C's KeyboardInterrupt),
        and whatever it leaves when it dies without running exit handlers (``start_watchdog``)."""
        atexit.register(self.kill_all)
        self.start_watchdog()

    def start_watchdog(self) -> None:
        """Start (once per process and registry) a watchdog that kills this process's groups when it dies.

        Exit handlers do not run after kill -9, an OOM kill or a default-action SIGTERM. The watchdog
        (``python -m webgen_agent.tools.watchdog``) sits in a session of its own reading a pipe whose
        only write end this process holds: the kernel closes it however the process ends, and the
        watchdog then SIGKILLs every group the registry lists for it. A parent-death signal
        (PR_SET_PDEATHSIG) would not do: it reaches only the direct child, not the dev server npm
        started, and fires when the *thread* that spawned the child exits.
        """
        key = (os.getpid(), str(self.path.resolve()))
        with _WATCHDOGS_LOCK:
            if key in _WATCHDOGS:
                return
            read_end, write_end = os.pipe()  # not inheritable (PEP 446): no other child holds the write end
            try:
                me = os.getpid()
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "webgen_agent.tools.watchdog",
                        str(self.path),
                        str(me),
                        repr(_create_time(me) or 0.0),
                    ],
                    stdin=read_end,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C in a terminal reaches the agent's group, not the watchdog
                    close_fds=True,
                )
            finally:
                os.close(read_end)
            _WATCHDOGS[key] = write_end  # kept open for the life of the process


_WATCHDOGS: dict[tuple[int, str], int] = {}
_WATCHDOGS_LOCK = threading.Lock()
