"""Libraries' log records (asyncio's "Future exception was never retrieved", browser-use's coloured
lines) go to the run's log file, not to the terminal: the terminal gets one line saying where, and
the run's run.json one warning (how many of which library, and where) that ``history`` shows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import save_finished_run
from webgen_agent.apps.cli.main import app
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer

# A process that drives "a run" the way the CLI does: library_logs(run folder), then the work, in
# run_async. The work leaves a future's exception unretrieved, which asyncio logs when the future is
# collected, and browser-use's logger writes a coloured warning, as it does on a failed navigation.
_RUN = """
import asyncio, gc, logging, sys
from pathlib import Path
from webgen_agent.apps.cli.base import run_async
from webgen_agent.apps.cli.library_logs import library_logs
from webgen_agent.checkpoints.outputs import write_run_outputs

async def work():
    # The run writes its run.json (with the host's warnings) before the command reports the noise.
    write_run_outputs(Path(sys.argv[1]), {"run_id": "noisy", "requirement": "A", "steps": []}, None,
                      warnings=["generated code ran unconfined"], status="finished")
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


async def _record_run(db: Path, out_dir: Path) -> None:
    values = {"run_id": "noisy", "group_id": "", "requirement": "A", "profile": "default", "steps": []}
    async with open_checkpointer(db) as saver:
        await save_finished_run(saver, RunIndex(db), values, steps=0, out_dir=str(out_dir))


@pytest.mark.e2e  # a process of its own, as above
def test_library_noise_is_a_warning_of_the_run_and_history_shows_it(tmp_path: Path) -> None:
    run_folder = tmp_path / "noisy"
    done = subprocess.run([sys.executable, "-c", _RUN, str(run_folder)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    log = run_folder / "logs" / "libraries.log"
    said = f"the libraries logged 2 warning(s) (asyncio 1, browser_use 1); they are in {log}"
    warnings = json.loads((run_folder / "run.json").read_text())["warnings"]
    assert warnings == ["generated code ran unconfined", said]

    db = tmp_path / "runs.db"
    asyncio.run(_record_run(db, run_folder))
    shown = CliRunner().invoke(app, ["history", "noisy", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert f"warning: {said}" in " ".join(shown.output.split())


def test_a_later_command_in_the_same_process_does_not_report_a_runs_library_logs_again(tmp_path: Path, capsys) -> None:
    # An embedding app (or a CLI runner) drives a run, then another command: the first run's library
    # records are told once, with that run, never again under the next command.
    import logging

    from webgen_agent.apps.cli.library_logs import library_logs, report_library_logs

    library_logs(tmp_path / "run")
    logging.getLogger("browser_use").warning("Navigation failed")
    report_library_logs()
    assert "note: 1 warning(s) of the libraries" in capsys.readouterr().err
    report_library_logs()  # the next command, which logged nothing
    assert "warning(s) of the libraries" not in capsys.readouterr().err
