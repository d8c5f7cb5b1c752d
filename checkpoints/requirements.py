"""The ``requirements`` table: an instruction's requirement list, written once and shared by its samples.

Keyed by the sha256 of the instruction text; the value is the blob hash of the JSON list
``[{"task": ..., "expected_result": ...}]``. The first list stored wins: a sample that wrote its own
at the same time reads the winner back, so every trajectory of a group is checked the same way.
Lives in the run database beside the runs table (SQLite or PostgreSQL).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from webgen_agent.checkpoints.database import Database, open_sqlite, pools
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import RequirementCheck

_CREATE = (
    "CREATE TABLE IF NOT EXISTS requirements "
    "(instruction TEXT PRIMARY KEY, requirements TEXT NOT NULL, created_at DOUBLE PRECISION)"
)


def _create_postgres_requirements(conn: Any) -> None:
    conn.execute(_CREATE)


def requirement_items(value: list[Any] | str, store: BlobStore) -> list[RequirementCheck]:
    """A run's requirement list: as state holds it, or (runs recorded before it did) by its blob hash."""
    items = store.get_json(value) if isinstance(value, str) else value
    return [RequirementCheck(task=item["task"], expected_result=item["expected_result"]) for item in items]


class RequirementIndex:
    def __init__(self, db: str | Path | Database) -> None:
        self.database = Database.of(db)
        self._lock = threading.Lock()
        if self.database.is_postgres:
            self._pool = pools.get(self.database.url, _create_postgres_requirements)
        else:
            self._conn = open_sqlite(self.database.path)
            self._conn.execute(_CREATE)  # one autocommit statement: it waits for the write lock

    def _run(self, sqlite_sql: str, args: list[Any]) -> list[Any]:
        if self.database.is_postgres:
            with self._pool.connection() as conn:
                cursor = conn.execute(sqlite_sql.replace("?", "%s"), args)
                return cursor.fetchall() if cursor.description else []
        with self._lock:
            return self._conn.execute(sqlite_sql, args).fetchall()

    def get(self, instruction_key: str) -> str | None:
        rows = self._run("SELECT requirements FROM requirements WHERE instruction = ?", [instruction_key])
        return str(rows[0][0]) if rows else None

    def put_once(self, instruction_key: str, requirements: str) -> str:
        """Store ``requirements`` unless a list is already stored; return the stored one."""
        self._run(
            "INSERT INTO requirements (instruction, requirements, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (instruction) DO NOTHING",
            [instruction_key, requirements, time.time()],
        )
        stored = self.get(instruction_key)
        if stored is None:  # just inserted, or inserted before: it is there
            raise RuntimeError(f"the requirements of instruction {instruction_key[:12]} were not stored")
        return stored
