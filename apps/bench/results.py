"""JSON-lines record files that survive a kill: append as results come, read back the latest per key.

A process killed mid-write leaves at most one torn last line; it is skipped on reading (that
result is simply redone) and the next append starts on a fresh line. ``compact`` rewrites the file
with one line per key, atomically, once a phase is over.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

R = TypeVar("R", bound=BaseModel)


class JsonlStore(Generic[R]):
    """One pydantic record a line; the last line of a key (the record's ``key`` property) wins."""

    def __init__(self, path: Path, schema: type[R]) -> None:
        self.path = Path(path)
        self.schema = schema

    def load(self) -> dict[Hashable, R]:
        records: dict[Hashable, R] = {}
        if not self.path.is_file():
            return records
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record = self.schema.model_validate_json(line)
            except ValidationError:
                continue  # a line torn by a kill: its result is redone
            records[record.key] = record  # type: ignore[attr-defined]
        return records

    def append(self, record: R) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as handle:
            handle.seek(0, os.SEEK_END)
            prefix = b""
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    prefix = b"\n"
            handle.write(prefix + record.model_dump_json().encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def compact(self, order: Callable[[R], Any] | None = None) -> list[R]:
        """Rewrite the file with one line per key (optionally sorted); returns the records."""
        records: Iterable[R] = self.load().values()
        ordered = sorted(records, key=order) if order is not None else list(records)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text("".join(r.model_dump_json() + "\n" for r in ordered), encoding="utf-8")
        os.replace(tmp, self.path)
        return ordered
