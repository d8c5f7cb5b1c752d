"""The coder's own tokenizer, asked of its endpoint: vLLM's ``/tokenize`` and ``/detokenize`` routes,
served at the server's root beside ``/v1``. Rollouts cut an observation at a token budget as
WebGen-RL does (``nodes/feedback.py``); only the served model's tokenizer counts its tokens exactly.

An endpoint without these routes (OpenAI's API, most proxies) answers 404 or 405: then there is no
tokenizer (None), and the caller falls back to counting characters. Routes that answer but cannot
be used to cut this text raise :class:`TokenizerUnusable`: a refusal (a 400 for a text over the
model's length limit) or an answer not in vLLM's shape (llama.cpp's ``/tokenize`` reads ``content``,
not ``prompt``, and answers no tokens at all for vLLM's request: taken at its word, nothing would
ever be cut). Other trouble (429, 5xx, timeouts) is waited out like a model call
(``tools.endpoints``), on the role's own endpoint only: a fallback model may tokenize differently.
"""

from __future__ import annotations

from typing import Any

from webgen_agent.core.context import ModelSettings, Role, api_key_for
from webgen_agent.tools.endpoints import ModelCallError, call_patiently, status_of
from webgen_agent.tools.models import shared_http_client

# What a server without the route answers: no tokenizer to ask.
_NOT_OFFERED = frozenset({404, 405})


class TokenizerUnusable(ModelCallError):
    """The endpoint answers on its tokenizer routes, but not with tokens this text can be cut by: it
    refused the request (HTTP 4xx), or answered in a shape that is not vLLM's."""


def server_root(base_url: str) -> str:
    """The server's root for an OpenAI-compatible base URL (``http://host:8000/v1`` -> ``http://host:8000``)."""
    return base_url.rstrip("/").removesuffix("/v1")


async def _post(settings: ModelSettings, role: Role, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    import openai

    own = settings.model_copy(update={"fallback_model": "", "fallback_base_url": ""})

    async def call(endpoint: ModelSettings) -> dict[str, Any]:
        client = openai.AsyncOpenAI(
            base_url=server_root(endpoint.base_url),
            api_key=api_key_for(endpoint, role),
            http_client=shared_http_client(),
            max_retries=0,  # tools.endpoints waits out the trouble
        )
        answer = await client.post(path, body=body, cast_to=object)
        if not isinstance(answer, dict):
            raise ModelCallError(f"{role} endpoint {endpoint.base_url}: {path} answered {type(answer).__name__}")
        return answer

    try:
        answer, _ = await call_patiently(own, role, call)
    except ModelCallError as exc:
        status = status_of(exc.__cause__) if exc.__cause__ is not None else None
        if status in _NOT_OFFERED:
            return None
        if status is not None and 400 <= status < 500:
            raise TokenizerUnusable(str(exc)) from exc
        raise
    return answer


async def tokenize(settings: ModelSettings, role: Role, text: str) -> list[int] | None:
    """``text``'s token ids by the endpoint's tokenizer, special tokens written in it included and none
    added (as a Hugging Face tokenizer called with ``add_special_tokens=False``); None: no tokenizer."""
    answer = await _post(
        settings, role, "/tokenize", {"model": settings.model, "prompt": text, "add_special_tokens": False}
    )
    if answer is None:
        return None
    tokens = answer.get("tokens")
    where = f"{role} endpoint {settings.base_url}: /tokenize"
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        raise TokenizerUnusable(f"{where} answered no list of token ids, as vLLM's does")
    if text and not tokens:  # llama.cpp's answer to a request without its `content` field
        raise TokenizerUnusable(
            f"{where} answered no tokens for a text of {len(text)} characters (not vLLM's /tokenize)"
        )
    if answer.get("count", len(tokens)) != len(tokens):
        raise TokenizerUnusable(f"{where} counted {answer['count']} tokens but listed {len(tokens)}")
    return tokens


async def detokenize(settings: ModelSettings, role: Role, ids: list[int]) -> str | None:
    """The text of token ``ids`` by the endpoint's tokenizer; None: no tokenizer."""
    answer = await _post(settings, role, "/detokenize", {"model": settings.model, "tokens": ids})
    if answer is None:
        return None
    text = answer.get("prompt")
    if not isinstance(text, str):
        raise TokenizerUnusable(
            f"{role} endpoint {settings.base_url}: /detokenize answered no `prompt` text, as vLLM's does"
        )
    return text
