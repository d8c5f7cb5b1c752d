"""The model endpoints' checks: does each endpoint answer as an OpenAI-compatible one?

A check passes only on a real answer: the model listing (``GET /models``) is JSON naming the models,
and (``doctor``, or before a run when an endpoint lists nothing) a one-token chat completion comes
back in the OpenAI shape, for the vision role one asked with an image. An endpoint answering HTTP 200
with a web page or with bytes that are not HTTP fails, naming what came back (``tools/answer_shape``).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
from typing import Any

import httpx

from webgen_agent.apps.checks import Check
from webgen_agent.core.context import ROLES, AgentContext, ModelSettings, Role, api_key_for
from webgen_agent.tools.answer_shape import body_problem, completion_problem, foreign_answer, listing_problem
from webgen_agent.tools.endpoints import connection_problem

# A refused connection or an unknown host answers at once; a silent host gets this long.
CONNECT_TIMEOUT_S = 3.0
# The smallest PNG (1x1, transparent): enough to ask whether an endpoint takes images.
_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


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
    if (what := foreign_answer(error)) is not None:
        return f"it answered {what}"
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    return connection_problem(error)


def _not_openai(url: str, what: str) -> str:
    return f"{url} is not an OpenAI-compatible endpoint: it answered {what}"


async def endpoint_checks(context: AgentContext, *, deep: bool = False) -> list[Check]:
    """Each endpoint answering as an OpenAI-compatible one and listing its models; with ``deep``
    (``doctor``), also a chat completion per role and what the models accept."""
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
        if (what := foreign_answer(error)) is not None:
            return [Check(name=name, ok=False, detail=_not_openai(url, what), fix=fix_url)]
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
    listed, problem = _listed_models(answer)
    if problem is not None:
        return [Check(name=name, ok=False, detail=_not_openai(f"{url}/models", problem), fix=fix_url)]
    checks = [Check(name=name, ok=True, detail=f"{url} answers (HTTP {answer.status_code})")]
    checks += [_model_check(url, role, getattr(context, role).model, listed, deep) for role in roles if listed]
    if deep or answer.status_code != 200:
        # Without a listing (not every server has one) the run's first question is asked now.
        checks += await _capabilities(client, url, roles, context, deep=deep, fix=fix_url)
    return checks


def _listed_models(answer: httpx.Response) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The models a ``GET /models`` answer lists, by id (none when it lists none or has no listing:
    not every server does), or what came back instead of a model list."""
    if answer.status_code != 200:
        return {}, None
    data, problem = body_problem(answer.content, answer.headers.get("content-type", ""))
    problem = problem or listing_problem(data)
    if problem is not None:
        return {}, problem
    return {str(item.get("id")): item for item in data["data"] if isinstance(item, dict) and item.get("id")}, None


def _model_check(url: str, role: Role, model: str, listed: dict[str, dict[str, Any]], blocking: bool) -> Check:
    if model in listed:
        length = listed[model].get("max_model_len") or listed[model].get("context_length")
        suffix = f", context {length} tokens" if length else ""
        return Check(name=f"{role} model", ok=True, detail=f"{model} is served{suffix}")
    served = ", ".join(sorted(listed)[:8]) or "none"
    return Check(
        name=f"{role} model",
        ok=False,
        detail=f"{model} is not among the models {url} lists ({served})",
        fix=f"pass --{role}-model or --model with a listed name",
        blocking=blocking,
    )


async def _capabilities(
    client: httpx.AsyncClient, url: str, roles: list[Role], context: AgentContext, *, deep: bool, fix: str
) -> list[Check]:
    """One-token calls per role: a plain chat completion; with ``deep``, one with an image for the
    vision role and one asking for structured output."""
    checks = []
    for role in roles:
        settings: ModelSettings = getattr(context, role)
        body: dict[str, Any] = {"model": settings.model, "max_tokens": 1}
        body["messages"] = [{"role": "user", "content": "Say OK."}]
        chat = await _probe(client, url, settings, role, body, f"{role} chat", "answers a chat completion")
        checks.append(replace(chat, fix=chat.fix or ("" if chat.ok else fix)))
        if not deep or not chat.ok:
            continue
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
    """One chat completion; it passes only when the answer is a chat completion in the OpenAI shape."""
    try:
        answer = await client.post(f"{url}/chat/completions", json=body, headers=_headers(settings, role))
    except httpx.HTTPError as error:
        return Check(name=name, ok=False, detail=f"no answer: {_unreachable(error)}")
    if answer.status_code != 200:
        return Check(
            name=name,
            ok=False,
            detail=f"{settings.model} answered HTTP {answer.status_code}: {' '.join(answer.text.split())[:160]}",
            fix="use a vision model for --vlm-model" if name.endswith("images") else "",
        )
    data, problem = body_problem(answer.content, answer.headers.get("content-type", ""))
    problem = problem or completion_problem(data)
    if problem is not None:
        return Check(name=name, ok=False, detail=_not_openai(f"{url}/chat/completions", problem))
    return Check(name=name, ok=True, detail=f"{settings.model} {what}")
