"""Proof by content that a node_modules tree holds what the registry published, before it is shared.

A tree goes into the shared dependency cache only when every package folder in it holds exactly the
files of the tarball its lockfile entry names, byte for byte: the tarball whose SHA-512 is the
entry's ``integrity``, found in npm's cache under that digest and hashed again here. No package folder
the lockfile does not name may be there, and nothing else but npm's own ``.package-lock.json``, the
``.bin`` links into the tree and the build caches the store leaves out. When the lockfile was in the
workspace before the install (so its digests are not npm's answer from the registry in that install),
each entry's ``integrity`` is also compared with the registry's metadata for that version.

Hand-written: npm has no command that checks an installed tree's files (``npm ci`` checks tarballs as
it unpacks them, ``npm audit signatures`` the registry's signatures of tarballs, ``npm ls`` versions
only). This reads each tarball as npm's unpacker (pacote) writes it: regular files only, the first
path component stripped.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import json
import os
import posixpath
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from webgen_agent.tools.endpoints import transient_status
from webgen_agent.tools.sandbox import BUILD_CACHES
from webgen_agent.tools.site.depcache import LOCKFILES

_CONTENT = Path("_cacache") / "content-v2" / "sha512"  # cacache's layout (as tools.npm_cache reads it)
_REGISTRY_REQUESTS = 16  # metadata requests at once
_ABBREVIATED = "application/vnd.npm.install-v1+json"  # the registry's short metadata: versions and dist
_REGISTRY_ATTEMPTS = 4  # a dropped connection, a timeout or a busy registry on a loaded machine is asked again


def _worth_asking_again(exc: BaseException) -> bool:
    """A registry failure that asking again may cure: the transport's, or a transient status (a 429, a 5xx)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return transient_status(exc.response.status_code)
    return isinstance(exc, httpx.TransportError)


class NotProven(Exception):
    """The tree is not (provably) what its lockfile's tarballs hold; the message says where."""


def lock_packages(workspace: Path) -> dict[str, dict[str, Any]]:
    """The ``packages`` of the workspace's lockfile (``node_modules/...`` keys only)."""
    for name in LOCKFILES:
        path = workspace / name
        if path.is_file():
            try:
                lock = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise NotProven(f"{name} cannot be read ({exc})") from exc
            packages = lock.get("packages") if isinstance(lock, dict) else None
            if not isinstance(packages, dict):
                raise NotProven(f"{name} has no packages (lockfile version 1)")
            return {k: v for k, v in packages.items() if k.startswith("node_modules/") and isinstance(v, dict)}
    raise NotProven("no lockfile")


def default_npm_cache() -> Path:
    """npm's cache for an unconfined install: npm_config_cache, else npm's default ``~/.npm``."""
    configured = os.environ.get("npm_config_cache") or os.environ.get("NPM_CONFIG_CACHE")
    return Path(configured) if configured else Path.home() / ".npm"


def check_tree(workspace: Path, npm_cache: Path) -> None:
    """Raise NotProven unless ``workspace/node_modules`` is exactly its lockfile's tarballs (from ``npm_cache``)."""
    root = workspace / "node_modules"
    if not root.is_dir():
        return  # nothing installed (a project without dependencies): nothing to share either
    packages = lock_packages(workspace)
    for folder in _package_folders(root, root):
        key = folder.relative_to(workspace).as_posix()
        entry = packages.get(key)
        if entry is None:
            raise NotProven(f"{key} is not in the lockfile")
        if entry.get("link") or entry.get("inBundle"):
            raise NotProven(f"{key} is a link or a bundled package")
        expected = _tarball_files(npm_cache, entry.get("integrity"), key)
        found = dict(_files(folder))
        if set(found) != set(expected):
            extra = sorted(set(found) ^ set(expected))[:3]
            raise NotProven(f"{key} holds other files than its tarball ({', '.join(extra)})")
        for name, path in found.items():
            if path.read_bytes() != expected[name]:
                raise NotProven(f"{key}/{name} differs from its tarball")


def _package_folders(folder: Path, root: Path) -> Iterator[Path]:
    """Every package folder under the node_modules ``folder`` (scoped and nested ones included); raises
    NotProven on anything else there but npm's own files."""
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if name in BUILD_CACHES or (name == ".package-lock.json" and folder == root and _regular(entry)):
            continue
        if name == ".bin" and entry.is_dir() and not entry.is_symlink():
            _check_bin_links(entry, root)
            continue
        if entry.is_symlink() or not entry.is_dir() or name.startswith("."):
            raise NotProven(f"{entry.relative_to(root.parent).as_posix()} is not a package folder")
        if name.startswith("@"):
            for scoped in sorted(entry.iterdir()):
                if scoped.is_symlink() or not scoped.is_dir():
                    raise NotProven(f"{scoped.relative_to(root.parent).as_posix()} is not a package folder")
                yield from _package(scoped, root)
            continue
        yield from _package(entry, root)


def _package(folder: Path, root: Path) -> Iterator[Path]:
    yield folder
    nested = folder / "node_modules"
    if nested.is_dir() and not nested.is_symlink():
        yield from _package_folders(nested, root)


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _check_bin_links(folder: Path, root: Path) -> None:
    """``.bin`` holds only links to files inside the tree (npm's bin links)."""
    resolved_root = root.resolve()
    for entry in folder.iterdir():
        target = Path(os.path.realpath(entry))
        if not entry.is_symlink() or not target.is_relative_to(resolved_root):
            raise NotProven(f"{entry.relative_to(root.parent).as_posix()} is not a link into node_modules")


def _files(package: Path) -> Iterator[tuple[str, Path]]:
    """(path inside the package, path) of its files, its own node_modules and build caches left out;
    NotProven on a link (npm's unpacker writes none)."""
    for dirpath, dirnames, filenames in os.walk(package):
        here = Path(dirpath)
        relative = here.relative_to(package)
        for name in list(dirnames):
            if (here / name).is_symlink():
                raise NotProven(f"{(relative / name).as_posix()} in {package.name} is a link")
        dirnames[:] = [d for d in dirnames if d not in BUILD_CACHES and not (here == package and d == "node_modules")]
        for name in filenames:
            path = here / name
            if path.is_symlink():
                raise NotProven(f"{(relative / name).as_posix()} in {package.name} is a link")
            yield (relative / name).as_posix(), path


def _tarball_files(npm_cache: Path, integrity: Any, key: str) -> dict[str, bytes]:
    """The regular files of the tarball with SHA-512 ``integrity`` as npm unpacks it (path -> bytes)."""
    digest = sha512_hex(integrity)
    if digest is None:
        raise NotProven(f"{key} has no sha512 integrity in the lockfile")
    path = npm_cache / _CONTENT / digest[:2] / digest[2:4] / digest[4:]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NotProven(f"the tarball of {key} is not in npm's cache") from exc
    if hashlib.sha512(data).hexdigest() != digest:
        raise NotProven(f"the cached tarball of {key} does not match its integrity")
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                name = posixpath.normpath(member.name.lstrip("/")).partition("/")[2]
                if not member.isreg() or not name or name.startswith("..") or _skipped(name):
                    continue
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle is not None else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise NotProven(f"the tarball of {key} cannot be read ({exc})") from exc
    return files


def _skipped(name: str) -> bool:
    """Files the store leaves out (build caches at any depth) or that belong to nested packages."""
    parts = name.split("/")
    return any(part in BUILD_CACHES for part in parts) or parts[0] == "node_modules"


def sha512_hex(integrity: Any) -> str | None:
    """The hex SHA-512 an SRI string (``sha512-<base64>``, possibly among others) names; None without one."""
    if not isinstance(integrity, str):
        return None
    for part in integrity.split():
        algorithm, _, value = part.partition("-")
        if algorithm == "sha512":
            try:
                return base64.b64decode(value, validate=True).hex()
            except (binascii.Error, ValueError):
                return None
    return None


async def check_against_registry(workspace: Path, registry: str) -> None:
    """Raise NotProven unless every lockfile entry's integrity is the registry's for that version."""
    wanted: dict[str, dict[str, str]] = {}
    for key, entry in (await asyncio.to_thread(lock_packages, workspace)).items():
        name = entry.get("name") or key.rpartition("node_modules/")[2]
        version, integrity = entry.get("version"), entry.get("integrity")
        if isinstance(version, str) and isinstance(integrity, str) and (workspace / key).is_dir():
            wanted.setdefault(str(name), {})[version] = integrity
    gate = asyncio.Semaphore(_REGISTRY_REQUESTS)
    base = registry.rstrip("/") + "/"
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=5.0), headers={"Accept": _ABBREVIATED}) as client:

        async def check(name: str, versions: dict[str, str]) -> None:
            async with gate:
                try:
                    async for attempt in AsyncRetrying(
                        retry=retry_if_exception(_worth_asking_again),
                        stop=stop_after_attempt(_REGISTRY_ATTEMPTS),
                        wait=wait_exponential_jitter(initial=0.5, max=4.0),
                        reraise=True,
                    ):
                        with attempt:
                            answer = await client.get(base + quote(name, safe="@"))
                            answer.raise_for_status()
                    published = answer.json().get("versions", {})
                except (httpx.HTTPError, ValueError, AttributeError) as exc:
                    # Some of httpx's errors (a read timeout) have no message: the type says what it was.
                    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    raise NotProven(f"the registry's metadata of {name} cannot be read ({reason})") from exc
            for version, integrity in versions.items():
                dist = (published.get(version) or {}).get("dist") or {}
                if sha512_hex(dist.get("integrity")) != sha512_hex(integrity):
                    raise NotProven(f"{name}@{version}: the lockfile's integrity is not the registry's")

        await asyncio.gather(*(check(name, versions) for name, versions in wanted.items()))
