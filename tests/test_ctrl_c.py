"""Ctrl-C stops a run even when something under the graph swallows the cancellation it causes
(apps/ctrl_c.py): the run's next progress event stops it, and the command exits 130 saying how to
continue. The whole path through a real run and its servers: tests/test_checkpoints.py."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import typer
from rich.console import Console

from tests.helpers import ctrl_c_as_in_a_terminal
from webgen_agent.apps.cli.base import run_async
from webgen_agent.apps.review import run_with_review


def test_a_run_that_swallowed_its_cancellation_stops_at_its_next_progress_event() -> None:
    went_on: list[int] = []

    async def start(on_event: Any, reviewer: Any) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # a library below the graph lost the cancellation
        for step in range(3):
            on_event({"node": "executor", "step": step, "phase": "start"})
            went_on.append(step)
        return "finished"

    async def ctrl_c_during(work: Any) -> Any:
        asyncio.get_running_loop().call_later(0.2, os.kill, os.getpid(), signal.SIGINT)
        return await work

    console = Console(file=io.StringIO())
    with ctrl_c_as_in_a_terminal(), pytest.raises(typer.Exit) as stopped:
        run_async(ctrl_c_during(run_with_review(console, "run r", start)), run_id="r")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the command put it back
    assert stopped.value.exit_code == 130 and went_on == []


def test_a_command_started_as_in_a_terminal_handles_ctrl_c_even_when_the_suite_ignores_it() -> None:
    """The cause of a Ctrl-C "lost" in some full suite runs (tests/test_checkpoints.py): a suite started
    as a background job ignores Ctrl-C, and the CLI it started inherited that and kept ignoring it."""
    sigint = (
        "import signal; print({signal.SIG_IGN: 'ignored', signal.default_int_handler: 'handled'}[signal.getsignal(2)])"
    )
    command = [sys.executable, "-c", sigint]
    outside = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `pytest ... &` in a script starts the suite
    try:
        inherited = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        with ctrl_c_as_in_a_terminal():
            from_a_terminal = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the suite's own, put back
    finally:
        signal.signal(signal.SIGINT, outside)
    assert inherited.strip() == "ignored"  # what the CLI got: its Ctrl-C never reached it
    assert from_a_terminal.strip() == "handled"
