"""How long the command line takes to start: ``--help``, the read commands' help, and ``history``
and ``report`` of a real recorded run (the offline demo's, recorded first).

Each command runs in a fresh process; the figures are the medians of its wall time, its CPU time
(user + system: what the process itself did, less moved by other work on a shared machine) and its
peak memory over a few runs of ``python -m webgen_agent ...``. Target: 0.3 s for ``--help``, ``runs``, ``history``,
``report`` (issue of the first hour; docs/performance.md). Run: .venv/bin/python -m benchmarks.cli_start
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import median, run_main, sized

COMMANDS = {
    "help": ["--help"],
    "runs": ["runs", "--help"],
    "history": ["history", "--help"],
    "report": ["report", "--help"],
    "run": ["run", "--help"],
}
RUNS = sized(7, 1)


def _start(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak MB of one ``webgen-agent`` process."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "webgen_agent", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"webgen-agent {' '.join(argv)} exited {process.returncode}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _empty_database(folder: Path) -> str:
    """An SQLite run database with its tables and no runs (what ``runs`` reads on a fresh machine).

    Made in a process of its own: a child forked from this one after the agent was imported here
    would start with this process's memory, and its peak would count it."""
    path = folder / "webgen.db"
    make = (
        "import sys\n"
        "from webgen_agent.checkpoints.database import Database\n"
        "from webgen_agent.checkpoints.runs import RunIndex\n"
        "RunIndex(Database.of(sys.argv[1])).list()\n"
    )
    subprocess.run([sys.executable, "-c", make, str(path)], check=True)
    return str(path)


def _recorded_run(folder: Path) -> tuple[str, str]:
    """(run id, database) of the offline demo's run, recorded in a process of its own (as above)."""
    database = folder / "demo.db"
    record = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from webgen_agent.apps.demo import run_demo\n"
        "result = asyncio.run(run_demo(out_dir=Path(sys.argv[1]), db_path=sys.argv[2]))\n"
        "assert result.status == 'finished', result.status\n"
        "print(result.run_id)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", record, str(folder / "demo"), str(database)], check=True, capture_output=True, text=True
    )
    return done.stdout.split()[-1], str(database)


def _read_commands(folder: Path) -> dict[str, list[str]]:
    """``runs`` on an empty database, ``history`` and ``report`` of a recorded run."""
    run_id, database = _recorded_run(folder)
    return {
        "runs_listing": ["runs", "--db", _empty_database(folder)],
        "history_run": ["history", run_id, "--db", database],
        "report_run": ["report", run_id, "--db", database, "--out", str(folder / "report.html")],
    }


async def main() -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="cli-start-") as folder:
        commands = {**COMMANDS, **_read_commands(Path(folder))}
        for name, argv in commands.items():
            samples = [_start(argv) for _ in range(RUNS)]
            figures[f"{name}_s"] = median(s for s, _, _ in samples)
            figures[f"{name}_cpu_s"] = median(cpu for _, cpu, _ in samples)
            figures[f"{name}_mb"] = median(mb for _, _, mb in samples)
            print(
                f"webgen-agent {' '.join(argv)}: {figures[f'{name}_s']:.2f} s "
                f"(CPU {figures[f'{name}_cpu_s']:.2f} s), {figures[f'{name}_mb']:.0f} MB",
                flush=True,
            )
    return figures


if __name__ == "__main__":
    run_main(main)
