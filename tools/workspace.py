"""Safe writes into a project workspace.

Every path the model writes is confined to the workspace: absolute paths, ``..``, writes through
symlinks (the generated app can create them) and the dependency folder are refused, and each
refusal is reported with a reason the model can act on.
"""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from webgen_agent.tools.bolt import FileAction

_DRIVE = re.compile(r"^[A-Za-z]:")
_FORBIDDEN_TOP = {"node_modules", ".git"}
# One model-written file; generated sources are far smaller, a bigger one is a runaway reply.
MAX_FILE_BYTES = 2 * 1024 * 1024


class PathRefused(ValueError):
    """A model-written path that may not be written; the message is for the model."""


class ApplyResult(BaseModel):
    written: list[str] = Field(default_factory=list, description="Workspace-relative paths written.")
    refused: dict[str, str] = Field(default_factory=dict, description="path -> why it was refused.")


def confine(root: Path, raw_path: str) -> Path:
    """Resolve a model-written path inside ``root`` or raise PathRefused."""
    path = raw_path.strip().replace("\\", "/")
    if not path or "\x00" in path:
        raise PathRefused("empty or invalid path")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in path) or unicodedata.normalize("NFKC", path) != path:
        # Look-alikes (fullwidth solidus, one-dot leaders, ...) and invisible or direction controls.
        raise PathRefused("the path holds look-alike or control characters; write it in plain characters")
    if path.startswith(("/", "~")) or _DRIVE.match(path):
        raise PathRefused("absolute paths are not allowed; use a path relative to the project root")
    parts = [p for p in PurePosixPath(path).parts if p not in ("", ".")]
    if not parts:
        raise PathRefused("the path names the project root, not a file")
    if ".." in parts:
        raise PathRefused("'..' would leave the project folder")
    if parts[0] in _FORBIDDEN_TOP:
        raise PathRefused(f"{parts[0]}/ is managed by the tools, not written by hand")
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise PathRefused(f"{current.relative_to(root).as_posix()} is a symlink; writing through it is refused")
    resolved_root = root.resolve()
    if not current.resolve().is_relative_to(resolved_root):
        raise PathRefused("the path resolves outside the project folder")
    return current


def write_file(root: Path, raw_path: str, content: str) -> str:
    """Write one whole file atomically; returns its workspace-relative path."""
    target = confine(root, raw_path)
    if target.is_dir():
        raise PathRefused("a folder already has that name")
    if "\x00" in content:
        raise PathRefused("the content holds NUL bytes (binary data); write text files only")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused("the content is not valid text (unpaired surrogate characters)") from None
    if len(data) > MAX_FILE_BYTES:
        raise PathRefused(
            f"the file is {len(data) / 2**20:.1f} MB, over the {MAX_FILE_BYTES // 2**20} MB limit for one file"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.webgen-tmp")
    # O_NOFOLLOW | O_EXCL: never follow a symlink planted between the check and the write.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, target)
    return target.relative_to(root).as_posix()


def apply_files(root: Path, files: list[FileAction]) -> ApplyResult:
    """Write every file it may; refusals are collected, not raised."""
    root.mkdir(parents=True, exist_ok=True)
    result = ApplyResult()
    for action in files:
        try:
            result.written.append(write_file(root, action.path, action.content))
        except PathRefused as exc:
            result.refused[action.path] = str(exc)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # the machine's disk is full: the run stops (resumable), the coder is not to blame
            result.refused[action.path] = f"could not write: {exc.strerror or exc}"
    return result
