"""The shared dependency cache: node_modules trees by cache key, hardlinked into workspaces.

Entries are written to a temporary folder and renamed into place, so a reader never sees half an
entry and two runs storing the same key at once both succeed (the second rename loses, harmlessly).
What may be stored is decided by the install (``tools.site.deps``) and proved by
``tools.site.integrity`` before ``DepsCache.store`` is called.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from webgen_agent.tools.sandbox import BUILD_CACHES

LOCKFILES = ("package-lock.json", "npm-shrinkwrap.json")
# Build caches the dependency cache must not carry from one project to another.
_CACHE_SKIP = BUILD_CACHES


def _link_or_copy(src: str, dst: str) -> None:
    # npm rewrites its hidden lockfile in place: a hardlink would let one project corrupt the cache.
    if os.path.basename(src) != ".package-lock.json":
        try:
            os.link(src, dst)
            return
        except OSError:  # another filesystem, or links not allowed
            pass
    shutil.copy2(src, dst)


def _hardlink_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy, ignore=shutil.ignore_patterns(*_CACHE_SKIP))


class DepsCache:
    """node_modules trees by cache key, shared by hardlinks between workspaces and runs."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry(self, key: str) -> Path | None:
        path = self.root / key
        return path if (path / "node_modules").is_dir() else None

    def restore(self, key: str, workspace: Path) -> bool:
        """Materialise node_modules (and the lockfile npm would have written) from the cache."""
        entry = self.entry(key)
        if entry is None:
            return False
        target = workspace / "node_modules"
        tmp = workspace / f".node_modules.webgen-{uuid.uuid4().hex[:8]}"
        try:
            _hardlink_tree(entry / "node_modules", tmp)
        except (OSError, shutil.Error):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        if target.exists() or target.is_symlink():
            remove_tree(target)
        try:
            os.rename(tmp, target)
        except OSError:  # the old tree could not be removed: let npm sort it out
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        for lockfile in LOCKFILES:
            if (entry / lockfile).is_file() and not (workspace / lockfile).exists():
                shutil.copy2(entry / lockfile, workspace / lockfile)
        return True

    def store(self, keys: list[str], workspace: Path) -> None:
        """Keep the workspace's node_modules under ``keys[0]``; other keys become aliases."""
        source = workspace / "node_modules"
        if not keys or not source.is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        primary = self.root / keys[0]
        if self.entry(keys[0]) is None:
            tmp = self.root / f".tmp-{keys[0][:12]}-{uuid.uuid4().hex[:8]}"
            try:
                tmp.mkdir()
                _hardlink_tree(source, tmp / "node_modules")
                for lockfile in LOCKFILES:
                    if (workspace / lockfile).is_file():
                        shutil.copy2(workspace / lockfile, tmp / lockfile)
                os.rename(tmp, primary)
            except OSError:  # another run stored it first, or the disk is full: the cache is optional
                shutil.rmtree(tmp, ignore_errors=True)
                if self.entry(keys[0]) is None:
                    return
        for alias in keys[1:]:
            if alias != keys[0] and not (self.root / alias).exists():
                link = self.root / f".tmp-link-{uuid.uuid4().hex[:8]}"
                with contextlib.suppress(OSError):
                    link.symlink_to(keys[0])
                    os.rename(link, self.root / alias)
                link.unlink(missing_ok=True)


def remove_tree(path: Path) -> None:
    """Remove a file, link or folder; nothing when it is not there."""
    if not (path.exists() or path.is_symlink()):
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
        return

    def writable_then_again(function: Any, name: str, _exc: Any) -> None:
        # A folder made read-only inside (chmod by an install script) is made writable, then emptied.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            function(name)

    shutil.rmtree(path, onerror=writable_then_again)
