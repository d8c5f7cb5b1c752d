"""Where a machine keeps what its runs share: the process registry and the dependency cache, in one
place whatever the database (``WEBGEN_STATE_DIR``, else ``.webgen`` in the working folder). Light to import:
``webgen-agent demo --prepare`` fills the cache without loading the graph, browser or model clients."""

from __future__ import annotations

from pathlib import Path

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import Settings
from webgen_agent.tools.process import ProcessRegistry


def registry_for(db: str | Path | Database) -> ProcessRegistry:
    """Every agent process of this machine using one database records its process groups in one registry."""
    return ProcessRegistry(Database.of(db).local_dir / "processes.jsonl")


def deps_cache_for(db_path: str | Path | Database) -> Path:
    """The shared node_modules cache of runs using ``db_path`` (WEBGEN_DEPS_CACHE, else this machine's
    state folder: ``Database.local_dir``)."""
    return Path(Settings().deps_cache or Database.of(db_path).local_dir / "deps-cache")


def agent_paths(db_path: str | Path | Database, *folders: str | Path) -> list[Path]:
    """What the agent keeps that a folder a run imports (``run --from``) may hold and must leave out:
    ``folders`` (the runs folder, the run's output folder), the SQLite database with its companions,
    the dependency cache and the process registry."""
    database = Database.of(db_path)
    paths = [Path(folder) for folder in folders]
    if not database.is_postgres:
        paths += [Path(f"{database.path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal", ".lock")]
    registry = registry_for(database)
    return [*paths, deps_cache_for(database), registry.path, registry.lock_path]
