"""Content-addressed blob store (sha256 -> bytes) in the run database (SQLite or PostgreSQL).

File trees, screenshots, logs and long messages live here; graph state holds only their hashes, so
a checkpoint stays a few kilobytes and storage grows with what changed, not with project size
times steps. A file tree is a *manifest*: a JSON blob mapping relative paths to content hashes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from webgen_agent.checkpoints.database import Database, open_sqlite, pooled, pools
from webgen_agent.checkpoints.outage import patiently

T = TypeVar("T")

# Folders that are build output or caches, never part of a project's snapshot.
SKIPPED_DIRS = frozenset({"node_modules", ".git", "dist", "build", ".vite", ".next", ".cache", ".turbo"})
# Files the agent itself writes into a workspace.
SKIPPED_FILES = frozenset({".webgen-manifest", ".webgen-deps"})
# Compressing tiny blobs costs more than it saves.
_COMPRESS_FROM = 256
# In-memory cache of blob contents: the coder's conversation is re-read at every step, and blobs never
# change, so a read-through cache is always valid. Bounded by bytes; big blobs (screenshots) skip it.
_CACHE_BYTES = 32 * 1024 * 1024
_CACHE_ITEM_MAX = 1024 * 1024
# Hashes known to be stored: unchanged files of a snapshot are then neither compressed nor inserted.
_KNOWN_MAX = 200_000


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _SqliteBlobs:
    """The ``blobs`` table in a SQLite file: one connection, serialised by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = open_sqlite(path)
        self.lock = threading.Lock()
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS blobs (hash TEXT PRIMARY KEY, size INTEGER, codec TEXT, data BLOB)"
        )

    def _run(self, statement: Callable[[], T]) -> T:
        with self.lock:
            return patiently(self.path, statement)

    def insert(self, digest: str, size: int, codec: str, payload: bytes) -> None:
        sql = "INSERT OR IGNORE INTO blobs (hash, size, codec, data) VALUES (?, ?, ?, ?)"
        self._run(lambda: self.conn.execute(sql, [digest, size, codec, payload]))

    def select(self, digests: list[str]) -> list[tuple[str, str, bytes]]:
        marks = ",".join("?" * len(digests))
        sql = f"SELECT hash, codec, data FROM blobs WHERE hash IN ({marks})"
        return self._run(lambda: self.conn.execute(sql, digests).fetchall())

    def total_bytes(self) -> int:
        sql = "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs"
        return int(self._run(lambda: self.conn.execute(sql).fetchone()[0]))

    def close(self) -> None:
        self.conn.close()


class _PostgresBlobs:
    """The ``blobs`` table on a PostgreSQL server, through the process's shared connection pool."""

    def __init__(self, url: str) -> None:
        self.pool = pools.get(url, _create_postgres_blobs)
        self.where = Database.of(url)

    def insert(self, digest: str, size: int, codec: str, payload: bytes) -> None:
        sql = "INSERT INTO blobs (hash, size, codec, data) VALUES (%s, %s, %s, %s) ON CONFLICT (hash) DO NOTHING"
        pooled(self.pool, self.where, lambda conn: conn.execute(sql, [digest, size, codec, payload]))

    def select(self, digests: list[str]) -> list[tuple[str, str, bytes]]:
        sql = "SELECT hash, codec, data FROM blobs WHERE hash = ANY(%s)"
        rows = pooled(self.pool, self.where, lambda conn: conn.execute(sql, [digests]).fetchall())
        return [(row[0], row[1], bytes(row[2])) for row in rows]

    def total_bytes(self) -> int:
        sql = "SELECT COALESCE(SUM(octet_length(data)), 0) FROM blobs"
        row = pooled(self.pool, self.where, lambda conn: conn.execute(sql).fetchone())
        return int(row[0]) if row else 0

    def close(self) -> None:
        """The pool is shared by every store of this process; it closes at exit."""


def _create_postgres_blobs(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS blobs (hash TEXT PRIMARY KEY, size BIGINT NOT NULL, codec TEXT NOT NULL, "
        "data BYTEA NOT NULL)"
    )


class BlobStore:
    """sha256-keyed blobs in table ``blobs`` (zlib-compressed when that helps), SQLite or PostgreSQL.

    The methods are synchronous and thread-safe (LangGraph's checkpointer calls the serializer from
    worker threads); code on an event loop uses the ``a``-prefixed ones, which run them in a thread.
    """

    def __init__(self, db: str | Path | Database) -> None:
        self.database = Database.of(db)
        self._table: _SqliteBlobs | _PostgresBlobs = (
            _PostgresBlobs(self.database.url) if self.database.is_postgres else _SqliteBlobs(self.database.path)
        )
        self._lock = threading.Lock()
        self._cache = _BlobCache(_CACHE_BYTES, _CACHE_ITEM_MAX)
        self._known: OrderedDict[str, None] = OrderedDict()

    # -- bytes -------------------------------------------------------------------------------
    def put(self, data: bytes) -> str:
        digest = sha256(data)
        with self._lock:
            if digest in self._known:
                return digest
        codec, payload = "raw", data
        if len(data) >= _COMPRESS_FROM:
            packed = zlib.compress(data, 1)
            if len(packed) < len(data) * 0.9:
                codec, payload = "zlib", packed
        self._table.insert(digest, len(data), codec, payload)
        with self._lock:
            self._remember(digest)
            self._cache.add(digest, data)
        return digest

    def get(self, digest: str) -> bytes:
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None:
            return cached
        rows = self._table.select([digest])
        if not rows:
            raise KeyError(f"blob {digest[:12]} is not in {self.database}")
        _, codec, payload = rows[0]
        data = zlib.decompress(payload) if codec == "zlib" else bytes(payload)
        with self._lock:
            self._remember(digest)
            self._cache.add(digest, data)
        return data

    def _remember(self, digest: str) -> None:
        """Note that ``digest`` is in the table (caller holds the lock); blobs are never deleted."""
        self._known[digest] = None
        self._known.move_to_end(digest)
        if len(self._known) > _KNOWN_MAX:
            self._known.popitem(last=False)

    def get_many(self, digests: Iterable[str], *, batch: int = 500) -> dict[str, bytes]:
        """Several blobs in a few queries (exports read thousands); missing hashes are left out."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), batch):
            for digest, codec, payload in self._table.select(wanted[start : start + batch]):
                found[digest] = zlib.decompress(payload) if codec == "zlib" else bytes(payload)
        return found

    def has(self, digest: str) -> bool:
        with self._lock:
            if digest in self._known:
                return True
        return bool(self._table.select([digest]))

    def stored_bytes(self) -> int:
        """Bytes the blobs take in the table (after compression)."""
        return self._table.total_bytes()

    # -- text and JSON -----------------------------------------------------------------------
    def put_text(self, text: str) -> str:
        return self.put(text.encode("utf-8"))

    def get_text(self, digest: str) -> str:
        return self.get(digest).decode("utf-8")

    def put_json(self, value: Any) -> str:
        return self.put(json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8"))

    def get_json(self, digest: str) -> Any:
        return json.loads(self.get(digest))

    # -- file trees --------------------------------------------------------------------------
    def snapshot(self, root: Path) -> str:
        """Store every project file under ``root``; return the manifest hash."""
        return self.snapshot_files(root, [path.relative_to(root).as_posix() for path in iter_project_files(root)])

    def snapshot_files(self, root: Path, paths: Iterable[str]) -> str:
        """Store the files ``paths`` (relative POSIX paths) under ``root``; return the manifest hash."""
        return self.put_json({"files": {rel: self.put((root / rel).read_bytes()) for rel in paths}})

    def manifest(self, digest: str) -> dict[str, str]:
        return dict(self.get_json(digest)["files"])

    def materialize(self, digest: str | None, dest: Path) -> None:
        """Make ``dest`` hold exactly the manifest's files (build folders such as node_modules stay).

        ``None`` is the empty project.
        """
        wanted = self.manifest(digest) if digest else {}
        dest.mkdir(parents=True, exist_ok=True)
        for path in list(iter_project_files(dest)):
            rel = path.relative_to(dest).as_posix()
            if rel not in wanted:
                path.unlink()
        for rel, blob in wanted.items():
            target = dest / rel
            data = self.get(blob)
            if target.is_file() and not target.is_symlink() and sha256(target.read_bytes()) == blob:
                continue
            if target.is_symlink():
                target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        _remove_empty_dirs(dest)

    def close(self) -> None:
        self._table.close()

    # -- the same, off the event loop ---------------------------------------------------------
    async def aput(self, data: bytes) -> str:
        return await asyncio.to_thread(self.put, data)

    async def aget(self, digest: str) -> bytes:
        return await asyncio.to_thread(self.get, digest)

    async def aget_many(self, digests: Iterable[str]) -> dict[str, bytes]:
        return await asyncio.to_thread(self.get_many, list(digests))

    async def aput_text(self, text: str) -> str:
        return await asyncio.to_thread(self.put_text, text)

    async def aget_text(self, digest: str) -> str:
        return await asyncio.to_thread(self.get_text, digest)

    async def aput_json(self, value: Any) -> str:
        return await asyncio.to_thread(self.put_json, value)

    async def aget_json(self, digest: str) -> Any:
        return await asyncio.to_thread(self.get_json, digest)

    async def asnapshot(self, root: Path) -> str:
        return await asyncio.to_thread(self.snapshot, root)

    async def amaterialize(self, digest: str | None, dest: Path) -> None:
        await asyncio.to_thread(self.materialize, digest, dest)

    async def amanifest(self, digest: str) -> dict[str, str]:
        return await asyncio.to_thread(self.manifest, digest)


class _BlobCache:
    """Least-recently-used blob contents, bounded by total bytes (not thread-safe: the store locks)."""

    def __init__(self, max_bytes: int, item_max: int) -> None:
        self.max_bytes = max_bytes
        self.item_max = item_max
        self.bytes = 0
        self._items: OrderedDict[str, bytes] = OrderedDict()

    def get(self, digest: str) -> bytes | None:
        data = self._items.get(digest)
        if data is not None:
            self._items.move_to_end(digest)
        return data

    def add(self, digest: str, data: bytes) -> None:
        if len(data) > self.item_max or digest in self._items:
            return
        self._items[digest] = data
        self.bytes += len(data)
        while self.bytes > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self.bytes -= len(evicted)


def iter_project_files(root: Path):
    """Regular files of a project, skipping build and dependency folders and symlinks."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        for name in sorted(filenames):
            if name in SKIPPED_FILES:
                continue
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _remove_empty_dirs(root: Path) -> None:
    folders: list[Path] = []
    for dirpath, dirnames, _filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
        folders.extend(Path(dirpath) / d for d in dirnames)
    for folder in reversed(folders):  # deepest first
        if not any(folder.iterdir()):
            folder.rmdir()
