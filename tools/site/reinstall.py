"""`npm install` once more in an installed tree, for its output (the upstream profile's every step).

WebGen-Agent runs `npm install` at every step and reads its output for the word "error"; a tree
restored from the dependency cache, or installed at an earlier step, prints nothing. Running npm
again in the installed tree gives the step the output upstream reads (an up-to-date tree takes npm
a second or two).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from webgen_agent.tools.npm_cache import private_npm_cache
from webgen_agent.tools.process import ProcessRegistry, strip_ansi
from webgen_agent.tools.sandbox import Confinement, own_copies
from webgen_agent.tools.site.deps import MAX_OUTPUT_BYTES, InstallResult, npm_install
from webgen_agent.tools.site.logs import explain, last_lines


def _output(log: Path) -> str:
    try:
        with log.open("rb") as handle:
            return strip_ansi(handle.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace"))
    except OSError:
        return ""


async def install_again(
    workspace: Path,
    before: InstallResult,
    *,
    timeout_s: float,
    log_path: Path,
    registry: ProcessRegistry | None,
    sandbox: Confinement | None,
    npm_cache: Path | None,
    quiet: bool,
) -> InstallResult:
    """A plain `npm install` (no retry) in ``workspace``, whose tree ``before`` installed or kept;
    its output becomes the step's install output. Never run under a live dev server."""
    started = time.monotonic()
    if sandbox is not None and (workspace / "node_modules").is_dir():
        # npm may run the project's install scripts: never against files the dependency cache shares.
        await asyncio.to_thread(own_copies, workspace / "node_modules")
    async with private_npm_cache(sandbox, npm_cache) as npm_sandbox:
        result = await npm_install(
            workspace, [], timeout_s=timeout_s, log_path=log_path, registry=registry, sandbox=npm_sandbox, quiet=quiet
        )
    output = await asyncio.to_thread(_output, log_path)
    seconds = round(before.seconds + time.monotonic() - started, 3)
    if not result.ok:
        headline = (
            f"`npm install` did not finish within {timeout_s:g} s and was stopped."
            if result.timed_out
            else f"`npm install` failed (exit code {result.exit_code})."
        )
        return InstallResult(
            ran=True,
            error=explain(headline, result.output_tail),
            log_tail=last_lines(result.output_tail),
            output=output,
            seconds=seconds,
        )
    return before.model_copy(update={"ran": True, "output": output, "seconds": seconds})
