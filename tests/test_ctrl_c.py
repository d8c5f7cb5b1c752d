"""Ctrl-C stops a run even when something under the graph swallows the cancellation it causes
(apps/ctrl_c.py): the run's next progress event stops it, and the command exits 130 saying how to
continue. The whole path through a real run and its servers: tests/test_checkpoints.py."""

from __future__ import annotations

import asyncio
import io
import os
import signal
from typing import Any

import pytest
import typer
from rich.console import Console

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
    # As in a terminal (a pytest-xdist worker ignores Ctrl-C).
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(typer.Exit) as stopped:
            run_async(ctrl_c_during(run_with_review(console, "run r", start)), run_id="r")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the command put it back
    finally:
        signal.signal(signal.SIGINT, outside)
    assert stopped.value.exit_code == 130 and went_on == []
