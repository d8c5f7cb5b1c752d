"""Executor: write the edit, install if needed, (re)start the site, load it in Chromium.

Errors are real signals (exit codes, a dead server, no HTTP, uncaught page errors, the Vite error
overlay, a blank page) and come back as text for the coder, never as exceptions.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.graph.context import AgentContext
from webgen_agent.graph.resources import get_resources
from webgen_agent.graph.state import AgentState, Step
from webgen_agent.nodes.common import WORKSPACE_MARKER, Update, current_step, node, prepared_workspace
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.site import run_shell
from webgen_agent.tools.workspace import apply_files

@node("executor")
async def executor(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    context = runtime.context
    resources = get_resources()
    blobs = resources.store
    step = current_step(state)
    parsed = parse_reply(blobs.get_text(step["completion"]))
    workspace = prepared_workspace(state)
    before = blobs.manifest(state["files"]) if state.get("files") else {}

    applied = apply_files(workspace, parsed.files)
    problems = [*step.get("problems", []), *(f"{path}: {why}" for path, why in applied.refused.items())]
    for command in parsed.shell:
        if not context.allow_shell:
            problems.append(f"Shell action not run (shell actions are disabled): {command[:120]}")
            continue
        result = await run_shell(
            command, cwd=workspace, timeout_s=context.install_timeout_s, registry=resources.registry
        )
        if result.exit_code != 0 or result.timed_out:
            problems.append(f"Shell action `{command[:120]}` failed: {result.output_tail[-1500:]}")

    files = blobs.snapshot(workspace)
    (workspace / WORKSPACE_MARKER).write_text(files)
    after = blobs.manifest(files)
    changed = sorted(p for p in after.keys() | before.keys() if after.get(p) != before.get(p))

    site = resources.site(workspace, context)
    result = await site.ensure_running(set(changed))
    execution = {
        "ok": result.ok,
        "stage": result.stage,
        "error": result.error,
        "install_ran": result.install_ran,
        "install_cached": result.install_cached,
        "server_restarted": result.server_restarted,
        "url": result.url,
    }
    patch: Step = {
        "index": step["index"],
        "files": files,
        "changed": changed,
        "problems": problems,
        "execution": execution,
    }
    if result.ok and result.url:
        browser = await resources.browser(context)
        capture = await browser.capture(
            result.url,
            viewport=(context.viewport_width, context.viewport_height),
            timeout_s=context.page_timeout_s,
        )
        if capture.png:
            patch["screenshot"] = blobs.put(capture.png)
        patch["page"] = blobs.put_json(
            {
                "title": capture.title,
                "visible_text": capture.visible_text,
                "console_errors": capture.console_errors[:20],
                "page_errors": capture.page_errors[:20],
            }
        )
        render_error = capture.render_error
        if render_error:
            execution.update(ok=False, stage="render", error=render_error)
    errored = not execution["ok"]
    patch["errored"] = errored
    return {
        "files": files,
        "edit_step": step["index"],
        "steps": [patch],
        "consecutive_errors": state.get("consecutive_errors", 0) + 1 if errored else state.get("consecutive_errors", 0),
        "_message": f"{execution['stage']}: {'ok' if not errored else (execution['error'] or '')[:80]}",
    }
