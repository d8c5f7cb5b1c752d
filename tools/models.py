"""Model clients for the three roles (langchain-openai against any OpenAI-compatible endpoint).

Endpoint trouble (429, 5xx, timeouts, dropped connections) is waited out by ``tools.endpoints``
(patience, Retry-After, fallback endpoint); a prompt the endpoint finds too long is condensed by
``tools.condense`` and sent again. What is retried here is a *usable* failure of the answer itself:
a structured answer cut by the length limit, filtered, refused, empty, or JSON that does not
validate, with the problem shown to the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import sys
import time
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx
from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field, ValidationError

from webgen_agent.core.context import ModelSettings, Role, api_key_for, validation_summary
from webgen_agent.core.costs import Usage
from webgen_agent.tools.condense import MAX_LEVEL, condense, says_too_long
from webgen_agent.tools.endpoints import (
    EndpointEvent,
    MalformedResponse,
    ModelCallError,
    call_patiently,
    report,
    status_of,
)

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

# openai and langchain-openai are imported where a model is called, not with this module: together
# they take seconds to import, which the LangGraph server's start (graph/studio.py) and commands
# that call no model would pay for nothing.

__all__ = [
    "ModelCallError",
    "Completion",
    "StructuredAnswer",
    "UsageMeter",
    "ask_structured",
    "chat_model",
    "complete",
    "metered",
    "spend",
]

T = TypeVar("T", bound=BaseModel)
Message = dict[str, Any]


class UsageMeter:
    """The usage, by role, of every model call made while it is listening (what a node's calls cost)."""

    def __init__(self) -> None:
        self.by_role: dict[Role, Usage] = {}

    def add(self, role: Role, usage: Usage) -> None:
        self.by_role[role] = self.by_role.get(role, Usage()) + usage


_meter: ContextVar[UsageMeter | None] = ContextVar("usage_meter", default=None)


@contextlib.contextmanager
def metered() -> Iterator[UsageMeter]:
    """Count the usage of the model calls made inside this block (and the tasks it starts); a block
    metered inside it counts its own calls instead (they are not counted twice)."""
    meter = UsageMeter()
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def spend(role: Role, usage: Usage) -> None:
    """Report one answer's usage to the innermost listening meter (every client of the roles calls this)."""
    meter = _meter.get()
    if meter is not None:
        meter.add(role, usage)


class Completion(BaseModel):
    text: str
    usage: Usage
    seconds: float
    model: str
    logprobs: list[dict[str, Any]] | None = Field(default=None, description="Per-token logprobs if returned.")
    sent: list[dict[str, Any]] | None = Field(
        default=None, description="The messages really sent, when the conversation had to be condensed."
    )
    fallback: bool = Field(default=False, description="Answered by the role's fallback endpoint.")
    prompt_token_ids: list[int] | None = Field(default=None, description="The prompt's token ids if returned.")
    token_ids: list[int] | None = Field(default=None, description="The completion's token ids if returned.")


class StructuredAnswer(BaseModel, Generic[T]):
    value: T | None = None
    error: str | None = Field(default=None, description="Why no valid answer came back, for reports.")
    problems: list[str] = Field(default_factory=list, description="What was wrong with each unusable attempt.")
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    seconds: float = 0.0
    text: str = Field(default="", description="The used answer's text exactly as sampled (before parsing).")
    sent: list[dict[str, Any]] | None = Field(
        default=None, description="The messages that produced the used answer (earlier attempts' retries included)."
    )
    logprobs: list[dict[str, Any]] | None = Field(
        default=None, description="Per-token logprobs of the used answer, when asked for and returned."
    )
    last_text: str = Field(
        default="", description="The text of the last answer, used or not (the upstream profile reads it)."
    )

    @property
    def raised_upstream(self) -> bool:
        """Whether WebGen-Agent's parser would raise on this answer: no usable value and no JSON object
        (it reads the text from the first "{" to the last "}", A utils/get_screenshot_description.py
        `parse_json_output`; none is an exception)."""
        return self.value is None and not _JSON_OBJECT.search(self.last_text)


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


# langchain-openai caches one async HTTP client per process, bound to the first event loop; a host
# that runs the agent under a second ``asyncio.run`` would get "Event loop is closed". One client
# per running loop (dropped with the loop) keeps connection reuse without that trap.
# openai's default client is built on its own httpx fork, not on httpx: typed loosely.
_loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


@functools.cache
def http_client_errors() -> tuple[type[Exception], ...]:
    """What a request through ``shared_http_client()`` raises when the endpoint cannot be reached."""
    import openai

    # Newer openai releases build their default client on a fork of httpx (``httpx2``) whose errors
    # are not httpx's: take the error base class from the client class's own package.
    package = sys.modules[openai.DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0]]
    return tuple({httpx.HTTPError, getattr(package, "HTTPError", httpx.HTTPError)})


def shared_http_client() -> Any:
    """The running event loop's HTTP client for model endpoints (made once: each new client loads
    the system's CA certificates, ~30 ms of CPU)."""
    import openai

    loop = asyncio.get_running_loop()
    client = _loop_clients.get(loop)
    if client is None:
        client = _loop_clients[loop] = openai.DefaultAsyncHttpxClient()
    return client


def import_model_clients() -> None:
    """Import what a first model call needs (openai, langchain-openai: about 1 s in a fresh process).

    A run calls this in a worker thread before it starts importing browser-use beside its first
    model call: both imports at once share one interpreter and each takes about twice as long, so
    the first call would reach the endpoint about 1 s later.
    """
    import langchain_openai  # noqa: F401
    import openai  # noqa: F401

    import webgen_agent.tools.token_ids  # noqa: F401


def chat_model(settings: ModelSettings, role: Role, **overrides: Any) -> ChatOpenAI:
    """A LangChain chat model for ``role``; call it inside the event loop that will use it."""
    from langchain_openai import ChatOpenAI

    from webgen_agent.tools.token_ids import TokenIdsChatOpenAI

    kwargs: dict[str, Any] = {
        "http_async_client": shared_http_client(),
        "model": settings.model,
        "base_url": settings.base_url,
        "api_key": api_key_for(settings, role),
        "timeout": settings.timeout_s,
        "max_retries": 0,  # tools.endpoints retries, with patience and a visible wait
    }
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.top_p is not None:
        kwargs["top_p"] = settings.top_p
    if settings.max_tokens is not None:
        kwargs["max_tokens"] = settings.max_tokens
    if settings.logprobs:
        kwargs["logprobs"] = True
    if settings.token_ids:
        # Only when asked: OpenAI's API rejects request fields it does not know.
        kwargs["extra_body"] = {"return_token_ids": True}
    kwargs.update(overrides)
    return (TokenIdsChatOpenAI if settings.token_ids else ChatOpenAI)(**kwargs)


def _usage(message: AIMessage) -> Usage:
    meta = message.usage_metadata
    if meta is None:
        return Usage(calls=1, uncounted=1)
    return Usage(input_tokens=meta["input_tokens"], output_tokens=meta["output_tokens"], calls=1)


def _text(message: AIMessage) -> str:
    return message.content if isinstance(message.content, str) else _join_parts(message.content)


def _join_parts(parts: list[Any]) -> str:
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in parts)


class Unusable(BaseModel):
    """A structured call that came back without an answer to parse: why, and what it cost."""

    problem: str
    usage: Usage = Field(default_factory=Usage)
    text: str = ""


async def _chat(
    endpoint: ModelSettings, role: Role, messages: list[Message], schema: dict[str, Any] | None
) -> AIMessage | Unusable:
    """One HTTP call. With a ``schema``, an answer the client cannot hand over is returned as Unusable."""
    model = chat_model(endpoint, role)
    runnable = model.bind(response_format=schema) if schema is not None else model
    import openai

    try:
        return await runnable.ainvoke(messages)
    except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
        # The parse path of the openai client refuses these answers; for a free-text call they
        # cannot happen (the text is used as it is).
        completion = exc.completion
        if completion is None:  # the client did not keep the answer: nothing to read back
            return Unusable(problem=f"the endpoint's answer was unusable ({type(exc).__name__})", usage=Usage(calls=1))
        usage = completion.usage
        spent = Usage(
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            calls=1,
        )
        text = (completion.choices[0].message.content or "") if completion.choices else ""
        if isinstance(exc, openai.LengthFinishReasonError):
            problem = f"the answer was cut off at the length limit ({spent.output_tokens} tokens)"
        else:
            problem = "the endpoint's content filter withheld the answer"
        return Unusable(problem=problem, usage=spent, text=text)
    except (IndexError, KeyError, TypeError) as exc:
        # langchain-openai builds the message from choices[0]: none, or an answer without a message.
        problem = f"the endpoint answered without a message ({type(exc).__name__}: {exc})"
        if schema is None:
            raise MalformedResponse(problem) from exc
        return Unusable(problem=problem, usage=Usage(calls=1))


async def _call(
    settings: ModelSettings, role: Role, messages: list[Message], schema: dict[str, Any] | None = None
) -> tuple[AIMessage | Unusable, list[Message], ModelSettings]:
    """``_chat`` with patience and fallback (tools.endpoints), the prompt condensed while it is too long.

    Returns the answer, the messages really sent and the endpoint that answered.
    """
    sent: list[Message] | None = None
    for level in range(MAX_LEVEL + 1):
        shorter = condense(messages, level)
        if sent is not None and shorter == sent:
            break  # the rule has nothing left to shorten
        sent = shorter
        if level:
            report(EndpointEvent(kind="condensed", role=role, model=settings.model, reason=f"level {level}"))
        try:
            answer, endpoint = await call_patiently(
                settings, role, functools.partial(_chat, role=role, messages=shorter, schema=schema)
            )
        except ModelCallError as exc:
            cause = exc.__cause__
            if cause is not None and says_too_long(status_of(cause), str(getattr(cause, "message", cause))):
                continue
            raise
        return answer, sent, endpoint
    raise ModelCallError(f"{role} model {settings.model!r}: the prompt is too long for the endpoint even condensed")


def _logprobs(reply: AIMessage) -> list[dict[str, Any]] | None:
    """The per-token logprobs the endpoint returned with the answer (OpenAI's ``logprobs.content``)."""
    return (reply.response_metadata.get("logprobs") or {}).get("content")


async def complete(settings: ModelSettings, role: Role, messages: list[Message]) -> Completion:
    """One chat completion; raises ModelCallError when the endpoint stays unusable (after patience and fallback)."""
    started = time.monotonic()
    reply, sent, endpoint = await _call(settings, role, messages)
    assert isinstance(reply, AIMessage)  # without a schema every problem is raised
    logprobs = _logprobs(reply) if settings.logprobs else None
    usage = _usage(reply)
    spend(role, usage)
    return Completion(
        text=_text(reply),
        usage=usage,
        seconds=time.monotonic() - started,
        model=reply.response_metadata.get("model_name", endpoint.model),
        logprobs=logprobs,
        sent=sent if sent != messages else None,
        fallback=endpoint.model != settings.model or endpoint.base_url != settings.base_url,
        prompt_token_ids=reply.response_metadata.get("prompt_token_ids"),
        token_ids=reply.response_metadata.get("token_ids"),
    )


_JSON_BLOCK = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


_WHOLE_FENCE = re.compile(r"\A\s*```(?:json)?\s*(\{.*\})\s*```\s*\Z", re.DOTALL)


def parse_json_answer(text: str, schema: type[T], *, strict: bool = False) -> T:
    """Validate a model's JSON answer, also when wrapped in prose or a code fence.

    ``strict``: the whole answer must be the object (a code fence around it is allowed). A verdict
    read from inside prose could be an object the model only quoted, e.g. from the page it judged.
    """
    if "{" not in text:
        raise ValueError("no JSON object found")
    candidates = [text.strip()]
    if strict:
        candidates += _WHOLE_FENCE.findall(text)
    else:
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


def _rejects_response_format(exc: ModelCallError) -> bool:
    """A 400 that is not about the prompt's length: taken as the server refusing ``response_format``."""
    import openai

    cause = exc.__cause__
    return isinstance(cause, openai.BadRequestError) and not says_too_long(400, str(cause.message))


async def ask_structured(
    settings: ModelSettings,
    role: Role,
    messages: list[Message],
    schema: type[T],
    *,
    attempts: int = 3,
    strict: bool = False,
) -> StructuredAnswer[T]:
    """Ask for a ``schema`` answer via ``response_format`` json_schema; also accept JSON in plain text
    (``strict``: only an answer that is the JSON object alone, see ``parse_json_answer``).

    Every unusable answer (cut at the length limit, filtered, refused, empty, not JSON, not valid)
    is retried with the problem shown to the model, then reported in ``error`` and ``problems``;
    never raised. Only an endpoint that stays unusable (after patience and fallback) raises
    ModelCallError.
    """
    started = time.monotonic()
    answer: StructuredAnswer[T] = StructuredAnswer()
    conversation = list(messages)
    use_schema = True
    while answer.attempts < attempts:
        answer.attempts += 1
        try:
            raw, sent, _ = await _call(settings, role, conversation, response_format(schema) if use_schema else None)
        except ModelCallError as exc:
            if not (use_schema and _rejects_response_format(exc)):
                raise
            # Some servers reject response_format: ask with the schema in the prompt instead.
            use_schema = False
            conversation = [{"role": "system", "content": _schema_hint(schema)}, *conversation]
            answer.attempts -= 1
            continue
        if isinstance(raw, Unusable):
            problem, text = raw.problem, raw.text
            answer.usage = answer.usage + raw.usage
            spend(role, raw.usage)
        else:
            answer.usage = answer.usage + _usage(raw)
            spend(role, _usage(raw))
            text = _text(raw)
            answer.last_text = text
            refusal = raw.additional_kwargs.get("refusal")
            problem = f"the model refused: {' '.join(str(refusal).split())[:200]}" if refusal else ""
            if not problem:
                try:
                    answer.value = parse_json_answer(text, schema, strict=strict)
                    # What a trainer needs of the sampled answer: its text, its prompt and its logprobs.
                    answer.text, answer.sent = text, sent
                    answer.logprobs = _logprobs(raw) if settings.logprobs else None
                    break
                except (ValidationError, ValueError) as exc:
                    problem = validation_summary(exc, limit=1)
                    if raw.response_metadata.get("finish_reason") == "length":
                        problem = f"the answer was cut off at the length limit ({problem})"
        answer.problems.append(problem)
        answer.error = f"unusable answer after {answer.attempts} attempt(s): {problem}"
        conversation = [
            *conversation,
            {"role": "assistant", "content": text[:2000]},
            {"role": "user", "content": f"That answer was not usable ({problem}). {_schema_hint(schema)}"},
        ]
    if answer.value is not None:
        answer.error = None
    answer.seconds = time.monotonic() - started
    return answer
