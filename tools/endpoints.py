"""Calling a model endpoint patiently: retries with backoff, Retry-After, a per-call timeout, a fallback.

Rate limits (429), server errors (5xx), timeouts, dropped or refused connections and malformed
answers are waited out with exponential backoff and jitter (tenacity), honouring the server's
Retry-After, for up to ``patience_s`` per call; every wait is reported to the listener the caller
installed (the progress view). Then the role's fallback endpoint gets the same patience. Requests
the endpoint refuses for good (400, 401, 403, 404, 422) are not retried: they end in a one-line
:class:`ModelCallError` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Literal, TypeVar, cast

from pydantic import BaseModel, SecretStr
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_result,
    stop_before_delay,
    wait_exponential_jitter,
)

from webgen_agent.core.context import ModelSettings, Role
from webgen_agent.tools.answer_shape import foreign_answer

R = TypeVar("R")

# Status codes worth waiting for: timeout, conflict, too early, rate limit; every 5xx is added below.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


class ModelCallError(RuntimeError):
    """The endpoint could not be used (unreachable for the whole patience, auth, bad request); one line for the user."""


class MalformedResponse(RuntimeError):
    """HTTP 200 whose body is not a chat completion (not JSON, no choices): the server misbehaved."""


class EndpointEvent(BaseModel):
    """Something a caller may show while a model call is under way: a wait, a switch to the fallback,
    a condensed prompt, a text the endpoint's tokenizer would not count."""

    kind: Literal["wait", "fallback", "condensed", "tokenizer_unusable"]
    role: str
    model: str
    reason: str = ""
    attempt: int = 0
    sleep_s: float = 0.0
    waited_s: float = 0.0
    patience_s: float = 0.0

    def line(self) -> str:
        if self.kind == "wait":
            return (
                f"{self.role} endpoint ({self.model}): {self.reason}; retry {self.attempt} in {self.sleep_s:.1f}s "
                f"(waited {self.waited_s:.0f}s of {self.patience_s:.0f}s)"
            )
        if self.kind == "fallback":
            return f"{self.role} endpoint: {self.reason}; using the fallback model {self.model}"
        if self.kind == "tokenizer_unusable":
            return f"{self.role} tokenizer ({self.model}) could not count the text: {self.reason}"
        return f"{self.role} prompt too long for {self.model}: condensed ({self.reason})"


Listener = Callable[[EndpointEvent], None]
_listener: ContextVar[Listener | None] = ContextVar("webgen_endpoint_listener", default=None)


@contextlib.contextmanager
def listen(callback: Listener) -> Iterator[None]:
    """Report endpoint events of the model calls made inside this block (and tasks it starts) to ``callback``."""
    token = _listener.set(callback)
    try:
        yield
    finally:
        _listener.reset(token)


def report(event: EndpointEvent) -> None:
    callback = _listener.get()
    if callback is not None:
        callback(event)


def status_of(exc: BaseException) -> int | None:
    import openai  # here, not at the top: the model client that raised has loaded it (seconds to import)

    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def transient_status(status: int) -> bool:
    """An HTTP status worth asking again for: the server is busy, restarting or flaky (``TRANSIENT_STATUS``, any 5xx)."""
    return status in TRANSIENT_STATUS or status >= 500


def transient(exc: BaseException) -> bool:
    """Worth waiting for: the endpoint is busy, restarting or flaky, not refusing the request itself.
    An answer that is not an OpenAI-compatible endpoint's (a web page, bytes that are not HTTP) is not."""
    import openai  # as in status_of

    if foreign_answer(exc) is not None:
        return False
    if isinstance(exc, (openai.APIConnectionError, TimeoutError, MalformedResponse, json.JSONDecodeError)):
        return True  # APITimeoutError is an APIConnectionError; a dropped connection too
    status = status_of(exc)
    return status is not None and transient_status(status)


def connection_problem(exc: BaseException) -> str:
    """Why a connection failed, in words ("connection refused", "unknown host", ...).

    HTTP clients wrap the socket's error (httpx says "All connection attempts failed" for most
    causes), so the cause chain is searched for it.
    """
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, (TimeoutError, socket.timeout)) or "Timeout" in type(cause).__name__:
            return "no answer in time"
        cause = cause.__cause__ or cause.__context__
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]


def describe(exc: BaseException, base_url: str) -> str:
    """One line about a failed call."""
    import openai  # as in status_of

    if (what := foreign_answer(exc)) is not None:
        return f"{base_url} is not an OpenAI-compatible endpoint: it answered {what}"
    if isinstance(exc, openai.APITimeoutError) or isinstance(exc, TimeoutError):
        return f"no answer from {base_url} in time"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach {base_url} ({connection_problem(exc)})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} from {base_url}: {' '.join(str(exc.message).split())[:300]}"
    if isinstance(exc, (MalformedResponse, json.JSONDecodeError)):
        return f"malformed answer from {base_url}: {' '.join(str(exc).split())[:200]}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def retry_after_s(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (Retry-After-Ms, Retry-After in seconds or as an HTTP date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    with contextlib.suppress(ValueError, TypeError):
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


class RetryAfterOrBackoff(wait_exponential_jitter):
    """Exponential backoff with jitter, but never shorter than the server's Retry-After."""

    def __call__(self, retry_state: RetryCallState) -> float:
        backoff = super().__call__(retry_state)
        outcome = retry_state.outcome
        asked = retry_after_s(outcome.exception()) if outcome is not None else None
        if asked is None:
            return backoff
        # A little jitter on top, so clients told the same time do not all come back at once.
        return asked + min(backoff, self.jitter) * 0.1


def fallback_settings(settings: ModelSettings) -> ModelSettings | None:
    if not settings.fallback_model:
        return None
    return settings.model_copy(
        update={
            "model": settings.fallback_model,
            "base_url": settings.fallback_base_url or settings.base_url,
            "api_key": settings.fallback_api_key if settings.fallback_api_key.get_secret_value() else settings.api_key,
            "fallback_model": "",
            "fallback_base_url": "",
            "fallback_api_key": SecretStr(""),
        }
    )


# Endpoints whose patience ran out recently (per process): skipped while a fallback exists, so a
# dead primary does not cost every call its whole patience. Tried again after one patience.
_down_until: dict[tuple[str, str], float] = {}


async def call_patiently(
    settings: ModelSettings, role: Role, call: Callable[[ModelSettings], Awaitable[R]]
) -> tuple[R, ModelSettings]:
    """Run ``call(endpoint)`` with retries on the role's endpoint, then on its fallback.

    Returns the result and the endpoint that gave it. Raises ModelCallError when a request is
    refused for good or both endpoints stayed unusable for their patience.
    """
    fallback = fallback_settings(settings)
    candidates = [settings] if fallback is None else [settings, fallback]
    if fallback is not None and _down_until.get((settings.base_url, settings.model), 0) > time.monotonic():
        candidates = [fallback]
    failures: list[str] = []
    for endpoint in candidates:
        if endpoint is fallback:
            report(
                EndpointEvent(
                    kind="fallback",
                    role=role,
                    model=endpoint.model,
                    reason=failures[-1] if failures else f"{settings.model} was down recently",
                )
            )
        try:
            return await _retrying(endpoint, role, call), endpoint
        except Exception as exc:
            if not transient(exc):
                raise ModelCallError(f"{role} model {endpoint.model!r}: {describe(exc, endpoint.base_url)}") from exc
            failures.append(
                f"{role} model {endpoint.model!r}: gave up after {endpoint.patience_s:g}s: {describe(exc, endpoint.base_url)}"
            )
            if endpoint is settings:
                _down_until[(settings.base_url, settings.model)] = time.monotonic() + settings.patience_s
    raise ModelCallError("; then ".join(failures))


async def _retrying(endpoint: ModelSettings, role: Role, call: Callable[[ModelSettings], Awaitable[R]]) -> R:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        report(
            EndpointEvent(
                kind="wait",
                role=role,
                model=endpoint.model,
                reason=describe(exc, endpoint.base_url) if exc else "",
                attempt=state.attempt_number,
                sleep_s=state.upcoming_sleep,
                waited_s=state.seconds_since_start or 0.0,
                patience_s=endpoint.patience_s,
            )
        )

    retrying = AsyncRetrying(
        retry=retry_if_exception(transient),
        stop=stop_before_delay(endpoint.patience_s),
        wait=RetryAfterOrBackoff(
            initial=endpoint.retry_initial_s, max=endpoint.retry_max_s, jitter=endpoint.retry_initial_s
        ),
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            # The client's own timeout covers a silent socket; this also cuts an answer that trickles.
            return await asyncio.wait_for(call(endpoint), endpoint.timeout_s)
    raise AssertionError("unreachable: tenacity either returns or re-raises")


async def wait_out(
    settings: ModelSettings,
    role: Role,
    attempt: Callable[[ModelSettings], Awaitable[R]],
    trouble: Callable[[R], str | None],
) -> R:
    """Repeat ``attempt(endpoint)`` while ``trouble(result)`` names endpoint trouble, with the role's
    patience and backoff; then once the same way on its fallback. Returns the last result.

    For work that talks to the endpoint through a client of its own (the GUI agent) and reports
    endpoint failures in its result instead of raising them.
    """
    fallback = fallback_settings(settings)
    result: R | None = None
    for endpoint in [settings] if fallback is None else [settings, fallback]:
        if endpoint is fallback:
            reason = trouble(result) if result is not None else None
            report(EndpointEvent(kind="fallback", role=role, model=endpoint.model, reason=reason or ""))

        def before_sleep(state: RetryCallState, endpoint: ModelSettings = endpoint) -> None:
            last = state.outcome.result() if state.outcome is not None else None
            report(
                EndpointEvent(
                    kind="wait",
                    role=role,
                    model=endpoint.model,
                    reason=trouble(last) or "" if last is not None else "",
                    attempt=state.attempt_number,
                    sleep_s=state.upcoming_sleep,
                    waited_s=state.seconds_since_start or 0.0,
                    patience_s=endpoint.patience_s,
                )
            )

        retrying = AsyncRetrying(
            retry=retry_if_result(lambda value: trouble(value) is not None),
            stop=stop_before_delay(endpoint.patience_s),
            wait=wait_exponential_jitter(
                initial=endpoint.retry_initial_s, max=endpoint.retry_max_s, jitter=endpoint.retry_initial_s
            ),
            before_sleep=before_sleep,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome is not None else None,
        )
        # The error callback hands back the last attempt's own result: always an R here.
        result = cast(R, await retrying(attempt, endpoint))
        if trouble(result) is None:
            break
    return cast(R, result)
