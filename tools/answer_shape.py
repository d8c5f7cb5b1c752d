"""Whether what an endpoint sent back is an OpenAI-compatible answer, and if not, what it was, in words.

A ``--base-url`` pointing at the wrong port often reaches something that answers: a web server's
welcome page (HTTP 200, HTML), a service speaking another protocol (bytes that are not HTTP). Such an
answer never turns into a chat completion however long one waits, so it is not retried like a 503:
the call ends at once with one line naming what came back (``foreign_answer``). ``apps/doctor.py``
asks its questions with the same words (``body_problem``, ``completion_problem``, ``listing_problem``).
"""

from __future__ import annotations

import json
import re
from typing import Any

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
# langchain-openai's words when the openai client handed it text instead of a completion (the client
# does that for a body that is not JSON); the text follows them.
_UNEXPECTED = "Expected a dict or openai.BaseModel, got str: "
# h11's words for a connection that closed early: a flaky server, worth retrying; any other protocol
# error means the bytes that came back were not HTTP at all.
_CLOSED = ("disconnect", "closed", "peer")


def what_it_is(body: bytes | str, content_type: str = "") -> str:
    """A body that is not an OpenAI answer, named: an HTML page and its title, binary data, or the text's start."""
    raw = body.encode("utf-8", "replace") if isinstance(body, str) else body
    if "html" in content_type.lower() or raw.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        title = _TITLE.search(raw)
        name = " ".join(title.group(1).decode("utf-8", "replace").split())[:80] if title else ""
        return f"an HTML page ({name!r})" if name else "an HTML page"
    if not raw.strip():
        return "an empty body"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"binary data ({len(raw):,} bytes)"
    if sum(not (ch.isprintable() or ch.isspace()) for ch in text[:200]) > 4:
        return f"binary data ({len(raw):,} bytes)"
    return f"text that is not JSON ({' '.join(text.split())[:80]!r})"


def body_problem(body: bytes, content_type: str = "") -> tuple[Any, str | None]:
    """The body's JSON, or None and what the body is instead."""
    try:
        return json.loads(body), None
    except (ValueError, UnicodeDecodeError):
        return None, what_it_is(body, content_type)


def completion_problem(data: Any) -> str | None:
    """None when ``data`` is a chat completion with an answer (``choices[0].message``), else what it is."""
    if not isinstance(data, dict):
        return f"JSON that is not a chat completion (a {type(data).__name__})"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        keys = ", ".join(sorted(map(str, data))[:6]) or "none"
        return f"JSON that is not a chat completion (no choices; keys: {keys})"
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        return "a chat completion without a message"
    return None


def listing_problem(data: Any) -> str | None:
    """None when ``data`` is an OpenAI model list (``{"data": [...]}``), else what it is."""
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return None
    if isinstance(data, dict):
        keys = ", ".join(sorted(map(str, data))[:6]) or "none"
        return f"JSON that is not a model list (no data; keys: {keys})"
    return f"JSON that is not a model list (a {type(data).__name__})"


def foreign_answer(exc: BaseException) -> str | None:
    """What came back, when a failed call's cause is an answer that is not an OpenAI-compatible
    endpoint's (a body that is not JSON, bytes that are not HTTP); None for any other failure."""
    cause: BaseException | None = exc
    while cause is not None:
        message = str(cause)
        if isinstance(cause, ValueError) and _UNEXPECTED in message:
            text = message.split(_UNEXPECTED, 1)[1].strip("'\"")
            if text.count("\\x") > 4:  # the text as Python's repr wrote it: escapes stand for bytes
                return "binary data"
            return what_it_is(text)
        if isinstance(cause, json.JSONDecodeError):
            return f"a body that is not JSON ({cause.msg.lower()})"
        if type(cause).__name__ == "RemoteProtocolError" and not any(word in message.lower() for word in _CLOSED):
            return f"bytes that are not HTTP ({message.splitlines()[0][:80] if message else 'unreadable'})"
        cause = cause.__cause__ or cause.__context__
    return None
