"""Export writers: JSON lines (shared messages encoded once), parquet, and the text layout.

``write_records`` writes any record type; with a ``ChatRender`` the prompt-completion records'
``prompt`` and ``completion`` message lists become the strings a chat template renders.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from webgen_agent.checkpoints.views import ChatMessage

# (prompt messages, completion messages) -> (prompt text with the generation prompt, completion text)
ChatRender = Callable[[list[dict[str, Any]], list[dict[str, Any]]], tuple[str, str]]


class JsonLines:
    """Record -> one JSON line (UTF-8 bytes); a chat message shared by many records is encoded once.

    The steps of a trajectory repeat its conversation in their prompts, so most of an export's
    bytes are messages already encoded for an earlier record.
    """

    def __init__(self) -> None:
        self._fragments: dict[ChatMessage, bytes] = {}
        self._message_fields: dict[type[BaseModel], tuple[str, ...]] = {}

    def line(self, record: BaseModel) -> bytes:
        return b"".join(self.chunks(record))

    def chunks(self, record: BaseModel) -> list[bytes]:
        """The line in pieces (no newline): written as they are, the shared ones are never copied."""
        fields = self._fields_of(type(record))
        if not fields:
            return [record.__pydantic_serializer__.to_json(record)]
        body = record.__pydantic_serializer__.to_json(record, exclude=set(fields))
        chunks = [body[:-1]]
        for position, name in enumerate(fields):
            separator = b"," if position or body != b"{}" else b""
            chunks.append(b'%s"%s":[' % (separator, name.encode()))
            for index, message in enumerate(getattr(record, name)):
                if index:
                    chunks.append(b",")
                chunks.append(self._fragment(message))
            chunks.append(b"]")
        chunks.append(b"}")
        return chunks

    def _fragment(self, message: ChatMessage) -> bytes:
        fragment = self._fragments.get(message)
        if fragment is None:
            fragment = self._fragments[message] = message.__pydantic_serializer__.to_json(message)
        return fragment

    def _fields_of(self, cls: type[BaseModel]) -> tuple[str, ...]:
        fields = self._message_fields.get(cls)
        if fields is None:
            fields = tuple(name for name, f in cls.model_fields.items() if f.annotation == list[ChatMessage])
            self._message_fields[cls] = fields
        return fields


def _text_row(record: BaseModel, render: ChatRender) -> dict[str, Any]:
    row = record.model_dump(mode="json")
    row["prompt"], row["completion"] = render(row["prompt"], row["completion"])
    return row


def write_records(
    records: Iterable[BaseModel], path: Path, *, parquet: bool = False, render: ChatRender | None = None
) -> int:
    """Write the records to ``path`` (JSON lines, or parquet), via a temporary file so that a failed
    export leaves no half file; the number written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        count = _write_parquet(records, partial, render) if parquet else _write_jsonl(records, partial, render)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(path)
    return count


def _write_jsonl(records: Iterable[BaseModel], path: Path, render: ChatRender | None) -> int:
    encoder = JsonLines()
    count = 0
    with path.open("wb") as handle:
        for record in records:
            if render is None:
                handle.writelines(encoder.chunks(record))
            else:
                handle.write(json.dumps(_text_row(record, render), ensure_ascii=False).encode())
            handle.write(b"\n")
            count += 1
    return count


def _write_parquet(records: Iterable[BaseModel], path: Path, render: ChatRender | None) -> int:
    """One table (Arrow infers each column's type from every row, so empty lists and nulls are fine)."""
    import pyarrow as pa  # imported here: most exports and every other command do without it
    import pyarrow.parquet as pq

    rows = [record.model_dump(mode="json") if render is None else _text_row(record, render) for record in records]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)
