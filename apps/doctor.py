"""Whether a run can work here, checked before it starts: model endpoints, database, browser, Node, npm, sandbox.

``webgen-agent doctor`` runs every check and prints a table with a fix for each failing line. The
commands that start runs (``run``, ``rollout``, ``bench``) run the fast ones first (endpoints
answering as OpenAI-compatible ones, the database reachable and writable), so a refused connection,
a mistyped host or a port where a web page answers ends in one line within seconds, before anything
is recorded, instead of waiting out the model patience. The endpoints' checks are ``apps/probes.py``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

from webgen_agent.apps.checks import Check, database_check
from webgen_agent.apps.probes import endpoint_checks
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import AgentContext, find_chromium
from webgen_agent.tools.limits import limit_warnings
from webgen_agent.tools.sandbox import sandbox_fix, sandbox_problem
from webgen_agent.tools.site.registry import npm_registry, registry_problem


def _version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def tool_checks(context: AgentContext) -> list[Check]:
    """Chromium, Node and npm installed; bubblewrap able to start (when the sandbox is on)."""
    checks = []
    chromium = find_chromium(context.chromium)
    version = _version([chromium, "--version"]) if chromium else None
    checks.append(
        Check(name="chromium", ok=True, detail=f"{chromium}: {version}")
        if version
        else Check(
            name="chromium",
            ok=False,
            detail=f"{chromium or 'no Chromium found'} does not run",
            fix="install chromium-headless-shell or chromium (scripts/setup.sh does) or set WEBGEN_CHROMIUM",
        )
    )
    for tool in ("node", "npm"):
        found = shutil.which(tool)
        version = _version([found, "--version"]) if found else None
        checks.append(
            Check(name=tool, ok=True, detail=f"{found}: {version}")
            if version
            else Check(
                name=tool, ok=False, detail=f"{tool} is not installed", fix="install Node.js 18 or later with npm"
            )
        )
    problem = sandbox_problem() if context.sandbox.enabled else None
    if context.sandbox.enabled:
        checks.append(
            Check(name="sandbox", ok=True, detail="bubblewrap starts")
            if problem is None
            else Check(
                name="sandbox",
                ok=False,
                detail=problem,
                fix=f"{sandbox_fix(problem)} or pass --no-sandbox",
            )
        )
        checks.append(_limits_check(context))
    return checks


def _limits_check(context: AgentContext) -> Check:
    """The sandbox's memory and CPU caps enforceable for all its processes together (a warning, not a failure)."""
    lost = limit_warnings(context.sandbox)
    if not lost:
        return Check(name="sandbox limits", ok=True, detail="one cgroup per sandbox: processes, memory, CPU")
    return Check(
        name="sandbox limits",
        ok=False,
        blocking=False,
        detail=lost[0],
        fix="run the agent where it may make cgroups under /sys/fs/cgroup (as root in a container or VM)",
    )


async def registry_check() -> Check:
    """The npm registry reachable (installs the dependency cache cannot serve need it); a warning, not a failure."""
    problem = await registry_problem(fresh=True)
    if problem is not None:
        return Check(
            name="npm registry",
            ok=False,
            detail=f"{npm_registry()} is not reachable: {problem}",
            fix="installs work only from the dependency cache (a project installed here before)",
            blocking=False,
        )
    return Check(name="npm registry", ok=True, detail=f"{npm_registry()} answers")


# -- together --------------------------------------------------------------------------------------------


async def preflight(context: AgentContext, database: Database | None) -> list[Check]:
    """The fast checks run before a run starts: endpoints reachable, database reachable and writable."""
    if database is None:
        return await endpoint_checks(context)
    endpoints, database_result = await asyncio.gather(endpoint_checks(context), database_check(database))
    return [*endpoints, database_result]


async def doctor(context: AgentContext, database: Database) -> list[Check]:
    """Every check ``webgen-agent doctor`` shows."""
    endpoints, database_result, registry = await asyncio.gather(
        endpoint_checks(context, deep=True), database_check(database), registry_check()
    )
    tools = await asyncio.to_thread(tool_checks, context)
    return [*endpoints, database_result, *tools, registry]
