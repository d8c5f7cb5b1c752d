"""Daemons that generated code starts, against the agent being stopped: nothing outlives its phase,
its run, or a SIGTERM to the agent.

An install script and a dev script each start a detached daemon (its own session, stdio closed,
``unref``), the way a process meant to survive its parent does. The run is the real CLI as a
process with the scripted model server; the host's process table is what is checked. This pins
behaviour that holds (the sandbox's PID namespace ends with its first process, and bwrap dies
with the agent: ``--die-with-parent``); kill -9 of the agent is pinned in tests/test_resume.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from tests.helpers import scripted_models
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.tools.sandbox import sandbox_problem

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]


# spawn.js TAG starts daemon.js TAG detached (its own session, stdio closed, unref'd) and returns
# once it runs;
# the daemon leaves TAG.started in the workspace, so that the test knows it ran.
SPAWN_JS = (
    "const fs = require('fs'), tag = process.argv[2];"
    "require('child_process').spawn(process.execPath, ['daemon.js', tag], {detached: true, stdio: 'ignore'}).unref();"
    "const wait = setInterval(() => { if (fs.existsSync(tag + '.started')) clearInterval(wait); }, 50);"
)
DAEMON_JS = "require('fs').writeFileSync(process.argv[2] + '.started', '1'); setInterval(() => {}, 1000);"


def _with(tag: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and tag in " ".join(proc.info["cmdline"] or []):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def _wait_for(check, timeout_s: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert proc.poll() is None, f"the run ended before {what}: {proc.stdout.read() if proc.stdout else ''}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        time.sleep(0.1)


def test_no_daemon_outlives_its_phase_its_run_or_a_sigterm_to_the_agent(tmp_path, chromium_path):
    tag = uuid.uuid4().hex[:10]
    install_tag, server_tag = f"webgen-daemon-install-{tag}", f"webgen-daemon-server-{tag}"
    server_js = (
        "require('http').createServer((q, s) => s.end('<h1>Served</h1>'))"
        ".listen(Number(process.env.PORT), '127.0.0.1');"
    )
    package = {
        "name": "daemons",
        "private": True,
        "scripts": {
            "postinstall": f"node spawn.js {install_tag}",
            "dev": f"node spawn.js {server_tag} && node server.js",
        },
    }
    reply = (
        '<boltArtifact id="d" title="d">'
        f'<boltAction type="file" filePath="package.json">{json.dumps(package)}</boltAction>'
        f'<boltAction type="file" filePath="server.js">{server_js}</boltAction>'
        f'<boltAction type="file" filePath="spawn.js">{SPAWN_JS}</boltAction>'
        f'<boltAction type="file" filePath="daemon.js">{DAEMON_JS}</boltAction>'
        "</boltArtifact>"
    )
    rules = [
        {"model": "scripted-coder", "turn": 0, "content": reply},
        {"model": "scripted-coder", "content": "No change."},
        {
            "model": "scripted-vlm",
            "schema": "ScreenshotJudgement",
            "json": {"description": "A page.", "score": 2, "suggestions": ["More."]},
        },
        {"model": "scripted-feedback", "schema": "Critique", "json": {"checks": [], "diagnosis": "-", "plan": ["-"]}},
        {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Look."}},
    ]
    scenario = Scenario.model_validate({"name": "daemons", "rules": rules})
    env = {**os.environ, "WEBGEN_DB": str(tmp_path / "webgen.db")}
    with ScriptedServer(scenario) as server:
        args = ["run", "A page.", *scripted_models(server.base_url), "--run-id", "daemons", "--max-steps", "20"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "webgen_agent", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            # The dev server's daemon is up: the install (an earlier phase) has ended, and its daemon with it.
            _wait_for(lambda: _with(server_tag), 240, "the dev server's daemon", proc)
            assert list(tmp_path.rglob(f"{install_tag}.started")), "the install script's daemon never ran"
            assert _with(install_tag) == [], "the install script's daemon outlived the install"
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + 15
        while _with(tag) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _with(tag)
        for pid in left:  # never leave them running, whatever the verdict
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        assert left == [], "a daemon outlived the agent's SIGTERM"
