"""``langgraph dev`` for tests: started offline on a free port the standard way (blocking-call
detector on, several jobs per worker), stopped the way a service manager stops it (SIGTERM).

Tests share one server through the session fixture ``studio_server`` (tests/conftest.py); a test
that needs a server of its own (another store, or to watch it stop) uses ``langgraph_dev``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from webgen_agent.core.context import DEFAULT_RUNS_DIR
from webgen_agent.nodes.resources import Resources

REPO = Path(__file__).resolve().parents[1]
JOBS_PER_WORKER = 3  # as the README's command: three threads run at once


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class DevServer:
    url: str
    proc: subprocess.Popen
    db: str  # WEBGEN_DB of the server: a SQLite file or a postgresql:// URL
    runs_dir: Path  # where its runs' folders go (runs_dir in the run context)
    log: Path
    left_after_stop: list[str] = field(default_factory=list)


@contextlib.contextmanager
def langgraph_dev(
    base: Path,
    chromium: str,
    *,
    db: str | None = None,
    jobs: int = JOBS_PER_WORKER,
    env: dict[str, str] | None = None,
) -> Iterator[DevServer]:
    """``langgraph dev`` on a free port, offline, its database (unless ``db``) and folders under
    ``base``; ``env``: more environment variables for the server (its models, say)."""
    beside_python = Path(sys.executable).with_name("langgraph")
    cli = str(beside_python) if beside_python.exists() else shutil.which("langgraph")
    if cli is None:
        pytest.skip("langgraph-cli is not installed (pip install -e '.[test]')")
    port = free_port()
    db = db or str(base / "db" / "webgen.db")
    server_env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "WEBGEN_DB": db,
        "WEBGEN_CHROMIUM": chromium,
        **(env or {}),
    }
    log = base / "langgraph-dev.log"
    # The standard way: no --allow-blocking, so the server's blocking-call detector is on.
    command = [
        cli,
        "dev",
        "--no-browser",
        "--no-reload",
        "--port",
        str(port),
        "--n-jobs-per-worker",
        str(jobs),
        "--config",
        str(REPO / "langgraph.json"),
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command, cwd=base, env=server_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    # The context's default runs_dir, relative to the server's working folder (``base``).
    server = DevServer(f"http://127.0.0.1:{port}", proc, db, base / DEFAULT_RUNS_DIR, log)
    try:
        yield server
    finally:
        server.left_after_stop = stop_process_tree(proc, db)


def stop_process_tree(proc: subprocess.Popen, db: str) -> list[str]:
    """Stop the server the way a service manager does (SIGTERM to it alone), then clean up by force.

    Returns what the server started and left running once it exited, before any cleanup.
    """
    started = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10  # the watchdog's exit and zombies being reaped take a moment
    while alive([p.pid for p in started]) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [" ".join(p.cmdline()[:3]) for p in alive([p.pid for p in started])]
    # Whatever is left (a failing test) is cleaned up all the same.
    Resources.reap_orphans(db)
    for child in started:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(started, timeout=10)
    return left


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def alive(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


async def wait_until_ready(server: DevServer, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                pytest.fail(f"langgraph dev exited ({server.proc.returncode}):\n{server.log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{server.url}/ok", timeout=2)).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    pytest.fail(f"langgraph dev did not answer in {timeout_s}s:\n{server.log.read_text()[-3000:]}")


def cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    """``webgen-agent ARGS --db DB`` as a user runs it, in a wide terminal."""
    return subprocess.run(
        [sys.executable, "-m", "webgen_agent", *args, "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
