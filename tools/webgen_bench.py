"""WebGen-Bench records: the instructions and UI test cases of the benchmark (and its training set)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from webgen_agent.core.context import validation_summary


class Category(BaseModel):
    primary_category: str = ""
    subcategories: list[str] = Field(default_factory=list)


class UITestCase(BaseModel):
    task: str = ""
    expected_result: str = ""
    task_category: Category = Field(default_factory=Category)


class BenchRecord(BaseModel):
    """One instruction: the website requirement and its UI test cases."""

    id: str
    instruction: str
    category: Category = Field(default_factory=Category, alias="Category")
    application_type: str = ""
    ui_instruct: list[UITestCase] = Field(default_factory=list)

    @property
    def test_cases(self) -> list[UITestCase]:
        """The real test cases (the training set has one empty placeholder per record)."""
        return [case for case in self.ui_instruct if case.task.strip()]


class BenchDataError(ValueError):
    """A data file that cannot be read; the message names the file and line."""


def load_records(path: str | Path, *, ids: list[str] | None = None, limit: int | None = None) -> list[BenchRecord]:
    """Read a WebGen-Bench JSON-lines file (any size), optionally only some ids or the first N."""
    path = Path(path)
    if not path.is_file():
        raise BenchDataError(f"{path}: no such file")
    wanted = set(ids or [])
    records: list[BenchRecord] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = BenchRecord.model_validate(json.loads(line))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise BenchDataError(
                    f"{path}:{number}: not a WebGen-Bench record ({validation_summary(exc)})"
                ) from None
            if wanted and record.id not in wanted:
                continue
            records.append(record)
            if limit is not None and len(records) >= limit:
                break
    missing = wanted - {r.id for r in records}
    if missing and limit is None:
        raise BenchDataError(f"{path}: ids not found: {', '.join(sorted(missing))}")
    return records
