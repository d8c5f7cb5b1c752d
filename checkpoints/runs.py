"""The ``runs`` table: one row per run (= one checkpoint thread), its status and best scores."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel, Field

from webgen_agent.checkpoints.store import open_database

RunStatus = Literal["running", "finished", "failed", "interrupted"]


class RunRecord(BaseModel):
    run_id: str
    group_id: str = ""
    requirement: str
    status: RunStatus = "running"
    out_dir: str
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    error: str = ""
    parent_run: str = ""
    fork_step: int | None = None
    pid: int = Field(default_factory=os.getpid)
    pid_started: float = 0.0
    chosen_step: int | None = None
    steps: int = 0
    best_screenshot: int = 0
    best_gui: int = 0
    settings: str = Field(default="{}", description="Non-secret run settings (JSON) reused on resume.")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _process_started(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


class RunIndex:
    """sqlite-utils access to the runs table in the run database."""

    def __init__(self, db_path: str | Path) -> None:
        self.db = open_database(db_path)
        if "runs" not in self.db.table_names():
            columns = {
                name: (field.annotation if field.annotation in (str, int, float) else str)
                for name, field in RunRecord.model_fields.items()
            }
            columns.update(
                fork_step=int,
                chosen_step=int,
                pid=int,
                steps=int,
                best_screenshot=int,
                best_gui=int,
                created_at=float,
                updated_at=float,
                pid_started=float,
            )
            self.db.table("runs").create(columns, pk="run_id", if_not_exists=True)
            self.db.table("runs").create_index(["group_id"], if_not_exists=True)

    def start(self, record: RunRecord) -> RunRecord:
        record.pid = os.getpid()
        record.pid_started = _process_started(record.pid)
        record.status = "running"
        record.updated_at = time.time()
        self.db.table("runs").upsert(record.model_dump(), pk="run_id")
        return record

    def update(self, run_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        self.db.table("runs").update(run_id, fields)

    def get(self, run_id: str) -> RunRecord | None:
        rows = list(self.db["runs"].rows_where("run_id = ?", [run_id]))
        return self._with_liveness(RunRecord(**rows[0])) if rows else None

    def list(self, group_id: str | None = None) -> list[RunRecord]:
        where, args = ("group_id = ?", [group_id]) if group_id is not None else (None, None)
        rows = self.db["runs"].rows_where(where, args, order_by="created_at")
        return [self._with_liveness(RunRecord(**row)) for row in rows]

    @staticmethod
    def _with_liveness(record: RunRecord) -> RunRecord:
        """A 'running' run whose process is gone was interrupted (Ctrl-C, kill -9, reboot)."""
        if record.status == "running":
            started = _process_started(record.pid)
            if not started or abs(started - record.pid_started) > 1.0:
                record.status = "interrupted"
        return record

    def settings(self, run_id: str) -> dict[str, Any]:
        record = self.get(run_id)
        return json.loads(record.settings) if record else {}
