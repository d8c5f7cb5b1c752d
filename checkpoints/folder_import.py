"""A user's project folder as a run's start (``run --from DIR``, ``AgentContext.start_from``).

The folder is read the way a step's workspace is snapshotted (``iter_project_files``): its regular
files, without dependency and build folders (``node_modules``, ``.git``, ``dist``, ...). Symbolic
links are never followed or copied (one pointing out of the folder would import what lies there);
they are named instead. The agent's own files (the run's output folder, the runs folder, the run
database and the machine's working files beside it) are left out when the folder holds them, so
``run --from .`` in a project works. Refusals are one line (``FolderRefused``), asked before
anything is recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from webgen_agent.checkpoints.store import SKIPPED_DIRS, BlobStore, iter_project_files
from webgen_agent.core.errors import ConfigError

MB = 1024 * 1024


class FolderRefused(ConfigError):
    """The folder cannot be a run's start; the message is one line for the user."""


@dataclass(frozen=True)
class ProjectFolder:
    """What a run imports of a folder."""

    root: Path
    files: list[str]  # relative POSIX paths of the files imported
    links: list[str]  # symbolic links not followed (relative paths)
    size: int  # bytes of the files imported

    def notes(self) -> list[str]:
        """What was not imported, for the coder and the user (the step's problems)."""
        if not self.links:
            return []
        shown = ", ".join(self.links[:5]) + (f" and {len(self.links) - 5} more" if len(self.links) > 5 else "")
        return [f"Not imported: {len(self.links)} symbolic link(s) ({shown}); links are never followed or copied."]


def read_project_folder(path: str | Path, *, cap_mb: int, leave_out: Iterable[Path] = ()) -> ProjectFolder:
    """The files of ``path`` a run starts from; ``FolderRefused`` (one line) when it cannot start one:
    no such folder, a file, nothing to import, an unreadable file, or more than ``cap_mb`` of files
    (the workspace cap, ``SandboxSettings.workspace_mb``)."""
    given = Path(path).expanduser()
    if not given.exists():
        raise FolderRefused(f"--from {path}: no such folder")
    if not given.is_dir():
        raise FolderRefused(f"--from {path} is a file, not a folder: give the project's folder")
    root = given.resolve()
    skipped = {Path(p).resolve() for p in leave_out}
    files, size = [], 0
    for file in iter_project_files(root):
        if file in skipped or any(parent in skipped for parent in file.parents):
            continue
        if not os.access(file, os.R_OK):
            raise FolderRefused(f"--from {path}: cannot read {file.relative_to(root)} (permission denied)")
        files.append(file.relative_to(root).as_posix())
        size += file.lstat().st_size
    if size > cap_mb * MB:
        raise FolderRefused(
            f"--from {path} holds {size / MB:,.0f} MB of files (node_modules, .git and build folders not "
            f"counted), over the workspace cap of {cap_mb:,} MB"
        )
    links = _links(root, skipped)
    if not files:
        why = f" ({len(links)} symbolic link(s), never followed)" if links else ""
        raise FolderRefused(f"--from {path}: no files to start from{why}")
    return ProjectFolder(root=root, files=files, links=links, size=size)


def _links(root: Path, skipped: set[Path]) -> list[str]:
    """The symbolic links under ``root`` (not inside skipped folders), as relative paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and here / d not in skipped)
        for name in sorted(dirnames + filenames):
            if (here / name).is_symlink():
                found.append((here / name).relative_to(root).as_posix())
    return found


def import_folder(store: BlobStore, folder: ProjectFolder) -> str:
    """Store the folder's files as a snapshot (the manifest hash a step's ``files`` names)."""
    return store.snapshot_files(folder.root, folder.files)
