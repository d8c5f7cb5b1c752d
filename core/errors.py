"""Errors every layer raises, free of pydantic: modules the command line imports when it starts
(the run database, the runs table) raise them without importing the settings models."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is missing or wrong; the message is one line meant for the user."""


class ResumableStop(RuntimeError):
    """The machine, not the run, cannot go on (its database, its disk): the run stops resumable. One line."""


class DatabaseUnavailable(ResumableStop):
    """The run database stayed unreachable for the whole patience."""


class DiskFull(ResumableStop):
    """A disk the run writes to (its runs folder, its database) is full."""


# What ``no_space`` names when the PostgreSQL server refused a write for want of space on its disk.
POSTGRES_SERVER = "the PostgreSQL server"


def no_space(exc: BaseException | None) -> str | None:
    """What filled up, when ``exc`` (or an error it was raised from or during) says a disk is full:
    the file the OS refused (ENOSPC, EDQUOT), "the SQLite database", or "the PostgreSQL server"."""
    import errno
    import sqlite3

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(exc.filename or "a file")
        if isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc):
            return "the SQLite database"
        if getattr(exc, "sqlstate", None) == "53100":  # PostgreSQL's disk_full
            return POSTGRES_SERVER
        exc = exc.__cause__ or exc.__context__
    return None
