"""LangGraph's async checkpointer on the run database (SQLite or PostgreSQL), storing state by content.

The SQLite saver writes every channel value into every checkpoint (several per step). Stored as is,
the step log and the conversation would be copied again at every node, and storage would grow with
the square of the number of steps. ``ContentAddressedSerde`` stores large channel values (and each
element of large lists, such as step records) in the blob store instead, so a checkpoint row holds
hashes and an unchanged value costs nothing the next time: storage grows with what changed.

The readable keys people look at in Studio (nodes/readable.py) hold what the hashes name: file
texts, screenshots, long messages. The serializer stores those by their own content too: a long
string as its UTF-8 bytes (a file's text or a message is the very blob the workspace snapshot or the
conversation already stored), a base64 data URL as the bytes it encodes (a screenshot is its PNG
blob), a path -> text mapping as a snapshot manifest (the step's own manifest when the texts are
its files), and a list of LangChain messages as a chain of messages so packed. So those keys cost
a few small records per change, not a copy of the project and its screenshots per checkpoint.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import threading
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, cast

import aiosqlite
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from webgen_agent.checkpoints.database import SQLITE_BUSY_S, Database, require_psycopg
from webgen_agent.checkpoints.outage import WaitsOutOutages
from webgen_agent.checkpoints.recording import RecordsRuns
from webgen_agent.checkpoints.retention import SqliteRetention
from webgen_agent.checkpoints.secrets import KeepsNoSecrets
from webgen_agent.checkpoints.store import BlobStore, sha256

_BLOB = "__webgen_blob__"  # {_BLOB: hash}: the value is in the blob store
_CHAIN = "__webgen_chain__"  # {_CHAIN: hash}: a list as a chain of (previous link, element) blobs
_TEXT = "__webgen_text__"  # {_TEXT: hash}: a long string, stored as its UTF-8 bytes
_DATA = "__webgen_data__"  # {_DATA: [header, hash]}: a base64 data URL, stored as the bytes it encodes
_TREE = "__webgen_tree__"  # {_TREE: hash}: a path -> text mapping, stored as a snapshot manifest
_MESSAGE = "__webgen_message__"  # {_MESSAGE: fields}: a LangChain message, its long strings packed
_ZLIB = "zlib+"  # type prefix of a compressed row
_INLINE_MAX = 256  # serialized bytes kept inside the checkpoint row
_CACHE_SIZE = 4096
# Set while the saver reads rows on the event loop: loads_typed then leaves blob references unread.
_DEFERRED: ContextVar[bool] = ContextVar("webgen_serde_deferred", default=False)


class ContentAddressedSerde(SerializerProtocol):
    """Wraps LangGraph's serializer; moves big values into the content-addressed blob store."""

    def __init__(self, store: BlobStore, inner: SerializerProtocol | None = None) -> None:
        self.store = store
        self.inner = inner or JsonPlusSerializer()
        self._cache: OrderedDict[str, Any] = OrderedDict()  # hash -> decoded value (blobs never change)
        self._links: dict[tuple[str, str], str] = {}  # (previous link, element hash) -> link hash
        self._link_parts: dict[str, tuple[str, str]] = {}  # link hash -> (previous link, element hash)
        self._stored: set[str] = set()  # hashes known to be in the store (skip re-compressing them)
        self._lock = threading.Lock()  # the PostgreSQL saver calls in from worker threads

    # -- SerializerProtocol --------------------------------------------------------------------
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if _is_checkpoint(obj):
            obj = {**obj, "channel_values": {k: self._pack(v) for k, v in obj["channel_values"].items()}}
        else:
            obj = self._pack(obj)
        type_, data = self.inner.dumps_typed(obj)
        if len(data) > _INLINE_MAX:
            # Channel versions and LangGraph's bookkeeping repeat a lot within one row.
            return f"{_ZLIB}{type_}", zlib.compress(data, 1)
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_.startswith(_ZLIB):
            data = (type_[len(_ZLIB) :], zlib.decompress(payload))
        obj = self.inner.loads_typed(data)
        if _DEFERRED.get():
            return obj  # blob references stay; ``resolve`` reads them in a worker thread
        if _is_checkpoint(obj):
            obj["channel_values"] = {k: self._unpack(v) for k, v in obj["channel_values"].items()}
            return obj
        return self._unpack(obj)

    # -- the blob I/O of a checkpoint, done off the event loop by ``AtomicWritesSaver`` -----------
    def prepack(self, checkpoint: Any) -> Any:
        """The checkpoint with its big values already in the store (packing a packed value is a no-op)."""
        return {**checkpoint, "channel_values": {k: self._pack(v) for k, v in checkpoint["channel_values"].items()}}

    def resolve(self, found: CheckpointTuple) -> CheckpointTuple:
        """A tuple read while ``deferred``, with its blob references replaced by their values."""
        checkpoint = {
            **found.checkpoint,
            "channel_values": {k: self._unpack(v) for k, v in found.checkpoint["channel_values"].items()},
        }
        writes = [(task, channel, self._unpack(value)) for task, channel, value in found.pending_writes or []]
        return found._replace(checkpoint=cast(Checkpoint, checkpoint), pending_writes=writes)

    # -- packing -------------------------------------------------------------------------------
    def _put(self, typed: tuple[str, bytes]) -> str:
        data = typed[0].encode() + b"\0" + typed[1]
        digest = sha256(data)
        if digest not in self._stored:
            self.store.put(data)
            self._stored.add(digest)
        return digest

    def _get(self, digest: str) -> Any:
        with self._lock:
            if digest in self._cache:
                self._cache.move_to_end(digest)
                return self._cache[digest]
        type_, _, data = self.store.get(digest).partition(b"\0")
        value = self.inner.loads_typed((type_.decode(), data))
        with self._lock:
            self._cache[digest] = value
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return value

    def _pack(self, value: Any) -> Any:
        if isinstance(value, list) and value and all(isinstance(item, BaseMessage) for item in value):
            # A conversation: each message once, its texts and images by content.
            return {_CHAIN: self._chain([self.inner.dumps_typed(self._message(item)) for item in value])}
        if _is_text_tree(value) and sum(len(path) + len(text) for path, text in value.items()) > _INLINE_MAX:
            files = {path: self.store.put_text(text) for path, text in value.items()}
            return {_TREE: self.store.put_json({"files": files})}  # BlobStore.snapshot's manifest form
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            items = [self.inner.dumps_typed(item) for item in value]
            if sum(len(data) for _, data in items) >= _INLINE_MAX * len(items):
                # Big records (the step log): a linked chain, so a checkpoint holds one hash and a
                # changed or added record costs one record blob and one link.
                return {_CHAIN: self._chain(items)}
        if isinstance(value, (dict, list, str, bytes)):
            typed = self.inner.dumps_typed(value)
            if len(typed[1]) > _INLINE_MAX:
                return {_BLOB: self._put(typed)}
        return value

    def _chain(self, items: list[tuple[str, bytes]]) -> str:
        link = ""
        for item in items:
            key = (link, self._put(item))
            if key not in self._links:
                self._links[key] = self.store.put(f"{key[0]} {key[1]}".encode())
            link = self._links[key]
        return link

    def _unchain(self, link: str) -> list[Any]:
        items: list[Any] = []
        while link:
            if link not in self._link_parts:
                previous, item = self.store.get(link).decode().split(" ")
                self._link_parts[link] = (previous, item)
            link, item = self._link_parts[link]
            items.append(self._revived(self._get(item)))
        items.reverse()
        return items

    def _unpack(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            if _CHAIN in value:
                return self._unchain(value[_CHAIN])
            if _BLOB in value:
                return self._get(value[_BLOB])
            if _TREE in value:
                files = self.store.manifest(value[_TREE])
                return {path: self.store.get_text(digest) for path, digest in files.items()}
        return value

    # -- readable values: long strings by their own content ----------------------------------------
    def _message(self, message: BaseMessage) -> dict[str, Any]:
        return {_MESSAGE: self._strings_packed(message_to_dict(message))}

    def _strings_packed(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) > _INLINE_MAX:
            data_url = _data_url_parts(value)
            if data_url is not None:
                return {_DATA: [data_url[0], self.store.put(data_url[1])]}
            return {_TEXT: self.store.put_text(value)}
        if isinstance(value, dict):
            return {key: self._strings_packed(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._strings_packed(item) for item in value]
        return value

    def _strings_unpacked(self, value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and _TEXT in value:
                return self.store.get_text(value[_TEXT])
            if len(value) == 1 and _DATA in value:
                header, digest = value[_DATA]
                return header + base64.b64encode(self.store.get(digest)).decode("ascii")
            return {key: self._strings_unpacked(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._strings_unpacked(item) for item in value]
        return value

    def _revived(self, item: Any) -> Any:
        """A chain element as stored: a packed message becomes the message again (a new object each read)."""
        if isinstance(item, dict) and len(item) == 1 and _MESSAGE in item:
            return messages_from_dict([self._strings_unpacked(item[_MESSAGE])])[0]
        return item


def _is_text_tree(value: Any) -> bool:
    """A non-empty path -> text mapping in path order (what ``latest_files`` holds); a manifest keeps
    its keys sorted, so a mapping in another order is left to the other rules and reads back as it was."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(key, str) and isinstance(text, str) for key, text in value.items())
        and list(value) == sorted(value)
    )


def _data_url_parts(value: str) -> tuple[str, bytes] | None:
    """("data:<type>;base64,", the bytes) of a base64 data URL that encodes back to the same string."""
    if not value.startswith("data:"):
        return None
    header, comma, encoded = value.partition(",")
    if not comma or not header.endswith(";base64"):
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(data).decode("ascii") != encoded:  # not canonical: kept as text, exactly
        return None
    return header + ",", data


def _is_checkpoint(obj: Any) -> bool:
    return isinstance(obj, dict) and "channel_values" in obj and "channel_versions" in obj


class AtomicWritesSaver(WaitsOutOutages, SqliteRetention, KeepsNoSecrets, AsyncSqliteSaver):
    """AsyncSqliteSaver whose pending writes of one task are stored all or none, and whose blob-store
    I/O (the content-addressed serializer's SQLite reads and writes) runs in a worker thread, never on
    the event loop that the LangGraph server shares between runs.

    On the autocommit connection below, the stock ``executemany`` commits row by row. A process
    killed in between leaves part of a task's writes; on resume LangGraph takes the task as done
    and applies only that part (for the input task: the state without the edge to the first node,
    so the resumed run silently ends with no steps). One multi-row INSERT is one statement, so one
    transaction, and still holds no transaction open across an await. A file kept locked past the
    busy timeout is waited out for the database patience (``checkpoints/outage.py``).
    """

    @property
    def _content(self) -> ContentAddressedSerde:
        assert isinstance(self.serde, ContentAddressedSerde)
        return self.serde

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        packed = await asyncio.to_thread(self._content.prepack, checkpoint)
        return await super().aput(config, packed, metadata, new_versions)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        token = _DEFERRED.set(True)
        try:
            found = await super().aget_tuple(config)
        finally:
            _DEFERRED.reset(token)
        return None if found is None else await asyncio.to_thread(self._content.resolve, found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        rows = super().alist(config, filter=filter, before=before, limit=limit)
        while True:
            token = _DEFERRED.set(True)
            try:
                found = await anext(rows)
            except StopAsyncIteration:
                return
            finally:
                _DEFERRED.reset(token)
            yield await asyncio.to_thread(self._content.resolve, found)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        if not writes:
            return
        # Special channels (errors, interrupts) replace their earlier write, as the stock saver does.
        verb = "INSERT OR REPLACE" if all(channel in WRITES_IDX_MAP for channel, _ in writes) else "INSERT OR IGNORE"
        where = config["configurable"]

        def rows_values() -> list[Any]:
            values: list[Any] = []
            for idx, (channel, value) in enumerate(writes):
                values += [
                    str(where["thread_id"]),
                    str(where["checkpoint_ns"]),
                    str(where["checkpoint_id"]),
                    task_id,
                    task_path,
                    WRITES_IDX_MAP.get(channel, idx),
                    channel,
                    *self.serde.dumps_typed(value),
                ]
            return values

        values = await asyncio.to_thread(rows_values)
        rows = ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(writes))
        await self.setup()
        async with self.lock:
            await self.conn.execute(
                f"{verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, "
                f"type, value) VALUES {rows}",
                values,
            )
            await self.conn.commit()


class RecordingSqliteSaver(RecordsRuns, AtomicWritesSaver):
    """The SQLite saver that also keeps the runs table (``checkpoints/recording.py``)."""


@contextlib.asynccontextmanager
async def open_checkpointer(
    db: str | Path | Database, *, record_runs: bool = True
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The run database's LangGraph checkpointer (SQLite or PostgreSQL), storing state by content.

    ``record_runs`` (default): the saver keeps each thread's row in the runs table itself, so runs
    of hosts that drive the graph themselves (LangGraph's server, an app embedding it) show in
    ``runs``, ``history``, ``report`` and ``export``; False for callers that keep the row
    themselves (``run_requirement``) or only read. Must be opened inside the running event loop.
    """
    database = Database.of(db)
    if database.is_postgres:
        require_psycopg()
        from webgen_agent.checkpoints.postgres import open_postgres_checkpointer

        async with open_postgres_checkpointer(database, ContentAddressedSerde, record_runs=record_runs) as shared_saver:
            yield shared_saver
        return
    # The blob store opens (and, for a new file, converts to WAL) first: see database.open_sqlite.
    store = await asyncio.to_thread(BlobStore, database)
    # Autocommit: no write transaction stays open across an await, so the blob store's synchronous
    # writes can never wait on a lock this connection holds (a deadlock).
    conn = await aiosqlite.connect(str(database.path), timeout=SQLITE_BUSY_S, isolation_level=None)
    try:
        await conn.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_S * 1000)}")
        saver = (RecordingSqliteSaver if record_runs else AtomicWritesSaver)(conn, serde=ContentAddressedSerde(store))
        saver.where = database
        if isinstance(saver, RecordsRuns):
            saver.record_runs_in(database)
        await saver.setup()
        yield saver
    finally:
        await conn.close()
        store.close()


async def final_values(
    saver: BaseCheckpointSaver[Any], thread_ids: Sequence[str], *, batch: int = 500
) -> dict[str, dict[str, Any]]:
    """The channel values of each thread's latest checkpoint: ``graph.aget_state(...).values``.

    SQLite: read in batches straight from the saver's table and decoded by its serializer
    (aget_state costs a dozen aiosqlite round trips per run, too slow for exports of thousands of
    runs). PostgreSQL: one query per thread through the saver. A graph superstep here runs one
    node, so a run's latest checkpoint holds all its committed writes.
    """
    found: dict[str, dict[str, Any]] = {}
    if not isinstance(saver, AsyncSqliteSaver):
        for thread_id in thread_ids:
            found_tuple = await saver.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
            if found_tuple is not None:
                found[thread_id] = dict(found_tuple.checkpoint["channel_values"])
        return found
    for start in range(0, len(thread_ids), batch):
        chunk = list(thread_ids[start : start + batch])
        marks = ",".join("?" * len(chunk))
        query = (
            "SELECT c.thread_id, c.type, c.checkpoint FROM checkpoints AS c JOIN ("
            f"SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints WHERE checkpoint_ns = '' "
            f"AND thread_id IN ({marks}) GROUP BY thread_id) AS latest "
            "ON c.thread_id = latest.thread_id AND c.checkpoint_id = latest.last AND c.checkpoint_ns = ''"
        )
        async with saver.conn.execute(query, chunk) as cursor:
            rows = await cursor.fetchall()
        for thread_id, type_, payload in rows:
            found[thread_id] = dict(saver.serde.loads_typed((type_, payload))["channel_values"])
    return found
