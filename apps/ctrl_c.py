"""Ctrl-C stops a run, even when something under it swallows the cancellation Ctrl-C causes.

asyncio's own handler cancels the main task once. A cancellation lost below the graph (Python 3.11's
``asyncio.wait_for`` can drop one that lands as its inner call completes) would let the run go on;
so after Ctrl-C the run's next progress event stops it (``check``). Cancelling again on a timer
would also cut short the clean-up a cancelled run does (stopping its servers). A second Ctrl-C stops
at once, as asyncio's does.

A process started with Ctrl-C ignored (a shell's background job without job control: ``cmd &`` in a
script) keeps ignoring it, as asyncio's handler leaves it: no Ctrl-C reaches this one. That was the
Ctrl-C "lost" in some full suite runs: the suite had been started so, and the run its test started
inherited it (tests/helpers.py, ``ctrl_c_as_in_a_terminal``; docs/cli.md).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_pressed = threading.Event()


def pressed() -> bool:
    """Whether Ctrl-C was pressed during the command's run."""
    return _pressed.is_set()


def check() -> None:
    """Called as a run reports progress: after Ctrl-C, the run goes no further."""
    if _pressed.is_set():
        raise asyncio.CancelledError("Ctrl-C")


def checked(on_event: Callable[[Any], None]) -> Callable[[Any], None]:
    """``on_event`` that first ``check``s."""

    def on_checked_event(event: Any) -> None:
        check()
        on_event(event)

    return on_checked_event


async def stopped_by_ctrl_c(work: Awaitable[T]) -> T:
    """``await work``; Ctrl-C cancels it (once: ``check`` stops a run that goes on anyway)."""
    _pressed.clear()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigint(signum: int, frame: Any) -> None:
        if _pressed.is_set():
            raise KeyboardInterrupt  # the second Ctrl-C: at once
        _pressed.set()
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    if threading.current_thread() is not threading.main_thread() or (signal.getsignal(signal.SIGINT) is signal.SIG_IGN):
        # Signals reach the main thread only; and a process started with Ctrl-C ignored (a background
        # job) keeps ignoring it, as asyncio's own handler leaves it.
        return await work
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return await work
    finally:
        signal.signal(signal.SIGINT, previous)
