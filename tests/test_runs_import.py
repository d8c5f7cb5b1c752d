"""Runs of one server read the runs table from several threads at once: each gets the whole
sqlite-utils module (it is imported on first use, without pandas; checkpoints/runs.py)."""

from __future__ import annotations

import sys
import threading

import pytest

from webgen_agent.checkpoints import runs


def test_threads_reading_the_runs_table_at_once_all_get_sqlite_utils(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "sqlite_utils" or n.startswith("sqlite_utils.")]:
        monkeypatch.delitem(sys.modules, name)  # as in a fresh server process; put back afterwards
    start = threading.Barrier(16)
    found: list[object] = []
    failed: list[BaseException] = []

    def read() -> None:
        start.wait()
        try:
            found.append(runs.sqlite_utils().Database)
        except Exception as exc:  # the half-made module: AttributeError
            failed.append(exc)

    threads = [threading.Thread(target=read) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [] and len(found) == 16, failed
