"""What a step records of running its site: the execution record, and WebGen-Agent's error words
read from the step's install output and server log (upstream profile).

Shared by the Executor (a code edit's run) and the GUI-Tester (a GUI test's own run, where the
profile's rules start the site anew for it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from webgen_agent.core.profiles import EnvironmentRules
from webgen_agent.core.state import Execution
from webgen_agent.nodes.feedback import clipped_log
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.process import ManagedProcess
from webgen_agent.tools.site import ExecutionResult, SiteRunner

MAX_LOG_BYTES = 200_000  # of the server's log kept for the upstream profile's feedback


def server_log_mark(server: ManagedProcess | None) -> tuple[Path, int] | None:
    """Where the dev server's log ends now, to read what this step adds to it."""
    if server is None or not server.log_path.is_file():
        return None
    return server.log_path, server.log_path.stat().st_size


def server_log_since(server: ManagedProcess | None, mark: tuple[Path, int] | None) -> str:
    """The server's log written since ``mark`` (all of it when the server was started anew)."""
    if server is None:
        return ""
    return _read_log(server.log_path, mark[1] if mark is not None and mark[0] == server.log_path else 0)


def _read_log(path: Path, offset: int = 0) -> str:
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(MAX_LOG_BYTES).decode("utf-8", "replace").replace("\x00", "")


def execution_record(result: ExecutionResult) -> Execution:
    """The step's record of running the project, from the site runner's result."""
    return {
        "ok": result.ok,
        "stage": result.stage,
        "error": result.error,
        "install_ran": result.install_ran,
        "install_cached": result.install_cached,
        "server_restarted": result.server_restarted,
        "url": result.url,
        "install_s": result.install_s,
        "start_s": result.start_s,
        "fresh_s": result.fresh_s,
    }


async def log_error_words(
    execution: Execution,
    result: ExecutionResult,
    site: SiteRunner,
    log_mark: tuple[Path, int] | None,
    environment: EnvironmentRules,
) -> None:
    """WebGen-Agent's error signals: the word "error" in npm's output, or in the server's log as the
    feedback shows it (clipped: A and RL ``execute_for_feedback.py`` test ``start_results``)."""
    stopped = ""
    if site.server is None and result.stage in ("start", "http"):
        # A server that stopped in this step (it exited, or never answered) is gone: its whole log, as
        # upstream reads the file (the last 40 lines came back with the result, when there is no file).
        whole = await asyncio.to_thread(_read_log, Path(result.server_log)) if result.server_log else ""
        stopped = whole or result.log_tail
    logs = {
        "install": result.install_log or (result.log_tail if result.stage == "install" else ""),
        "server": server_log_since(site.server, log_mark) or stopped,
    }
    execution["logs"] = await get_resources().store.aput_json(logs)
    execution["install_error"] = "error" in logs["install"].lower()
    shown = clipped_log(logs["server"], whole_up_to=environment.start_log_chars)
    execution["start_error"] = "error" in shown.lower()
