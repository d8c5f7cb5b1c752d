"""Shell actions the coder model writes, run in the workspace."""

from __future__ import annotations

from pathlib import Path

from webgen_agent.tools.process import CommandResult, ProcessRegistry, run_command, scrubbed_env
from webgen_agent.tools.sandbox import Confinement


async def run_shell(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    registry: ProcessRegistry | None = None,
    log_path: Path | None = None,
    sandbox: Confinement | None = None,
) -> CommandResult:
    """Run a model-written shell action in the workspace with the scrubbed environment, confined by ``sandbox``.

    ``bash -c`` rather than ``bash -lc``: a login shell reads /etc/profile and ~/.profile, which
    could export again the secrets the scrubbed environment removed (and reset PATH).
    """
    return await run_command(
        ["bash", "-c", command],
        cwd=cwd,
        timeout_s=timeout_s,
        env=scrubbed_env(),
        log_path=log_path,
        registry=registry,
        sandbox=sandbox,
    )
