"""Whether a run can work here, checked before it starts: model endpoints, database, browser, Node, npm, sandbox.

``webgen-agent doctor`` runs every check and prints a table with a fix for each failing line. The
commands that start runs (``run``, ``rollout``, ``bench``) run the fast ones first (endpoints
reachable, the database reachable and writable), so a refused connection or a mistyped host ends in
one line within seconds, before anything is recorded, instead of waiting out the model patience.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
from dataclasses import replace
from typing import Any

import httpx

from webgen_agent.apps.checks import Check, database_check
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import ROLES, AgentContext, ModelSettings, Role, api_key_for, find_chromium
from webgen_agent.tools.endpoints import connection_problem
from webgen_agent.tools.limits import limit_warnings
from webgen_agent.tools.sandbox import sandbox_problem
from webgen_agent.tools.site.deps import npm_registry, registry_problem

# A refused connection or an unknown host answers at once; a silent host gets this long.
CONNECT_TIMEOUT_S = 3.0
# The smallest PNG (1x1, transparent): enough to ask whether an endpoint takes images.
_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


# -- model endpoints -------------------------------------------------------------------------------


def _endpoints(context: AgentContext) -> dict[str, tuple[list[Role], ModelSettings]]:
    """Each distinct base URL with the roles that use it (the first role's settings stand for it)."""
    found: dict[str, tuple[list[Role], ModelSettings]] = {}
    for role in ROLES:
        settings: ModelSettings = getattr(context, role)
        roles, _ = found.setdefault(settings.base_url.rstrip("/"), ([], settings))
        roles.append(role)
    return found


def _headers(settings: ModelSettings, role: Role) -> dict[str, str]:
    key = api_key_for(settings, role)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _unreachable(error: httpx.HTTPError) -> str:
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    return connection_problem(error)


async def endpoint_checks(context: AgentContext, *, deep: bool = False) -> list[Check]:
    """Each endpoint reachable and its models listed; with ``deep``, also what the models accept."""
    endpoints = _endpoints(context)
    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=CONNECT_TIMEOUT_S)) as client:
        groups = await asyncio.gather(
            *(
                _endpoint_checks(client, url, roles, settings, context, deep)
                for url, (roles, settings) in endpoints.items()
            )
        )
    return [check for group in groups for check in group]


async def _endpoint_checks(
    client: httpx.AsyncClient, url: str, roles: list[Role], settings: ModelSettings, context: AgentContext, deep: bool
) -> list[Check]:
    name = f"{'/'.join(roles)} endpoint"
    fix_url = "start the server, or fix --base-url / OPENAI_BASE_URL" + "".join(
        f" / WEBGEN_{role.upper()}_BASE_URL" for role in roles
    )
    try:
        answer = await client.get(f"{url}/models", headers=_headers(settings, roles[0]))
    except httpx.HTTPError as error:
        return [Check(name=name, ok=False, detail=f"{url} is not reachable: {_unreachable(error)}", fix=fix_url)]
    if answer.status_code in (401, 403):
        keys = " / ".join(f"WEBGEN_{role.upper()}_API_KEY" for role in roles)
        return [
            Check(
                name=name,
                ok=False,
                detail=f"{url} refused the API key (HTTP {answer.status_code})",
                fix=f"set OPENAI_API_KEY or {keys}",
            )
        ]
    checks = [Check(name=name, ok=True, detail=f"{url} answers (HTTP {answer.status_code})")]
    listed = _listed_models(answer)
    for role in roles:
        model = getattr(context, role).model
        if listed is None:
            continue
        if model in listed:
            length = listed[model].get("max_model_len") or listed[model].get("context_length")
            suffix = f", context {length} tokens" if length else ""
            checks.append(Check(name=f"{role} model", ok=True, detail=f"{model} is served{suffix}"))
        else:
            served = ", ".join(sorted(listed)[:8]) or "none"
            checks.append(
                Check(
                    name=f"{role} model",
                    ok=False,
                    detail=f"{model} is not among the models {url} lists ({served})",
                    fix=f"pass --{role}-model or --model with a listed name",
                    blocking=deep,
                )
            )
    if deep:
        checks += await _capabilities(client, url, roles, context)
    return checks


def _listed_models(answer: httpx.Response) -> dict[str, dict[str, Any]] | None:
    """The models a ``GET /models`` answer lists, by id; None when it lists none (not every server does)."""
    if answer.status_code != 200:
        return None
    try:
        data = answer.json().get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, list) or not data:
        return None
    return {str(item.get("id")): item for item in data if isinstance(item, dict) and item.get("id")}


async def _capabilities(client: httpx.AsyncClient, url: str, roles: list[Role], context: AgentContext) -> list[Check]:
    """A one-token call per role: images for the vision role, structured output for every role."""
    checks = []
    for role in roles:
        settings: ModelSettings = getattr(context, role)
        body: dict[str, Any] = {"model": settings.model, "max_tokens": 1}
        if role == "vlm":
            image = {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64," + base64.b64encode(_PIXEL).decode()},
            }
            body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "Say OK."}, image]}]
            checks.append(await _probe(client, url, settings, role, body, f"{role} images", "takes images"))
        body["messages"] = [{"role": "user", "content": 'Answer {"ok": true}.'}]
        body["response_format"] = {"type": "json_object"}
        structured = await _probe(client, url, settings, role, body, f"{role} structured output", "structured output")
        if not structured.ok:  # not a failure: the prompt fallback (schema in the prompt) is used
            structured = replace(
                structured, blocking=False, detail=structured.detail + "; the prompt fallback is used", fix=""
            )
        checks.append(structured)
    return checks


async def _probe(
    client: httpx.AsyncClient, url: str, settings: ModelSettings, role: Role, body: dict[str, Any], name: str, what: str
) -> Check:
    try:
        answer = await client.post(f"{url}/chat/completions", json=body, headers=_headers(settings, role))
    except httpx.HTTPError as error:
        return Check(name=name, ok=False, detail=f"no answer: {_unreachable(error)}", blocking=False)
    if answer.status_code == 200:
        return Check(name=name, ok=True, detail=f"{settings.model} {what}")
    return Check(
        name=name,
        ok=False,
        detail=f"{settings.model} answered HTTP {answer.status_code}: {answer.text.strip()[:160]}",
        fix="use a vision model for --vlm-model" if name.endswith("images") else "",
    )


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
            fix="install chromium (scripts/setup.sh does) or set WEBGEN_CHROMIUM",
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
                fix="install bubblewrap (scripts/setup.sh does) or pass --no-sandbox",
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
