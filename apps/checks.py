"""What a check of ``webgen-agent doctor`` finds, and the database check, in a module of their own:
the commands that read runs check their database with it, without importing the model clients the
other checks need (``apps/doctor.py``; docs/performance.md, "Command-line start")."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.names import DEFAULT_DB

DATABASE_TIMEOUT_S = 5


@dataclass(frozen=True)
class Check:
    """One thing a run needs, and whether this machine has it. A dataclass: the read commands check
    their database with it without importing pydantic (docs/performance.md, "Command-line start")."""

    name: str  # what was checked, e.g. 'coder endpoint'
    ok: bool
    detail: str = ""  # what was found
    fix: str = ""  # what to do when it failed
    blocking: bool = True  # False: a run can go on without it (a warning)

    @property
    def failed(self) -> bool:
        return not self.ok and self.blocking

    def line(self) -> str:
        return f"{self.name}: {self.detail}" + (f" ({self.fix})" if self.fix else "")


def first_failure(checks: Iterable[Check]) -> Check | None:
    return next((check for check in checks if check.failed), None)


async def database_check(database: Database) -> Check:
    """The run database reachable and writable; nothing is created."""
    if database.is_postgres:
        return await _postgres_check(database)
    return await asyncio.to_thread(_sqlite_check, database.path)


async def _postgres_check(database: Database) -> Check:
    from psycopg import AsyncConnection

    try:
        connection = await asyncio.wait_for(
            AsyncConnection.connect(database.url, connect_timeout=DATABASE_TIMEOUT_S), DATABASE_TIMEOUT_S + 1
        )
    except (TimeoutError, OSError, Exception) as error:  # psycopg.OperationalError and friends
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0].removeprefix("connection failed: ")[
            :200
        ]
        return Check(
            name="database",
            ok=False,
            detail=f"{database} cannot be reached: {reason}",
            fix="start PostgreSQL or fix --db / WEBGEN_DB",
        )
    await connection.close()
    return Check(name="database", ok=True, detail=f"{database} is reachable")


def _sqlite_check(path: Path) -> Check:
    fix = "pass --db with an SQLite file in a writable folder, or a postgresql:// URL"
    if path.is_dir():
        return Check(name="database", ok=False, detail=f"{path} is a folder, not a database file", fix=fix)
    if path.exists():
        with path.open("rb") as handle:
            header = handle.read(16)
        if header and header != b"SQLite format 3\x00":
            return Check(name="database", ok=False, detail=f"{path} is not an SQLite database", fix=fix)
        if not os.access(path, os.W_OK):
            return Check(name="database", ok=False, detail=f"{path} is not writable", fix=fix)
        return Check(name="database", ok=True, detail=f"{path} (SQLite)")
    folder = next((parent for parent in path.parents if parent.exists()), Path("/"))
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return Check(name="database", ok=False, detail=f"{folder} is not a writable folder for {path}", fix=fix)
    if folder != path.parent and not _is_default(path):
        # A folder that is not there is more often a typo than a wish: a new database there would
        # hold the run, and `runs` on the usual one would not list it.
        return Check(
            name="database",
            ok=False,
            detail=f"{path.parent} does not exist (a mistyped --db?)",
            fix=f"for a new database there, create the folder first: mkdir -p {path.parent}",
        )
    return Check(name="database", ok=True, detail=f"{path} (SQLite, created by the first run)")


def _is_default(path: Path) -> bool:
    """The default database (``.webgen/webgen.db`` in the working folder): its folder is made when missing."""
    return path.resolve() == DEFAULT_DB.resolve()


# -- browser, Node, npm, sandbox -------------------------------------------------------------------------
