"""Model clients for the three roles (langchain-openai against any OpenAI-compatible endpoint).

Retries of timeouts, 429 and 5xx are left to the OpenAI client (``max_retries``, with backoff);
what is retried here is only a *usable* failure of the answer itself: JSON that does not validate
against the expected schema, with the validation error shown to the model.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import weakref
from typing import Any, Generic, TypeVar

import httpx
import openai
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field, ValidationError

from webgen_agent.core.context import ModelSettings, Role, api_key_for

T = TypeVar("T", bound=BaseModel)
Message = dict[str, Any]


class ModelCallError(RuntimeError):
    """The endpoint could not be used (unreachable, auth, bad request); message is for the user."""


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
        )


class Completion(BaseModel):
    text: str
    usage: Usage
    seconds: float
    model: str
    logprobs: list[dict[str, Any]] | None = Field(default=None, description="Per-token logprobs if returned.")


class StructuredAnswer(BaseModel, Generic[T]):
    value: T | None = None
    error: str | None = Field(default=None, description="Why no valid answer came back, for reports.")
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    seconds: float = 0.0


# langchain-openai caches one async HTTP client per process, bound to the first event loop; a host
# that runs the agent under a second ``asyncio.run`` would get "Event loop is closed". One client
# per running loop (dropped with the loop) keeps connection reuse without that trap.
# openai's default client is built on its own httpx fork, not on httpx: typed loosely.
_loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _client_errors() -> tuple[type[Exception], ...]:
    # Newer openai releases build their default client on a fork of httpx (``httpx2``) whose errors
    # are not httpx's: take the error base class from the client class's own package.
    package = sys.modules[openai.DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0]]
    return tuple({httpx.HTTPError, getattr(package, "HTTPError", httpx.HTTPError)})


# What a request through ``shared_http_client()`` raises when the endpoint cannot be reached.
HTTP_CLIENT_ERRORS = _client_errors()


def shared_http_client() -> Any:
    """The running event loop's HTTP client for model endpoints (made once: each new client loads
    the system's CA certificates, ~30 ms of CPU)."""
    loop = asyncio.get_running_loop()
    client = _loop_clients.get(loop)
    if client is None:
        client = _loop_clients[loop] = openai.DefaultAsyncHttpxClient()
    return client


def chat_model(settings: ModelSettings, role: Role, **overrides: Any) -> ChatOpenAI:
    """A LangChain chat model for ``role``; call it inside the event loop that will use it."""
    kwargs: dict[str, Any] = {
        "http_async_client": shared_http_client(),
        "model": settings.model,
        "base_url": settings.base_url,
        "api_key": api_key_for(settings, role),
        "timeout": settings.timeout_s,
        "max_retries": settings.max_retries,
    }
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.top_p is not None:
        kwargs["top_p"] = settings.top_p
    if settings.max_tokens is not None:
        kwargs["max_tokens"] = settings.max_tokens
    if settings.logprobs:
        kwargs["logprobs"] = True
    kwargs.update(overrides)
    return ChatOpenAI(**kwargs)


def _usage(message: AIMessage) -> Usage:
    meta = message.usage_metadata
    if meta is None:
        return Usage(calls=1)
    return Usage(input_tokens=meta["input_tokens"], output_tokens=meta["output_tokens"], calls=1)


def _endpoint_error(settings: ModelSettings, role: Role, exc: Exception) -> ModelCallError:
    if isinstance(exc, openai.APIConnectionError):
        why = f"cannot reach {settings.base_url} ({exc.__class__.__name__})"
    elif isinstance(exc, openai.APIStatusError):
        body = str(exc.message)[:300]
        why = f"HTTP {exc.status_code} from {settings.base_url}: {body}"
    else:
        why = f"{exc.__class__.__name__}: {exc}"
    return ModelCallError(f"{role} model {settings.model!r}: {why}")


async def complete(settings: ModelSettings, role: Role, messages: list[Message]) -> Completion:
    """One chat completion; raises ModelCallError when the endpoint fails after the client's retries."""
    started = time.monotonic()
    try:
        reply = await chat_model(settings, role).ainvoke(messages)
    except (openai.APIError, openai.APIConnectionError) as exc:
        raise _endpoint_error(settings, role, exc) from exc
    text = reply.content if isinstance(reply.content, str) else _join_parts(reply.content)
    logprobs = (reply.response_metadata.get("logprobs") or {}).get("content") if settings.logprobs else None
    return Completion(
        text=text,
        usage=_usage(reply),
        seconds=time.monotonic() - started,
        model=reply.response_metadata.get("model_name", settings.model),
        logprobs=logprobs,
    )


def _join_parts(parts: list[Any]) -> str:
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in parts)


_JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_json_answer(text: str, schema: type[T]) -> T:
    """Validate a model's JSON answer, also when wrapped in prose or a code fence."""
    candidates = [text.strip()]
    candidates += _JSON_BLOCK.findall(text)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    last_error: Exception | None = None
    for candidate in candidates:
        try:
            return schema.model_validate_json(candidate)
        except ValidationError as exc:
            last_error = exc
    if last_error is None:
        raise ValueError("no JSON object found")
    raise last_error


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """OpenAI ``response_format`` asking for ``schema``; the answer is validated here, not by the client."""
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False},
    }


def _schema_hint(schema: type[BaseModel]) -> str:
    return "Answer with one JSON object only, no prose, matching this JSON schema:\n" + json.dumps(
        schema.model_json_schema(), indent=None
    )


async def ask_structured(
    settings: ModelSettings, role: Role, messages: list[Message], schema: type[T], *, attempts: int = 3
) -> StructuredAnswer[T]:
    """Ask for a ``schema`` answer via ``response_format`` json_schema; also accept JSON in plain text.

    Unparsable or out-of-range answers are retried with the error shown to the model, then
    reported in ``error``; never raised. Endpoint failures raise ModelCallError.
    """
    started = time.monotonic()
    answer: StructuredAnswer[T] = StructuredAnswer()
    conversation = list(messages)
    use_schema = True
    while answer.attempts < attempts:
        answer.attempts += 1
        model = chat_model(settings, role)
        runnable = model.bind(response_format=response_format(schema)) if use_schema else model
        try:
            raw: AIMessage = await runnable.ainvoke(conversation)
        except openai.BadRequestError as exc:
            if use_schema:
                # Some servers reject response_format: ask with the schema in the prompt instead.
                use_schema = False
                conversation = [{"role": "system", "content": _schema_hint(schema)}, *conversation]
                answer.attempts -= 1
                continue
            raise _endpoint_error(settings, role, exc) from exc
        except (openai.APIError, openai.APIConnectionError) as exc:
            raise _endpoint_error(settings, role, exc) from exc
        answer.usage = answer.usage + _usage(raw)
        text = raw.content if isinstance(raw.content, str) else _join_parts(raw.content)
        try:
            answer.value = parse_json_answer(text, schema)
            break
        except (ValidationError, ValueError) as exc:
            problem = _short_validation_error(exc)
            answer.error = f"unusable answer after {answer.attempts} attempt(s): {problem}"
            conversation = [
                *conversation,
                {"role": "assistant", "content": text[:2000]},
                {"role": "user", "content": f"That answer was not valid ({problem}). {_schema_hint(schema)}"},
            ]
    if answer.value is not None:
        answer.error = None
    answer.seconds = time.monotonic() - started
    return answer


def _short_validation_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return f"{where}: {first['msg']}"
    return str(exc)[:200]
