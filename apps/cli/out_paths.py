"""Output paths checked before a command spends anything: ``run --out``, ``export``/``ship``/``report --out``.

A folder or file the command could not write is one line (exit 2) before any model is asked or any
run recorded, instead of a traceback at the end. Whether a folder takes files is asked of the file
system itself (a temporary folder made and removed at once): permission bits say nothing to root, and
nothing in /proc or on a read-only mount can be written whatever they say. Nothing is left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from webgen_agent.apps.cli.base import fail


def _nearest_existing(path: Path) -> Path:
    return next((parent for parent in (path, *path.parents) if parent.exists()), Path("/"))


def _cannot_write_in(folder: Path) -> str | None:
    """Why nothing can be written in ``folder`` (an existing one), or None."""
    try:
        probe = tempfile.mkdtemp(prefix=".webgen-write-check-", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    shutil.rmtree(probe, ignore_errors=True)
    return None


def _folder_problem(folder: Path) -> str | None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    reason = _cannot_write_in(existing)
    if reason is not None:
        return f"cannot write in {existing} ({reason.lower()})"
    return None


def check_out_folder(path: Path, flag: str = "--out") -> None:
    """The folder a command will write into (made if missing) can be made and written; one line otherwise."""
    path = Path(os.path.abspath(path.expanduser()))
    problem = _folder_problem(path)
    if problem is not None:
        fail(f"{flag} {path}: {problem} (pass {flag} with a folder you can write)")


def check_out_file(path: Path, flag: str = "--out") -> None:
    """The file a command will write can be written (its folder made if missing); one line otherwise."""
    path = Path(os.path.abspath(path.expanduser()))
    if path.is_dir():
        fail(f"{flag} {path}: is a folder (pass {flag} with a file name)")
    problem = _folder_problem(path.parent)
    if problem is None and path.exists() and not os.access(path, os.W_OK):
        problem = "the file is not writable"
    if problem is not None:
        fail(f"{flag} {path}: {problem} (pass {flag} with a file in a folder you can write)")
