"""What a command that starts or continues a run checks of the runs already recorded, before it draws
anything: a run id already taken, a run that is still running, a step a run does not have.

Each is the user's mistake, so each is one line (exit 2) with advice that works for the run's status:
``resume`` for a run that can continue, ``fork`` for a finished one, another ``--run-id`` always.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webgen_agent.apps.cli.base import fail

if TYPE_CHECKING:
    from pathlib import Path

    from webgen_agent.checkpoints.database import Database
    from webgen_agent.core.context import AgentContext

# Statuses ``resume`` continues (a run waiting for review is asked again).
RESUMABLE = ("failed", "interrupted", "budget", "review")


def _running(record: Any) -> str:
    where = f" on {record.host}" if record.host else ""
    return f"run {record.run_id} is running (pid {record.pid}{where})"


def require_new_run_id(database: Database, run_id: str | None, flag: str = "--run-id") -> None:
    """A run id the user chose is not one of a recorded run; nothing is created to find out."""
    if run_id is None or (not database.is_postgres and not database.path.exists()):
        return
    from webgen_agent.checkpoints.runs import RunIndex

    record = RunIndex(database).get(run_id)
    if record is None:
        return
    if record.status == "running":
        fail(f"{_running(record)}: choose another {flag}")
    if record.status in RESUMABLE:
        fail(
            f"run {run_id} already exists in {database} ({record.status}): `webgen-agent resume {run_id}` "
            f"continues it, or choose another {flag}"
        )
    fail(
        f"run {run_id} already exists in {database} ({record.status}): choose another {flag} "
        f"(`webgen-agent fork {run_id} --step N` continues from one of its steps)"
    )


def announce_new_database(database: Database) -> None:
    """One line when a run makes the default database's folder (``.webgen`` in the working folder):
    the only database folder made without being asked (apps/checks.py refuses other missing ones)."""
    if database.is_postgres or database.path.parent.exists():
        return
    from webgen_agent.apps.cli.base import errors

    database.path.parent.mkdir(parents=True)
    errors.print(
        f"note: made {database.path.parent.resolve()} for the run database (--db or WEBGEN_DB puts it elsewhere)",
        soft_wrap=True,
        highlight=False,
    )


def require_resumable(record: Any) -> None:
    """``resume`` of a run that is running or has ended is the user's mistake."""
    if record.status == "running":
        fail(f"{_running(record)}: nothing to resume; wait for it, or stop it (Ctrl-C) and resume it then")
    if record.status in ("finished", "rejected"):
        fail(
            f"run {record.run_id} has {record.status}: nothing to resume "
            f"(`webgen-agent fork {record.run_id} --step N` continues from one of its steps)"
        )


def require_step(database: Database, run_id: str, step: int) -> None:
    """``fork --step N`` of a step the run has; the steps it has are named otherwise."""
    from webgen_agent.apps.cli.base import run_async
    from webgen_agent.checkpoints.history import read_history, step_checkpoints

    steps = sorted(step_checkpoints(run_async(read_history(database, run_id))))
    if step in steps:
        return
    if not steps:
        fail(f"run {run_id} has no step {step}: it recorded none")
    fail(
        f"run {run_id} has no step {step}: its steps are {steps[0]} to {steps[-1]} "
        f"(`webgen-agent history {run_id}` lists them)"
    )


def require_start_folder(context: AgentContext, out: Path | None, database: Database) -> AgentContext:
    """``run --from DIR``: a folder a run can start from (checkpoints/folder_import.py), else one line;
    the context then names it by its absolute path (the run's nodes may work elsewhere)."""
    if not context.start_from:
        return context
    from webgen_agent.checkpoints.folder_import import FolderRefused, read_project_folder
    from webgen_agent.nodes.local_dirs import agent_paths

    leave_out = agent_paths(database, context.runs_dir, *([out] if out else []))
    try:
        folder = read_project_folder(context.start_from, cap_mb=context.sandbox.workspace_mb, leave_out=leave_out)
    except FolderRefused as exc:
        fail(str(exc))
    return context.model_copy(update={"start_from": str(folder.root)})
