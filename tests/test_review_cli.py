"""``webgen-agent run --review ...`` as a real process: answers come on stdin, a run left waiting
survives its process (also a kill -9 while it waits), and ``resume`` asks again."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import scripted_models
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex

pytestmark = pytest.mark.e2e

NOTE = "Use a green Add button."


def _cli(server: ScriptedServer, db: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "webgen_agent",
        *args,
        *scripted_models(server.base_url),
        "--db",
        str(db),
    ]


def _run_args(tmp_path: Path, run_id: str) -> list[str]:
    # Two steps: step 0 fails to render, the critic's feedback is reviewed, the refiner writes step 1.
    return ["run", DEMO_REQUIREMENT, "--run-id", run_id, "--out", str(tmp_path / run_id), "--max-steps", "2"]


def _env(chromium_path: str) -> dict[str, str]:
    return {**os.environ, "WEBGEN_CHROMIUM": chromium_path}


def test_answers_on_stdin_reach_the_refiner(tmp_path: Path, chromium_path: str, vite_template) -> None:
    db = tmp_path / "webgen.db"
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        done = subprocess.run(
            _cli(server, db, *_run_args(tmp_path, "s"), "--review", "critique"),
            input=f"sure\nnote {NOTE}\n",
            capture_output=True,
            text=True,
            env=_env(chromium_path),
            timeout=400,
        )
        prompts = [r.last_user_text for r in server.requests if r.model == "scripted-coder"]
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "review: critique (step 0)" in output and "Fix the render error first" in output
    assert "cannot read the answer 'sure'" in output  # a bad line is refused and the next one read
    assert len(prompts) == 2 and prompts[1].rstrip().endswith(f"Note from the reviewer: {NOTE}")
    assert RunIndex(db).get("s").status == "finished"


def test_waiting_run_survives_its_process_and_resume_asks_again(
    tmp_path: Path, chromium_path: str, vite_template
) -> None:
    db = tmp_path / "webgen.db"
    env = _env(chromium_path)
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        # Nobody to answer (stdin at its end): the command says how to go on and does not wait.
        first = subprocess.run(
            _cli(server, db, *_run_args(tmp_path, "w"), "--review", "critique"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
        )
        assert first.returncode == 3, first.stdout + first.stderr
        assert "run w waits for review at critique (step 0); answer with `webgen-agent resume w`" in first.stderr
        assert RunIndex(db).get("w").status == "review"

        # resume asks again; the process is killed while it waits for the answer.
        log = tmp_path / "resume.log"
        with open(log, "w") as out:
            waiting = subprocess.Popen(
                _cli(server, db, "resume", "w"), stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + 120
        while "answer (approve" not in log.read_text():
            assert waiting.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert "review: critique (step 0)" in log.read_text()
        os.kill(waiting.pid, signal.SIGKILL)
        waiting.wait()
        assert RunIndex(db).get("w").status == "review"  # still waiting, not "interrupted"

        last = subprocess.run(
            _cli(server, db, "resume", "w"),
            input=f"note {NOTE}\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
        )
        turns = Counter(r.turn for r in server.requests if r.model == "scripted-coder")
        refiner_prompt = [r.last_user_text for r in server.requests if r.model == "scripted-coder"][-1]
    assert last.returncode == 0, last.stdout + last.stderr
    assert "review: critique (step 0)" in last.stdout
    assert RunIndex(db).get("w").status == "finished"
    assert turns == {0: 1, 1: 1}, "no coder call repeated over three processes"
    assert refiner_prompt.rstrip().endswith(f"Note from the reviewer: {NOTE}")


def test_bad_flags_are_one_line_errors(tmp_path: Path) -> None:
    db = tmp_path / "webgen.db"
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        bad_point = subprocess.run(
            _cli(server, db, *_run_args(tmp_path, "b"), "--review", "critique,deploy"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        bad_answer = subprocess.run(
            _cli(server, db, "resume", "b", "--answer", '{"action": "maybe"}'),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert bad_point.returncode == 2
    assert "--review: unknown review point 'deploy' (choose from plan, critique, shell, finalize)" in bad_point.stderr
    assert bad_answer.returncode == 2
    assert "--answer: invalid review answer" in bad_answer.stderr and "action" in bad_answer.stderr


def _read_until(fd: int, wanted: bytes, seen: bytearray, timeout_s: float = 300) -> None:
    """Read the terminal's output into ``seen`` until ``wanted`` shows (after what was already seen)."""
    start = len(seen)
    deadline = time.monotonic() + timeout_s
    while wanted not in seen[start:]:
        assert time.monotonic() < deadline, f"no {wanted!r} in:\n{seen[start:].decode(errors='replace')[-3000:]}"
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the process closed the terminal
                chunk = b""
            assert chunk, f"the process ended before {wanted!r}:\n{seen.decode(errors='replace')[-3000:]}"
            seen += chunk


def _drain(fd: int, seen: bytearray) -> None:
    """Read the terminal until the process closes it."""
    while True:
        ready, _, _ = select.select([fd], [], [], 60.0)
        if not ready:
            return
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        seen += chunk


def test_terminal_prompt(tmp_path: Path, chromium_path: str, vite_template) -> None:
    """On a terminal (a pseudo-terminal here) the reviewer picks from a prompt, then types the note."""
    db = tmp_path / "webgen.db"
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        controller, terminal = pty.openpty()
        proc = subprocess.Popen(
            _cli(server, db, *_run_args(tmp_path, "t"), "--review", "critique"),
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env={**_env(chromium_path), "COLUMNS": "160", "LINES": "50"},
        )
        os.close(terminal)
        seen = bytearray()
        try:
            _read_until(controller, b"approve / edit / note / reject", seen)
            os.write(controller, b"note\n")
            _read_until(controller, b"note:", seen)
            os.write(controller, f"{NOTE}\n".encode())
            _read_until(controller, b"output folder:", seen)  # keep reading: a full terminal blocks its writer
            _drain(controller, seen)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            os.close(controller)
        prompts = [r.last_user_text for r in server.requests if r.model == "scripted-coder"]
    assert proc.returncode == 0, seen.decode(errors="replace")[-3000:]
    assert b"review: critique (step 0)" in seen
    assert len(prompts) == 2 and prompts[1].rstrip().endswith(f"Note from the reviewer: {NOTE}")
