"""A throwaway PostgreSQL cluster (Debian's ``postgresql`` package) for tests and benchmarks.

``initdb`` into a temporary folder, the server on a unix socket in that folder (no TCP port, so
concurrent test sessions never clash), durability off (nothing here must survive a crash), and
everything removed at the end. PostgreSQL refuses to run as root: as root the commands run as the
``postgres`` user that the package creates.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_SERVER_SETTINGS = (
    "listen_addresses=''",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
    "shared_buffers=64MB",
)


def postgres_bin() -> Path | None:
    """The folder holding initdb and pg_ctl (Debian keeps them out of PATH), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return versions[-1].parent if versions else None


class PostgresCluster:
    """A running server; ``new_database()`` hands out a fresh, empty database URL."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.data = root / "data"
        self._names = itertools.count()

    def _as_owner(self, *argv: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return list(argv)

    def start(self) -> None:
        subprocess.run(
            self._as_owner(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        self.start_server()

    def start_server(self) -> None:
        """Start the server on the existing data folder (again, after ``stop``)."""
        options = " ".join(f"-c {setting}" for setting in _SERVER_SETTINGS)
        subprocess.run(
            self._as_owner(
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-w",
                "-s",
                "-l",
                str(self.root / "server.log"),
                "-o",
                f"-k {self.root} {options}",
                "start",
            ),
            check=True,
            capture_output=True,
            text=True,
        )

    def stop(self) -> None:
        """Stop the server hard (``immediate``: its connections are cut, as a crash would)."""
        subprocess.run(
            self._as_owner(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-s", "-m", "immediate", "stop"),
            capture_output=True,
            text=True,
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.root}"

    def new_database(self, prefix: str = "t") -> str:
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def throwaway_cluster() -> Iterator[PostgresCluster]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="webgen-pg-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    cluster = PostgresCluster(root, bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def fresh_db(request: pytest.FixtureRequest, folder: Path) -> str:
    """A fresh run database of the kind ``request.param`` names: a SQLite file in ``folder``, or a new
    database on the session's PostgreSQL cluster."""
    if request.param == "sqlite":
        (folder / "db").mkdir(exist_ok=True)  # a database's folder is the user's to make (docs/cli.md)
        return str(folder / "db" / "webgen.db")
    return request.getfixturevalue("postgres_cluster").new_database()
