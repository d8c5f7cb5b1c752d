"""Third-party libraries' log records go to the run's log file, not to the terminal.

browser-use's reconnect tracebacks, asyncio's "Future exception was never retrieved" and coloured
"Navigation failed" lines reached the terminal through logging's last-resort handler (nothing
configured logging, so Python prints every warning to stderr). A command that drives a run sends
them to ``<run folder>/logs/libraries.log`` instead, for the rest of the process (asyncio reports
unretrieved futures when they are collected, possibly after the run), and says in one line at the end
how many there were and where. The agent's own findings are never logged: they are in run.json.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from webgen_agent.apps.cli.base import errors

LOG_NAME = "libraries.log"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _PlainFile(logging.FileHandler):
    """A log file without terminal colour codes, counting what it wrote."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.count = 0

    def format(self, record: logging.LogRecord) -> str:
        return _ANSI.sub("", super().format(record))

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        super().emit(record)


_handler: _PlainFile | None = None


def library_logs(run_folder: str | Path) -> Path:
    """Send every log record of WARNING and above to the run's library log; returns its path."""
    global _handler  # one per process: a command drives one run
    path = Path(run_folder) / "logs" / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
    _handler = _PlainFile(path)
    _handler.setLevel(logging.WARNING)
    root.addHandler(_handler)  # with a handler on the root logger, the last-resort one stays silent
    return path


def say_library_logs() -> None:
    """One line when libraries logged anything during the run: how many records, and where."""
    if _handler is not None and _handler.count:
        errors.print(
            f"note: {_handler.count} warning(s) of the libraries (browser, HTTP, asyncio) are in {_handler.baseFilename}",
            soft_wrap=True,
            highlight=False,
        )
