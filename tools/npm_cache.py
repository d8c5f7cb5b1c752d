"""npm's cache for sandboxed installs and shell actions: private to each command, verified on the way back.

The user's ``~/.npm`` is never shown to a sandbox. The agent keeps its own npm cache (beside the
dependency cache); each install or shell action gets a private, writable copy of its content files,
and afterwards only content files whose SHA-512 matches the name npm stores them under (cacache's
content address) are added to the agent's cache. Index entries (which map a URL, such as a
package's metadata, to content) are never taken back: they cannot be verified, and a planted one
would make later installs resolve a package to other content. So the agent's cache holds only
tarballs and metadata bodies npm finds by their digest (pacote looks a tarball up by the integrity
in the lockfile or the package metadata first), and a sandbox can add nothing else to it.

Copies rather than hardlinks: a hardlinked file written inside would change the agent's copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from webgen_agent.tools.sandbox import Confinement

AGENT_NPM_CACHE = "npm"  # the agent's npm cache: this folder of the dependency cache
_CONTENT = Path("_cacache") / "content-v2" / "sha512"  # cacache's layout: sha512/ab/cd/<the other 124 hex digits>
_CHUNK = 1 << 20
# Each install copies the seed, so it is bounded (the cache itself grows like npm's own does).
SEED_MAX_BYTES = 512 * 1024 * 1024


def content_files(cache: Path) -> list[tuple[str, Path]]:
    """(hex digest the path names, path) for every regular content file under ``cache``; symlinks skipped."""
    root = cache / _CONTENT
    found: list[tuple[str, Path]] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        relative = Path(dirpath).relative_to(root).parts
        if len(relative) != 2:
            continue
        for name in filenames:
            path = Path(dirpath) / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(path.lstat().st_mode):
                    found.append(("".join(relative) + name, path))
    return found


def _sha512_of(path: Path) -> str | None:
    """The file's SHA-512 (hex), read without following a symlink; None when it cannot be read."""
    digest = hashlib.sha512()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _place(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` through a temporary file and a rename (readers never see half)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}"
    try:
        shutil.copyfile(source, tmp, follow_symlinks=False)
        tmp.chmod(0o444)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _newest_first(files: list[tuple[str, Path]]) -> list[tuple[str, Path, int]]:
    """(digest, path, size) of ``files``, the most recently added first."""
    found: list[tuple[float, str, Path, int]] = []
    for digest, path in files:
        with contextlib.suppress(OSError):
            info = path.stat()
            found.append((info.st_mtime, digest, path, info.st_size))
    return [(digest, path, size) for _mtime, digest, path, size in sorted(found, key=lambda f: f[0], reverse=True)]


def seed(agent_cache: Path | None, private: Path, *, max_bytes: int = SEED_MAX_BYTES) -> int:
    """Copy the agent cache's newest content files (up to ``max_bytes``) into ``private``; returns the bytes copied."""
    copied = 0
    if agent_cache is None:
        return copied
    for digest, path, size in _newest_first(content_files(agent_cache)):
        if copied + size > max_bytes:
            continue
        target = private / _CONTENT / digest[:2] / digest[2:4] / digest[4:]
        with contextlib.suppress(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target, follow_symlinks=False)
            copied += target.stat().st_size
    return copied


def merge_verified(private: Path, agent_cache: Path) -> int:
    """Add to the agent cache the content files of ``private`` whose SHA-512 is their name; returns how many."""
    added = 0
    for digest, path in content_files(private):
        target = agent_cache / _CONTENT / digest[:2] / digest[2:4] / digest[4:]
        if target.exists() or _sha512_of(path) != digest:
            continue
        with contextlib.suppress(OSError):
            _place(path, target)
            added += 1
    return added


@contextlib.asynccontextmanager
async def private_npm_cache(sandbox: Confinement | None, agent_cache: Path | None) -> AsyncIterator[Confinement | None]:
    """``sandbox`` with a private npm cache of its own for the block (seeded from ``agent_cache``).

    On leaving, verified content goes back into ``agent_cache`` and the private folder is removed.
    Unconfined commands (``sandbox`` None) use the caller's npm cache as they always did.
    """
    if sandbox is None:
        yield None
        return
    private = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="webgen-npm-cache-"))
    try:
        seeded = await asyncio.to_thread(seed, agent_cache, private)
        yield dataclasses.replace(sandbox, npm_cache=private, npm_cache_seed_bytes=seeded)
        if agent_cache is not None:
            await asyncio.to_thread(merge_verified, private, agent_cache)
    finally:
        await asyncio.to_thread(shutil.rmtree, private, True)
