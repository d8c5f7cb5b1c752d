"""Running untrusted generated code: scrubbed environment, process groups, timeouts, orphan reaping.

Everything the agent starts (npm, dev servers, model-written shell actions, Chromium) runs in its own
process group (``start_new_session=True``) so that one ``killpg`` takes down the whole tree (npm ->
sh -> vite -> esbuild). Output goes to a file, never a pipe: a grandchild that inherits a pipe keeps
it open after its parent exits, and reading it would hang.

Processes are waited for by polling ``Popen.poll`` with short sleeps instead of asyncio's subprocess
API: a ``Popen`` is not bound to one event loop, so a server started in one loop can be stopped from
another and from synchronous atexit/signal code.

Every group is recorded in a ``ProcessRegistry`` (``tools.registry``) before its command runs, so
that the agent's watchdog, or a later run, kills what a hard-killed agent (kill -9, OOM) left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.tools.limits import SandboxCgroup, WorkspaceGuard
from webgen_agent.tools.netns import NetworkGate
from webgen_agent.tools.registry import ProcessRegistry, group_alive, signal_group
from webgen_agent.tools.sandbox import Confinement, sandbox_env
from webgen_agent.tools.seccomp import seccomp_fd

# -- environment ---------------------------------------------------------------------------------

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_AGENT_PREFIXES = (
    "OPENAI_",
    "WEBGEN_",
    "ANTHROPIC_",
    "LANGSMITH_",
    "LANGCHAIN_",
    "HF_",
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "BROWSER_USE_",
)
# Files bash reads even when non-interactive; they could re-export what we removed.
_SHELL_STARTUP = ("BASH_ENV", "ENV")
_ADDED = {"BROWSER": "none", "CI": "1", "NO_COLOR": "1", "FORCE_COLOR": "0", "NPM_CONFIG_UPDATE_NOTIFIER": "false"}


def is_sensitive(name: str) -> bool:
    """True for variables that may hold secrets or agent settings (case-insensitive)."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS) or upper.startswith(_AGENT_PREFIXES) or upper in _SHELL_STARTUP


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent environment minus secrets and agent settings, plus non-interactive defaults.

    PATH, HOME (npm's cache lives in ~/.npm), LANG, proxies and ``npm_config_*`` survive, so npm
    still reaches its registry and cache; ``extra`` is applied last and is not filtered.
    """
    env = {name: value for name, value in os.environ.items() if not is_sensitive(name)}
    env.update(_ADDED)
    if extra:
        env.update(extra)
    return env


# -- logs ----------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def read_tail(path: Path, *, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log file (ANSI codes removed); '' when it does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return ""
    text = strip_ansi(data.decode("utf-8", errors="replace"))
    return "\n".join(text.rstrip("\n").split("\n")[-lines:]) if text.strip() else ""


# -- process groups ------------------------------------------------------------------------------


async def kill_group(pgid: int, *, grace_s: float = 3.0, reap: subprocess.Popen | None = None) -> None:
    """SIGTERM the group, wait up to ``grace_s`` for it to go, then SIGKILL what is left."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    delay = 0.01
    while True:
        if reap is not None:
            reap.poll()  # reap our own child so it does not linger as a zombie group member
        if not group_alive(pgid):
            return
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)
    signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if reap is not None:
            reap.poll()
        if not group_alive(pgid):
            return
        await asyncio.sleep(0.02)


# The start gate of a recorded process: a shell (same pid, same group) that waits on stdin for the
# line written once the registry holds its group, then execs the command with stdin from /dev/null.
# End-of-file instead (the agent died first) makes it exit without starting anything.
_GATE = ["/bin/sh", "-c", 'read -r _ || exit 111; exec "$@" </dev/null', "webgen-start-gate"]
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="webgen-spawn")


# -- managed processes ---------------------------------------------------------------------------


class ManagedProcess:
    """A command in its own process group, cwd confined to a folder, env scrubbed, output to a log."""

    def __init__(
        self,
        popen: subprocess.Popen,
        argv: list[str],
        log_path: Path,
        registry: ProcessRegistry | None,
        cgroup: SandboxCgroup | None = None,
        network: NetworkGate | None = None,
    ) -> None:
        self._popen = popen
        self.argv = argv
        self.log_path = log_path
        self._registry = registry
        self._cgroup = cgroup
        # The doors of the sandbox's network namespace (tools.netns): kept open while the process lives.
        self.network = network
        self._stopped = False
        self._oom_kills = 0  # read from the cgroup before it is removed

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        registry: ProcessRegistry | None = None,
        sandbox: Confinement | None = None,
        pass_fds: Sequence[int] = (),
        user: int | None = None,
    ) -> ManagedProcess:
        """Start ``argv`` now (synchronous: Popen does not block). ``env`` defaults to ``scrubbed_env()``.

        ``pass_fds`` stay open in the command (all others are closed); ``user`` runs it (and its
        group id) as that uid, for a caller that may switch users.

        With ``sandbox`` the command runs confined (``tools.sandbox``): under bwrap, with the
        sandbox's limits and, where one can be made, in a cgroup of its own (processes, memory, CPU). With ``registry``
        the command is exec'd only once the registry holds its group (``_GATE``).
        """
        cwd = Path(cwd)
        if not cwd.is_dir():
            raise FileNotFoundError(f"working folder {cwd} does not exist")
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(env) if env is not None else scrubbed_env()
        command, cgroup, filter_fd, network = list(argv), None, None, None
        if sandbox is not None:
            filter_fd = seccomp_fd()  # bwrap reads the seccomp program from it (inherited, then closed here)
            network = NetworkGate.open(sandbox.network)
            command = sandbox.command(command, env, network, seccomp_fd=filter_fd)
            # bwrap itself (PID 1 inside, /proc/1/environ) and the wrappers before it get only the
            # allow-listed environment too: --clearenv cleans the command's, not bwrap's own.
            env = sandbox_env(env)
            cgroup = SandboxCgroup.create(sandbox.settings)
            if cgroup is not None:
                command = cgroup.enter(command)
        gate = None
        if registry is not None:
            # Nothing may run before its group is recorded: were the agent killed in between, neither
            # the watchdog nor a later reap would know of it (and bwrap arms its parent-death signal
            # only some way into its set-up, too late when its parent is already gone).
            command = [*_GATE, *command]
            gate = os.pipe()  # not inheritable: only this child gets the read end, as its stdin
        try:
            popen = cls._popen_logged(
                command,
                cwd,
                log_path,
                env,
                stdin=gate[0] if gate else subprocess.DEVNULL,
                pass_fds=(*pass_fds, filter_fd) if filter_fd is not None else pass_fds,
                user=user,
            )
        except BaseException:
            if gate is not None:
                os.close(gate[1])
            _release(cgroup, network)
            raise
        finally:
            if gate is not None:
                os.close(gate[0])
            if filter_fd is not None:
                os.close(filter_fd)
        if registry is not None and gate is not None:
            try:
                registry.add(popen.pid, list(argv))
                with contextlib.suppress(BrokenPipeError):
                    os.write(gate[1], b"\n")  # recorded: let the command start
            except BaseException:  # an unrecorded group could not be reaped later: do not keep it
                signal_group(popen.pid, signal.SIGKILL)
                popen.wait()
                _release(cgroup, network)
                raise
            finally:
                os.close(gate[1])
        return cls(popen, list(argv), log_path, registry, cgroup, network)

    @staticmethod
    def _popen_logged(
        argv: list[str],
        cwd: Path,
        log_path: Path,
        env: dict[str, str],
        *,
        stdin: int,
        pass_fds: Sequence[int] = (),
        user: int | None = None,
    ) -> subprocess.Popen:
        switch: dict[str, Any] = {} if user is None else {"user": user, "group": user, "extra_groups": []}
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(pass_fds),
                **switch,
            )

    @classmethod
    async def astart(cls, argv: Sequence[str], **options: Any) -> ManagedProcess:
        """``start`` from async code: forking, exec's error pipe and the registry's file lock stay off the loop.

        Processes are spawned from one long-lived thread, so that a parent-death signal set in a
        child (bubblewrap's --die-with-parent) is tied to a thread that lives as long as the process.
        A start the caller stopped waiting for (cancellation) is killed once it has happened.
        """
        started = asyncio.get_running_loop().run_in_executor(_SPAWNER, functools.partial(cls.start, argv, **options))
        try:
            return await asyncio.shield(started)
        except asyncio.CancelledError:
            started.add_done_callback(
                lambda done: done.cancelled() or done.exception() or _SPAWNER.submit(done.result().kill_now)
            )
            raise

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def pgid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def oom_kills(self) -> int:
        """Processes of this sandbox the kernel killed at its cgroup's memory cap (0 unsandboxed)."""
        if self._cgroup is not None and not self._stopped:
            self._oom_kills = max(self._oom_kills, self._cgroup.oom_kills())
        return self._oom_kills

    def log_tail(self, lines: int = 40) -> str:
        return read_tail(self.log_path, lines=lines)

    async def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the leader to exit; returns its code, or None when ``timeout_s`` passed first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        delay = 0.01
        while (code := self._popen.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.1)
        return code

    def kill_now(self) -> None:
        """SIGKILL the whole group at once (synchronous, for cancellation paths)."""
        signal_group(self.pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=1.0)
        self._forget()

    async def stop(self, grace_s: float = 3.0) -> None:
        """Kill the whole group (SIGTERM, then SIGKILL after ``grace_s``); safe to call twice."""
        if not self._stopped:
            await kill_group(self.pgid, grace_s=grace_s, reap=self._popen)
            await asyncio.to_thread(self._forget)  # the registry is a locked file

    def _forget(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._popen.poll()
        if self._cgroup is not None:
            self._oom_kills = max(self._oom_kills, self._cgroup.oom_kills())
        if self._registry is not None:
            self._registry.remove(self.pgid)
        _release(self._cgroup, self.network)


def _release(cgroup: SandboxCgroup | None, network: NetworkGate | None) -> None:
    """Free what a sandboxed process had beside it: its cgroup, its network doors."""
    if cgroup is not None:
        cgroup.remove()
    if network is not None:
        network.close()


# -- one-shot commands ---------------------------------------------------------------------------


class CommandResult(BaseModel):
    argv: list[str]
    exit_code: int | None = Field(description="None when it was killed for running past its timeout.")
    timed_out: bool = False
    seconds: float
    output_tail: str = Field(default="", description="The last lines of stdout+stderr, ANSI codes removed.")
    over_size_cap: bool = Field(
        default=False, description="Killed because the workspace passed the sandbox's size cap while it ran."
    )

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    registry: ProcessRegistry | None = None,
    tail_lines: int = 40,
    sandbox: Confinement | None = None,
) -> CommandResult:
    """Run a command to completion in its own group; the group is killed on timeout or cancellation.

    Whatever the command left running in its group (a backgrounded server) is killed when it ends.
    A sandboxed command is also killed once its workspace passes the sandbox's size cap
    (``WorkspaceGuard``; ``over_size_cap`` says so, and the output's last line tells the model).
    """
    started = time.monotonic()
    temp_log = None
    if log_path is None:
        temp_log = log_path = Path(await asyncio.to_thread(_temp_log))
    try:
        proc = await ManagedProcess.astart(
            argv, cwd=cwd, log_path=log_path, env=env, registry=registry, sandbox=sandbox
        )
        guard = size_guard(sandbox, proc.pgid)
        try:
            code = await proc.wait(timeout_s)
        except BaseException:  # CancelledError, KeyboardInterrupt: never leave the group running
            proc.kill_now()
            raise
        finally:
            if guard is not None:
                await asyncio.to_thread(guard.stop)
        timed_out = code is None
        await proc.stop(grace_s=2.0 if timed_out else 0.0)
        over = guard is not None and guard.tripped_at is not None
        tail = proc.log_tail(tail_lines)
        return CommandResult(
            argv=list(argv),
            exit_code=code,
            timed_out=timed_out,
            seconds=round(time.monotonic() - started, 3),
            output_tail=f"{tail}\n{guard.message()}".strip() if over and guard is not None else tail,
            over_size_cap=over,
        )
    finally:
        if temp_log is not None:
            await asyncio.to_thread(temp_log.unlink, missing_ok=True)


def size_guard(sandbox: Confinement | None, pgid: int) -> WorkspaceGuard | None:
    """A started watch on a sandboxed command's workspace: the size cap holds while it writes, not only after."""
    if sandbox is None:
        return None
    cap = sandbox.settings.workspace_mb * 1024 * 1024
    # What the command adds to its private npm cache counts against the same cap; what it cannot
    # write (a dev server's node_modules) is walked less often.
    folders = (sandbox.workspace,) if sandbox.npm_cache is None else (sandbox.workspace, sandbox.npm_cache)
    return WorkspaceGuard(
        folders,
        cap,
        pgid,
        uncounted_bytes=sandbox.npm_cache_seed_bytes,
        frozen=sandbox.read_only,
        thawed=sandbox.writable,
    ).start()


def _temp_log() -> str:
    fd, name = tempfile.mkstemp(prefix="webgen-cmd-", suffix=".log")
    os.close(fd)
    return name
