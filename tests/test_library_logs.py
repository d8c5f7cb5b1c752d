"""Libraries' log records (asyncio's "Future exception was never retrieved", browser-use's coloured
lines) go to the run's log file, not to the terminal: the terminal gets one line saying where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# A process that drives "a run" the way the CLI does: library_logs(run folder), then the work, in
# run_async. The work leaves a future's exception unretrieved, which asyncio logs when the future is
# collected, and browser-use's logger writes a coloured warning, as it does on a failed navigation.
_RUN = """
import asyncio, gc, logging, sys
from webgen_agent.apps.cli.base import run_async
from webgen_agent.apps.cli.library_logs import library_logs

async def work():
    future = asyncio.get_running_loop().create_future()
    future.set_exception(ConnectionResetError("the browser went away"))
    del future
    gc.collect()
    logging.getLogger("browser_use").warning("\\x1b[31mNavigation failed\\x1b[0m: net::ERR_ABORTED")

library_logs(sys.argv[1])
run_async(work())
"""


@pytest.mark.e2e  # a process of its own: the last-resort handler is process-wide
def test_library_noise_goes_to_the_run_log_not_the_terminal(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "logs" / "libraries.log").read_text()
    assert "Future exception was never retrieved" in log and "ConnectionResetError" in log
    assert "Navigation failed: net::ERR_ABORTED" in log and "\x1b[" not in log
    assert done.stderr.strip().splitlines() == [
        f"note: 2 warning(s) of the libraries (browser, HTTP, asyncio) are in {tmp_path / 'logs' / 'libraries.log'}"
    ], done.stderr
