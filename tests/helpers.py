"""Helpers for tests that drive the CLI as a real process and watch its checkpoints and processes, and a bare DevTools client."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil
from langgraph.checkpoint.base import empty_checkpoint
from websockets.asyncio.client import ClientConnection

from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunRecord
from webgen_agent.checkpoints.store import BlobStore, iter_project_files
from webgen_agent.checkpoints.trajectories import Trajectory

if TYPE_CHECKING:
    from webgen_agent.tools.browser import SharedBrowser

T = TypeVar("T")


@contextlib.contextmanager
def ctrl_c_as_in_a_terminal() -> Iterator[None]:
    """Ctrl-C (SIGINT) handled as in a terminal's foreground job, whatever the suite was started with.

    A suite started as a shell's background job without job control (``pytest ... &`` in a script)
    runs with Ctrl-C ignored; every process it starts inherits that, and the CLI keeps ignoring it
    (apps/ctrl_c.py, as asyncio does). Inside this block Python's own handler is set; a process
    started here gets Ctrl-C's default back (an exec resets a handled signal), as from a terminal.
    """
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, outside)


def scripted_models(base_url: str) -> list[str]:
    """CLI flags sending the three model roles to the scripted server's usual model names."""
    return [
        "--base-url",
        str(base_url),
        "--coder-model",
        "scripted-coder",
        "--vlm-model",
        "scripted-vlm",
        "--feedback-model",
        "scripted-feedback",
    ]


async def eventually(
    check: Callable[[], T], *, timeout_s: float, what: str, off_loop: bool = True, interval_s: float = 0.02
) -> T:
    """Poll ``check`` until it returns something truthy and return that; fail naming ``what`` after
    ``timeout_s``. For conditions of the outside world (files, processes, logs) that nothing
    signals; ``check`` runs in a worker thread unless ``off_loop`` is False (loop-bound objects)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await asyncio.to_thread(check) if off_loop else check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        await asyncio.sleep(interval_s)


def _thread_rows(db: str | Path, table: str, run_id: str, *, where: str = "") -> int:
    """Rows of the checkpointer's ``table`` for the run (0 before the tables exist), in either store:
    PostgreSQL's tables are named ``checkpoint_<table>`` but for ``checkpoints`` itself."""
    database = Database.of(db)
    condition = f"thread_id = {{}}{where}"
    if database.is_postgres:
        import psycopg

        name = table if table == "checkpoints" else f"checkpoint_{table}"
        try:
            with psycopg.connect(database.url, autocommit=True) as conn:
                row = conn.execute(f"SELECT COUNT(*) FROM {name} WHERE {condition.format('%s')}", [run_id]).fetchone()
                return int(row[0]) if row else 0
        except psycopg.errors.UndefinedTable:
            return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {condition.format('?')}", [run_id]).fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # the tables are not created yet


def checkpoint_count(db: str | Path, run_id: str) -> int:
    """Checkpoints written so far for the run, in either store."""
    return _thread_rows(db, "checkpoints", run_id)


def task_results(db: str | Path, run_id: str) -> int:
    """The run's task results in the writes table (LangGraph's ``__return__`` writes), in either store."""
    return _thread_rows(db, "writes", run_id, where=" AND channel = '__return__'")


def the_one_error(output: str) -> str:
    """What a CLI that stopped on an error said after ``error:``: said once, with no traceback."""
    assert output.count("error:") == 1 and "Traceback" not in output, output
    return output.split("error:")[1].strip()


def kept_coder_replies(db: str | Path, run_id: str) -> int:
    """Coder replies the run received and kept (``kept_task``) that no checkpointed step records yet:
    a process stopped between the two; the run continued gets them back without asking the coder."""
    from webgen_agent.checkpoints.pregel import RETURN_CHANNEL
    from webgen_agent.checkpoints.saver import open_checkpointer

    async def pending() -> list[Any]:
        async with open_checkpointer(db, record_runs=False) as saver:
            found = await saver.aget_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
        return (found.pending_writes if found is not None else None) or []

    # A coder reply is a Completion's dump; the GUI test instruction's kept reply has no "seconds".
    return sum(1 for _, channel, value in asyncio.run(pending()) if channel == RETURN_CHANNEL and "seconds" in value)


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "webgen_agent", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def until_checkpoints(
    proc: subprocess.Popen,
    db: str | Path,
    run_id: str,
    checkpoints: int,
    *,
    timeout_s: float = 240,
    log: Path | None = None,
) -> None:
    """Wait until the run ``proc`` runs wrote ``checkpoints`` checkpoints (it must not end first; what
    it printed, from ``log`` or its stdout, says why it did)."""
    deadline = time.monotonic() + timeout_s
    while checkpoint_count(db, run_id) < checkpoints:
        assert proc.poll() is None, log.read_text() if log else proc.stdout.read()
        assert time.monotonic() < deadline, f"the run did not reach {checkpoints} checkpoints"
        time.sleep(0.05)


def kill_when(
    proc: subprocess.Popen, db: str | Path, run_id: str, checkpoints: int, timeout_s: float = 240
) -> list[psutil.Process]:
    """SIGKILL the run once it wrote ``checkpoints`` checkpoints; returns what it had started by then."""
    until_checkpoints(proc, db, run_id, checkpoints, timeout_s=timeout_s)
    started = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return started


def still_running(processes: list[psutil.Process], within_s: float = 15.0) -> list[str]:
    """Those of ``processes`` still alive (not zombies) after waiting up to ``within_s`` for them to go."""
    deadline = time.monotonic() + within_s
    while True:
        alive = []
        for proc in processes:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(" ".join(proc.cmdline()[:3]))
            except psutil.Error:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def owned_groups(db: str | Path, owner: int) -> list[int]:
    registry = Database.of(db).local_dir / "processes.jsonl"
    if not registry.exists():  # killed before it started any process
        return []
    entries = [json.loads(line) for line in registry.read_text().splitlines() if line.strip()]
    return [e["pgid"] for e in entries if e["owner_pid"] == owner]


def group_alive(pgid: int) -> bool:
    return any(p.status() != psutil.STATUS_ZOMBIE for p in psutil.process_iter() if _pgid(p.pid) == pgid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def site_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in iter_project_files(folder)}


class CdpClient:
    """A bare DevTools client on an open websocket (the agent's relay, a scoped endpoint): commands
    with their answers, flat sessions for pages it opens, and every message it was sent, in order."""

    def __init__(self, connection: ClientConnection, *, timeout_s: float = 20.0) -> None:
        self.connection = connection
        self.timeout_s = timeout_s
        self.received: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    async def command(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send one command (to a page's ``session`` when given) and return its answer."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"id": request_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        await self.connection.send(json.dumps(message))
        while True:
            answer = json.loads(await asyncio.wait_for(self.connection.recv(), self.timeout_s))
            self.received.append(answer)
            if answer.get("id") == request_id:
                return answer

    async def open_page(self, url: str, *, settle_s: float = 0.5) -> str:
        """A new page at ``url``, attached flat: its session id (after ``settle_s`` for the load)."""
        target = (await self.command("Target.createTarget", {"url": url}))["result"]["targetId"]
        attached = await self.command("Target.attachToTarget", {"targetId": target, "flatten": True})
        await asyncio.sleep(settle_s)
        return str(attached["result"]["sessionId"])

    async def evaluate(self, session: str, expression: str) -> Any:
        """The value of ``expression`` in the page of ``session`` (promises awaited)."""
        answer = await self.command("Runtime.evaluate", {"expression": expression, "awaitPromise": True}, session)
        return answer["result"]["result"].get("value")

    async def drain(self, seconds: float) -> None:
        """Keep what arrives for ``seconds`` (events) in ``received``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.received.append(json.loads(await asyncio.wait_for(self.connection.recv(), left)))
            except TimeoutError:
                return


def checkpoint_of(values: dict[str, Any]) -> dict[str, Any]:
    """A LangGraph checkpoint whose channels hold ``values`` (each at version 1)."""
    checkpoint = dict(empty_checkpoint())
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {key: 1 for key in values}
    return checkpoint


async def save_finished_run(
    saver: Any, runs: Any, values: dict[str, Any], *, steps: int = 2, out_dir: str = "/dev/null"
) -> None:
    """Record a hand-built run state as a finished run: its checkpoint in ``saver`` (a checkpointer
    of checkpoints.saver) and its row in ``runs`` (a RunIndex), as export and train read them."""
    from webgen_agent.checkpoints.runs import RunRecord

    run_id = values["run_id"]
    config = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    await saver.aput(config, checkpoint_of(values), {"source": "loop", "step": 2, "parents": {}}, {})
    runs.start(
        RunRecord(run_id=run_id, group_id=values["group_id"], requirement=values["requirement"], out_dir=out_dir)
    )
    runs.update(run_id, status="finished", steps=steps)


def pids_limit_enforced() -> bool:
    """Whether a fork bomb inside the sandbox is stopped at ``max_pids`` on this machine (as root, only
    a writable pids cgroup caps processes; otherwise the sandbox's ``prlimit --nproc`` does)."""
    from webgen_agent.tools.limits import cgroup_parent

    return cgroup_parent("pids") is not None or os.geteuid() != 0


def synthetic(
    store: BlobStore,
    run_id: str,
    group: str,
    steps: list[dict[str, Any]],
    *,
    chosen: int | None = None,
    logprobs: bool = False,
) -> Trajectory:
    """A trajectory whose coder turns are stored like the nodes store them (ChatRef lists, texts);
    ``steps`` give each step's fields beyond a plain edit (``size``: the completion's length)."""
    conversation = [
        {"role": "system", "hash": store.put_text("system prompt")},
        {"role": "user", "hash": store.put_text(f"build {group}")},
    ]
    records = []
    for index, fields in enumerate(steps):
        completion = f"reply {index} of {run_id} " + "x" * fields.pop("size", 10)
        record = {
            "index": index,
            "role": "generator" if index == 0 else "refiner",
            "action": "edit",
            "prompt": store.put_json(conversation),
            "completion": store.put_text(completion),
            "format_ok": True,
            "screenshot_score": 0,
            "gui_score": 0,
            "model": "m",
            "parent": index - 1 if index else None,
            **fields,
        }
        if logprobs:
            record["logprobs"] = store.put_json(
                [{"token": t, "logprob": -0.5, "bytes": [], "top_logprobs": []} for t in completion.split(" ")]
            )
        records.append(record)
        conversation = [
            *conversation,
            {"role": "assistant", "hash": record["completion"]},
            {"role": "user", "hash": store.put_text(f"feedback {index}")},
        ]
    run = RunRecord(run_id=run_id, group_id=group, requirement=f"build {group}", status="finished", out_dir="/x")
    return Trajectory(run=run, values={"steps": records, "chosen_step": chosen})


def chromium_main(browser: SharedBrowser) -> psutil.Process:
    """Chromium's main process (inside its sandbox): its parent is no Chromium process, nor is it a crash reporter."""
    assert browser.pid is not None
    found = []
    for p in psutil.Process(browser.pid).children(recursive=True):
        try:  # a helper process (a renderer, a zygote's child) may exit while the tree is listed
            parent = p.parent()
            if "chrom" in p.name() and "crashpad" not in p.name() and "chrom" not in (parent.name() if parent else ""):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    assert len(found) == 1, found
    return found[0]


async def kill_chromium(browser: SharedBrowser) -> None:
    """Chromium dies (a crash, the OOM killer) and the browser has noticed."""
    chromium_main(browser).kill()
    await eventually(lambda: not browser.healthy, timeout_s=30, what="the browser noticing it died", off_loop=False)
