"""How long the command line takes to start: ``--help`` and the read commands' help.

Each command runs in a fresh process; the figure is the median wall time (and the peak memory) of
``python -m webgen_agent ...`` over a few runs. Target: 0.3 s for ``--help``, ``runs``, ``history``,
``report`` (issue of the first hour; docs/performance.md). Run: .venv/bin/python -m benchmarks.cli_start
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks.common import median, run_main, sized

COMMANDS = {
    "help": ["--help"],
    "runs": ["runs", "--help"],
    "history": ["history", "--help"],
    "report": ["report", "--help"],
}
RUNS = sized(7, 1)


def _start(argv: list[str]) -> tuple[float, float]:
    """Seconds and peak MB of one ``webgen-agent`` process."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "webgen_agent", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"webgen-agent {' '.join(argv)} exited {process.returncode}")
    return seconds, usage.ru_maxrss / 1024


async def main() -> dict[str, float]:
    figures: dict[str, float] = {}
    for name, argv in COMMANDS.items():
        samples = [_start(argv) for _ in range(RUNS)]
        figures[f"{name}_s"] = median(s for s, _ in samples)
        figures[f"{name}_mb"] = median(mb for _, mb in samples)
        print(
            f"webgen-agent {' '.join(argv)}: {figures[f'{name}_s']:.2f} s, {figures[f'{name}_mb']:.0f} MB", flush=True
        )
    return figures


if __name__ == "__main__":
    run_main(main)
