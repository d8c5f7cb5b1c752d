"""Shortening a conversation the endpoint says is too long (context overflow).

The rule, applied one level more on each overflow (at most ``MAX_LEVEL``); levels 1-3 keep the
system prompt, the first user message (the requirement) and the latest message whole:

1. feedback turns (user messages after the first) but the latest: cut to ``FEEDBACK_CHARS``;
2. also earlier assistant replies but the latest: cut to ``REPLY_CHARS``;
3. drop the oldest assistant + feedback pairs, keeping the last ``KEEP_PAIRS`` pairs;
4. and beyond: every text longer than ``LONG_CHARS`` (any message, the latest too) cut to half its
   length, once more at each further level.

A cut keeps the head and the tail of the text with a marker between them, so file paths at the top
of a reply and the final question of a feedback turn survive.
"""

from __future__ import annotations

import re
from typing import Any

Message = dict[str, Any]

MAX_LEVEL = 6
FEEDBACK_CHARS = 600
REPLY_CHARS = 1500
KEEP_PAIRS = 2
LONG_CHARS = 2000

_OVERFLOW = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long|reduce the length|exceeds? the (?:model'?s? )?(?:maximum|context)|too long for",
    re.IGNORECASE,
)


def says_too_long(status: int | None, message: str) -> bool:
    """Whether an error answer means the prompt does not fit the model's context."""
    return status == 413 or (status == 400 and bool(_OVERFLOW.search(message)))


def shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters left out ...]\n"
    head = max(0, (limit * 2) // 3)
    tail = max(0, limit - head)
    return text[:head] + marker + (text[-tail:] if tail else "")


def _map_text(message: Message, fn: Any) -> Message:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": fn(content)}
    if isinstance(content, list):
        parts = [
            {**p, "text": fn(p["text"])} if isinstance(p, dict) and p.get("type") == "text" else p for p in content
        ]
        return {**message, "content": parts}
    return message


def condense(messages: list[Message], level: int) -> list[Message]:
    """``messages`` shortened by the rule up to ``level`` (0 = unchanged)."""
    if level <= 0 or not messages:
        return list(messages)
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    last = len(messages) - 1
    result: list[Message] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if i != last and role == "user" and first_user is not None and i > first_user:
            message = _map_text(message, lambda t: shorten(t, FEEDBACK_CHARS))
        elif i != last and role == "assistant" and level >= 2:
            message = _map_text(message, lambda t: shorten(t, REPLY_CHARS))
        result.append(message)
    if level >= 3 and first_user is not None:
        head, tail = result[: first_user + 1], result[first_user + 1 :]
        keep = 2 * KEEP_PAIRS
        if len(tail) > keep:
            tail = tail[-keep:]
            if tail and tail[0].get("role") != "assistant":
                tail = tail[1:]
        result = head + tail
    for _ in range(level - 3):
        result = [_map_text(m, _halve_long) for m in result]
    return result


def _halve_long(text: str) -> str:
    return shorten(text, len(text) // 2) if len(text) > LONG_CHARS else text
