"""The rollout story the rollout and export tests read: docs/exports.md's offline example run as
written (the rollout CLI as a real process, killed mid-way and run again), then every export."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import checkpoint_count, group_alive, owned_groups
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.formats import FORMATS
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.nodes.resources import Resources

RECORDS = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
# docs/exports.md's offline example names no --name: run ids are <data file's name>-<record id>-s<k>.
RUN_IDS = [f"records-{group}-s{k}" for k in range(3) for group in ("recipes", "habits")]
FAILING = "records-habits-s0"  # its Refiner turn meets the scripted HTTP 500s (see the scenario)
CLI = str(Path(sys.executable).parent / "webgen-agent")
ROOT = Path(__file__).resolve().parents[1]  # the documented commands name files relative to it
EXPORTS_DOC = ROOT / "docs" / "exports.md"
DOC_DIR, DOC_PORT = "/tmp/", "8011"  # what the documented commands use, replaced by the test's own


def documented_example() -> list[list[str]]:
    """The commands of docs/exports.md's offline example, each as its argv (comments, line
    continuations and a trailing ``&`` removed): what the story below runs, so the doc cannot drift."""
    text = EXPORTS_DOC.read_text()
    section = text[text.index("## Offline example") :]
    block = section[section.index("```bash") + len("```bash") : section.index("```", section.index("```bash") + 7)]
    commands: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[-1] == "&":
            words.pop()
        if words:
            commands.append(words)
    return commands


def as_run_here(words: list[str], base: Path, db: str, base_url: str) -> list[str]:
    """A documented command with only its places swapped for the test's: the CLI of this checkout,
    the test's folder for /tmp, its database and the scripted server's address."""
    assert words[0] == "webgen-agent", words
    swapped = [CLI]
    for word in words[1:]:
        if word == f"{DOC_DIR}rollout.db":
            word = db
        elif word == f"http://127.0.0.1:{DOC_PORT}/v1":
            word = base_url
        elif word.startswith(DOC_DIR):
            word = str(base / word[len(DOC_DIR) :])
        swapped.append(word)
    return swapped


@dataclass
class RolloutStory:
    """What the tests look at: the database, the request log and what was seen during the run."""

    base: Path
    db: str
    coder_requests: list[list[dict[str, Any]]]
    max_running: int = 0
    max_browsers: int = 0
    killed_groups: list[int] = field(default_factory=list)  # process groups the killed rollout left
    before_kill: dict[str, RunRecord] = field(default_factory=dict)
    finished_before: dict[str, tuple[int, float]] = field(default_factory=dict)  # run -> (checkpoints, updated)
    checkpoints_before: dict[str, int] = field(default_factory=dict)
    after: dict[str, RunRecord] = field(default_factory=dict)
    rerun_output: str = ""
    rerun_code: int = 0
    export_output: str = ""
    exports: dict[str, Path] = field(default_factory=dict)


def shared_browsers(pid: int) -> int:
    """Chromium browsers (not their helpers) under the rollout process, told apart by profile.

    A helper Chromium is forking carries the browser's command line until it execs, so counting
    processes would now and then see two; distinct ``--user-data-dir`` values are distinct browsers.
    """
    profiles: set[str] = set()
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if any(a == "--remote-debugging-pipe" for a in argv) and not any(a.startswith("--type=") for a in argv):
            profiles.update(a for a in argv if a.startswith("--user-data-dir="))
    return len(profiles)


def run_until_mid_way(story: RolloutStory, command: list[str], env: dict[str, str]) -> None:
    """Run the rollout until one trajectory failed, one finished and others run; then kill -9 it."""
    log = (story.base / "first-run.log").open("w")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 240
    try:
        while True:
            assert proc.poll() is None, (story.base / "first-run.log").read_text()
            assert time.monotonic() < deadline, "the rollout never reached the kill point"
            records = RunIndex(story.db).list() if Database.of(story.db).exists() else []
            statuses = [r.status for r in records]
            story.max_running = max(story.max_running, statuses.count("running"))
            story.max_browsers = max(story.max_browsers, shared_browsers(proc.pid))
            if "failed" in statuses and "finished" in statuses and "running" in statuses:
                break
            time.sleep(0.1)
    finally:
        # What the rollout had running when it was killed (its servers and browser).
        story.killed_groups = [g for g in owned_groups(story.db, proc.pid) if group_alive(g)]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()


def tell_story(base: Path, db: str, chromium_path: str) -> RolloutStory:
    """Run the documented rollout (killed mid-way, then run again) and every export, into ``base``."""
    coder_requests: list[list[dict[str, Any]]] = []
    lock = threading.Lock()
    original = scripted_server.request_facts

    def recording(body: dict[str, Any]):  # the server's request log holds no messages: keep them here
        if body.get("model") == "scripted-coder":
            with lock:
                coder_requests.append(body["messages"])
        return original(body)

    patch = pytest.MonkeyPatch()
    patch.setattr(scripted_server, "request_facts", recording)
    story = RolloutStory(base=base, db=db, coder_requests=coder_requests)
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    server_words, rollout_words, export_words = documented_example()
    assert server_words == [
        "webgen-agent", "scripted-server", "--scenario", "apps/scripted/scenarios/rollout.json", "--port", DOC_PORT
    ]  # fmt: skip
    try:
        # The documented server, in this process so that its requests can be recorded.
        with ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
            command = as_run_here(rollout_words, base, story.db, server.base_url)
            # The first run gives up on the coder's scripted HTTP 500s at once (no patience) and is
            # killed mid-way; the documented command, run as written, continues and finishes it.
            run_until_mid_way(story, [*command, "--patience", "0"], env)
            story.before_kill = {r.run_id: r for r in RunIndex(story.db).list()}
            story.checkpoints_before = {run_id: checkpoint_count(story.db, run_id) for run_id in story.before_kill}
            story.finished_before = {
                r.run_id: (checkpoint_count(story.db, r.run_id), r.updated_at)
                for r in story.before_kill.values()
                if r.status == "finished"
            }
            rerun = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
            story.rerun_output, story.rerun_code = rerun.stdout + rerun.stderr, rerun.returncode
        story.after = {r.run_id: r for r in RunIndex(story.db).list()}
        for export_format in FORMATS:  # every registered format (step-grpo: through the CLI, below)
            if export_format == "step-grpo":
                continue
            parquet = export_format == "verl"
            out = base / f"{export_format}.{'parquet' if parquet else 'jsonl'}"
            asyncio.run(export_trajectories(export_format, out, db_path=story.db, parquet=parquet))
            story.exports[export_format] = out
        exported = subprocess.run(  # the documented export, through the CLI
            as_run_here(export_words, base, story.db, base_url=""),
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        story.export_output = exported.stdout + exported.stderr
        assert exported.returncode == 0, story.export_output
        story.exports["step-grpo"] = base / "steps.jsonl"
    finally:
        patch.undo()
        Resources.reap_orphans(story.db)  # whatever a failed rerun left behind
    return story


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
