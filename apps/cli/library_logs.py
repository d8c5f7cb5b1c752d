"""Third-party libraries' log records go to the run's log file, not to the terminal.

browser-use's reconnect tracebacks, asyncio's "Future exception was never retrieved" and coloured
"Navigation failed" lines reached the terminal through logging's last-resort handler (nothing
configured logging, so Python prints every warning to stderr). A command that drives a run sends
them to ``<run folder>/logs/libraries.log`` instead, for the rest of the process (asyncio reports
unretrieved futures when they are collected, possibly after the run), and says in one line at the end
how many there were and where. The same count, by library, becomes one of the run's warnings in
run.json (``history`` shows it), so a run whose browser kept reconnecting says so after the terminal
is gone. The agent's own findings are never logged: they are in run.json.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from collections.abc import Iterator
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
        self.by_library: Counter[str] = Counter()  # the top-level logger name: browser_use, asyncio, httpx

    def format(self, record: logging.LogRecord) -> str:
        return _ANSI.sub("", super().format(record))

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.by_library[record.name.split(".")[0] or "root"] += 1
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


# run.json's library warning starts so (one per run: a resume's replaces the last one's).
WARNING_START = "the libraries logged "


def library_warning(handler: _PlainFile) -> str:
    """The run's warning: how many records, from which libraries, and the file that holds them."""
    libraries = ", ".join(f"{name} {count}" for name, count in handler.by_library.most_common())
    return f"{WARNING_START}{handler.count} warning(s) ({libraries}); they are in {handler.baseFilename}"


def report_library_logs() -> None:
    """When libraries logged anything during the run: one line on the terminal (how many, and where)
    and one warning in the run's run.json (how many of which library, and where)."""
    from webgen_agent.checkpoints.outputs import add_run_warning

    if _handler is not None and _handler.count:
        errors.print(
            f"note: {_handler.count} warning(s) of the libraries (browser, HTTP, asyncio) are in {_handler.baseFilename}",
            soft_wrap=True,
            highlight=False,
        )
        add_run_warning(Path(_handler.baseFilename).parent.parent, library_warning(_handler), replacing=WARNING_START)
        # Told once: a later command in the same process (an embedding app, a test's CLI runner) reports
        # only what was logged after this, never this run's records again.
        _handler.count = 0
        _handler.by_library.clear()


@contextlib.contextmanager
def library_logs_kept(folder: str | Path) -> Iterator[Path]:
    """For a command that drives many runs (rollout, bench): the libraries' records go to
    ``<folder>/logs/libraries.log`` while the block runs, and are reported in one line at its end."""
    path = library_logs(folder)
    try:
        yield path
    finally:
        report_library_logs()


def recorded_library_warning(out_dir: str | Path) -> str | None:
    """The library warning the run in ``out_dir`` recorded in its run.json, if any (for ``history``)."""
    from webgen_agent.checkpoints.outputs import run_warnings

    return next((w for w in run_warnings(out_dir) if w.startswith(WARNING_START)), None)
