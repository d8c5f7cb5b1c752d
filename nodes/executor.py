"""Executor: write the edit, install if needed, (re)start the site, load it in Chromium.

Errors are real signals (exit codes, a dead server, no HTTP, uncaught page errors, the Vite error
overlay, a blank page) and come back as text for the coder, never as exceptions.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.store import SKIPPED_DIRS, BlobStore
from webgen_agent.core.context import AgentContext
from webgen_agent.core.error_count import count_after, verdict_of
from webgen_agent.core.state import AgentState, Event, Execution, StepUpdate
from webgen_agent.nodes.common import (
    WORKSPACE_MARKER,
    NodeResult,
    Update,
    current_step,
    node,
    prepared_workspace,
    workspace_dir,
)
from webgen_agent.nodes.pages import capture_pages, other_paths, page_record, pages_error
from webgen_agent.nodes.replay import replay_recorded
from webgen_agent.nodes.resources import get_resources
from webgen_agent.nodes.review import review_commands, review_on
from webgen_agent.nodes.site_results import execution_record, log_error_words, server_log_mark
from webgen_agent.tools.bolt import FileAction, parse_reply
from webgen_agent.tools.scaffolds import Scaffold, load_scaffold
from webgen_agent.tools.site import ExecutionResult, ServedModule, SiteRunner
from webgen_agent.tools.site.project import write_default_vite_config
from webgen_agent.tools.workspace import apply_files


def _relative(raw_path: str) -> str:
    """A model-written path as the workspace-relative POSIX path it is written to."""
    return "/".join(p for p in PurePosixPath(raw_path.strip().replace("\\", "/")).parts if p not in ("", "."))


def _diff(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}


def files_on_disk(blobs: BlobStore, workspace: Path) -> dict[str, str]:
    """Manifest of the snapshot the workspace holds now (empty for a new folder).

    After a backtrack or a resume it differs from the state's: ``prepared_workspace`` then restores
    the state's files, which change under a running dev server like an edit does.
    """
    marker = workspace / WORKSPACE_MARKER
    held = marker.read_text() if marker.is_file() else ""
    try:
        return blobs.manifest(held) if held else {}
    except KeyError:  # a folder written with another database: treat every file as new
        return {}


def structure_failure(scaffold: Scaffold, problems: list[str]) -> Execution:
    listed = "\n".join(f"- {p}" for p in problems)
    return {
        "ok": False,
        "stage": "structure",
        "error": f"The {scaffold.name} scaffold's structural check failed, so nothing was installed or started:\n{listed}",
        "install_ran": False,
        "install_cached": False,
        "server_restarted": False,
        "url": None,
        "install_s": 0.0,
        "start_s": 0.0,
        "fresh_s": 0.0,
    }


OVER_CAP_RESET = (
    "The project folder was over its size cap, so what the shell actions and the dev server wrote was "
    "discarded: the step keeps its file actions only (and node_modules is installed again)."
)


def _reset_over_cap(
    blobs: BlobStore,
    workspace: Path,
    files_before: str | None,
    written: list[FileAction],
    over_cap: Callable[[], str | None],
) -> None:
    """Make the workspace hold the previous step's files plus ``written``; drop build folders if still over."""
    blobs.materialize(files_before or None, workspace)
    apply_files(workspace, written)
    if over_cap() is None:
        return
    for name in SKIPPED_DIRS:
        if (workspace / name).is_dir() and not (workspace / name).is_symlink():
            shutil.rmtree(workspace / name, ignore_errors=True)


def _record_workspace(blobs: BlobStore, workspace: Path) -> tuple[str, dict[str, str]]:
    """Snapshot the workspace into the store and mark it as holding that snapshot: (hash, manifest)."""
    files = blobs.snapshot(workspace)
    (workspace / WORKSPACE_MARKER).write_text(files)
    return files, blobs.manifest(files)


@dataclass
class WrittenEdit:
    """The coder's reply applied to the workspace: what the rest of the step runs and records."""

    workspace: Path
    scaffold: Scaffold | None
    files: str  # the workspace's snapshot after the edit
    base_files: str | None  # the snapshot the edit was written over (the parent step's)
    changed: list[str]  # paths that differ from the parent step's files
    problems: list[str]
    events: list[Event]
    served_changes: set[str]  # paths that differ from what the kept dev server last served
    served_before: dict[str, ServedModule]  # what it served of the touched paths before the write


async def write_edit(state: AgentState, context: AgentContext, site: SiteRunner, blobs: BlobStore) -> WrittenEdit:
    """Write the reply's files and run its shell actions (each put to the reviewer first, if asked)."""
    step = current_step(state)
    parsed = parse_reply(await blobs.aget_text(step["completion"]), context.rules.environment.replies)
    # shell review: every command is put to the reviewer first, before anything is written or run, so
    # the executor, run again from its start on each resume, runs no command twice.
    commands: list[str | None] = list(parsed.shell)
    review_notes: list[str] = []
    events: list[Event] = []
    reviewed = review_on(context, "shell")
    if reviewed and commands:
        commands, review_notes, events = await review_commands(state, parsed.shell)
    files_before = state.get("files")
    before = await blobs.amanifest(files_before) if files_before else {}
    disk_before = await asyncio.to_thread(files_on_disk, blobs, workspace_dir(state))
    # What a kept dev server serves before anything is written: afterwards it must serve these anew.
    touched = {_relative(f.path) for f in parsed.files} | _diff(disk_before, before)
    served_before = await site.served_modules(touched)
    workspace = await prepared_workspace(state)

    scaffold = load_scaffold(context.scaffold) if context.scaffold else None
    refusals = {f.path: why for f in parsed.files if scaffold and (why := scaffold.refusal(_relative(f.path)))}
    written = [f for f in parsed.files if f.path not in refusals]
    if step.get("imported"):  # step 0 of a run from a folder: the folder's files, binary ones too
        await blobs.amaterialize(step["imported"], workspace)
        written = []
    applied = await asyncio.to_thread(apply_files, workspace, written)
    if context.rules.profile.default_vite_config:
        await asyncio.to_thread(write_default_vite_config, workspace)
    problems = [*step["problems"], *(f"{path}: {why}" for path, why in {**refusals, **applied.refused}.items())]
    problems += review_notes
    for asked, command in zip(parsed.shell, commands, strict=True):
        if command is None:  # refused by the reviewer (review_notes says so)
            continue
        if not (context.allow_shell or reviewed):
            problems.append(f"Shell action not run (shell actions are disabled): {asked[:120]}")
            continue
        problems += await _shell_action(site, command, context.install_timeout_s)
    # An over-cap workspace is never recorded (so never stored, nor copied to site/): it goes back
    # to the step's own files, and build folders (node_modules included) are dropped if need be.
    if await asyncio.to_thread(site.size_problem):
        await site.stop()
        await asyncio.to_thread(_reset_over_cap, blobs, workspace, files_before, written, site.size_problem)
        problems.append(OVER_CAP_RESET)

    files, after = await asyncio.to_thread(_record_workspace, blobs, workspace)
    return WrittenEdit(
        workspace=workspace,
        scaffold=scaffold,
        files=files,
        base_files=files_before,
        changed=sorted(_diff(before, after)),
        problems=problems,
        events=events,
        # The server's view: what differs from the files it last served (a restore included), not
        # the step's diff against its parent.
        served_changes=_diff(disk_before, after),
        served_before=served_before,
    )


async def _shell_action(site: SiteRunner, command: str, timeout_s: float) -> list[str]:
    """Run one shell action of the reply; the problems it leaves for the coder."""
    problems = []
    shell = await site.shell(command, timeout_s=timeout_s)
    if shell.timed_out:
        problems.append(
            f"Shell action `{command[:120]}` did not finish within {timeout_s:g} s and was "
            f"stopped: {shell.output_tail[-1500:]}"
        )
    elif shell.exit_code != 0:
        problems.append(f"Shell action `{command[:120]}` failed: {shell.output_tail[-1500:]}")
    if too_big := await asyncio.to_thread(site.size_problem):  # walks the workspace
        problems.append(too_big)
    return problems


def _structure_failed(state: AgentState, edit: WrittenEdit, structure: list[str]) -> NodeResult:
    """The scaffold's check failed: the step ends errored before anything is installed or started."""
    assert edit.scaffold is not None
    index = current_step(state)["index"]
    failed: StepUpdate = {
        "index": index,
        "files": edit.files,
        "base_files": edit.base_files,
        "changed": edit.changed,
        "problems": edit.problems,
        "execution": structure_failure(edit.scaffold, structure),
        "structure_ok": False,
        "errored": True,
    }
    update: Update = {
        "files": edit.files,
        "edit_step": index,
        "steps": [failed],
        "events": edit.events,
        "consecutive_errors": count_after(state, "errored"),
    }
    return NodeResult(update, "structure: the scaffold's check failed")


async def capture_site(
    patch: StepUpdate, result: ExecutionResult, edit: WrittenEdit, site: SiteRunner, context: AgentContext
) -> None:
    """Load the site in Chromium: the screenshot, the page's text and errors, and its other pages
    when it runs; a page that fails to render turns the execution into a render failure."""
    assert result.url is not None
    resources = get_resources()
    blobs = resources.store
    execution = patch["execution"]
    browser = await resources.browser(context)
    capture = await browser.capture(
        result.url,
        viewport=(context.viewport_width, context.viewport_height),
        timeout_s=context.page_timeout_s,
        offline=context.offline_pages,
        wait_s=context.rules.profile.capture_wait_s,
    )
    execution["capture_s"] = capture.seconds
    site.note_page(capture.module_paths, capture.failed_module_paths)
    if capture.png:
        patch["screenshot"] = await blobs.aput(capture.png)
    patch["page"] = await blobs.aput_json(
        {
            "title": capture.title,
            "visible_text": capture.visible_text,
            "console_errors": capture.console_errors[:20],
            "page_errors": capture.page_errors[:20],
        }
    )
    render_error = capture.render_error
    if result.ok:  # the site's other pages: declared routes, else the landing page's links
        routes = edit.scaffold.routes(edit.workspace) if edit.scaffold else None
        paths = other_paths(result.url, capture, routes, context.max_pages)
        others = await capture_pages(browser, result.url, paths, context)
        for _, other in others:
            site.note_page(other.module_paths, other.failed_module_paths)
        pages = [await page_record(urlsplit(result.url).path or "/", capture, blobs)]
        pages += [await page_record(path, other, blobs) for path, other in others]
        patch["pages"] = await blobs.aput_json(pages)
        patch["page_count"] = len(pages)
        render_error = render_error or pages_error(pages)
    # The server died under the capture because of a memory limit: that, not the failed page, is the error.
    if (died := await asyncio.to_thread(site.memory_death)) is not None:
        execution.update({"ok": False, "stage": "start", "error": died})
    elif render_error:
        execution.update({"ok": False, "stage": "render", "error": render_error})


@node
async def executor(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    context = runtime.context
    rules = context.rules.profile
    resources = get_resources()
    step = current_step(state)
    site = resources.site(workspace_dir(state), context)
    edit = await write_edit(state, context, site, resources.store)
    structure = edit.scaffold.check(edit.workspace) if edit.scaffold else []
    if structure:  # checked before anything is installed or started
        return _structure_failed(state, edit, structure)

    log_mark = server_log_mark(site.server)
    result = await site.ensure_running(edit.served_changes, served_before=edit.served_before)
    execution = execution_record(result)
    patch: StepUpdate = {
        "index": step["index"],
        "files": edit.files,
        "base_files": edit.base_files,
        "changed": edit.changed,
        # A server killed by a memory limit since the last step (it was started again for this one).
        "problems": [*edit.problems, *([note] if (note := site.take_memory_note()) else [])],
        "execution": execution,
    }
    if edit.scaffold is not None:
        patch["structure_ok"] = True
    if result.url and (result.ok or rules.grade_every_capture):
        await capture_site(patch, result, edit, site, context)
    if context.rules.replay_tests and execution["ok"] and result.url:
        # Every GUI test recorded so far, against the kept dev server: regressions show at this step.
        if (replay := await replay_recorded(state, context, result.url)) is not None:
            patch["replay"] = replay
    errored = not execution["ok"]
    update: Update = {"files": edit.files, "edit_step": step["index"], "steps": [patch], "events": edit.events}
    if rules.error_words_in_logs:
        await log_error_words(execution, result, site, log_mark, context.rules.environment)
        if patch.get("screenshot"):
            # The Screenshot-Judge grades it and decides whether the step errored.
            patch["errored"] = execution["install_error"] or execution["start_error"]
            update["consecutive_errors"] = count_after(state, "open")
            return NodeResult(update, "captured")
        errored = True  # no screenshot: nothing to grade
    patch["errored"] = errored
    update["consecutive_errors"] = count_after(state, verdict_of(errored, final=False))  # a run page is graded next
    return NodeResult(update, f"{execution['stage']}: {'ok' if not errored else (execution['error'] or '')[:80]}")
