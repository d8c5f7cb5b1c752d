"""Vite freshness: whether a kept dev server serves the edited modules as they are on disk.

vite caches a compiled module until its file watcher reports a change; a page captured before that
would show the old code. What it served before an edit is recorded (``served_modules``), and after
the edit it is polled until every changed module is compiled from the file on disk (``await_fresh``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
from pydantic import BaseModel, Field

from webgen_agent.tools.site.project import vite_module_path

# Modules vite serves without an inline source map: checked by a changed answer, not exactly.
_UNMAPPED_SUFFIXES = (".css", ".scss", ".sass", ".less", ".styl", ".pcss", ".json")
# A kept vite server picks an edit up in ~30-150 ms (watcher latency). A change within chokidar's
# 50 ms throttle of the previous change to that file is dropped for good (a file restored and then
# edited in one step), so after _FRESH_NUDGE_S the file's mtime is bumped once (a new change event);
# after _FRESH_CAP_S the server is restarted.
_FRESH_POLL_S = 0.02
_FRESH_NUDGE_S = 0.25
_FRESH_CAP_S = 3.0
_INLINE_MAP = re.compile(r"//# sourceMappingURL=data:application/json;(?:charset=utf-8;)?base64,([A-Za-z0-9+/=]+)\s*$")


class ServedModule(BaseModel):
    """What a running vite server answered for one source file, taken before an edit."""

    digest: str = Field(description="sha256 of the answer.")
    embeds_source: bool = Field(
        default=False,
        description="Checked exactly after an edit: the answer's inline source map carried the file's text "
        "(or no answer came for a script).",
    )


class _ModuleAnswer(BaseModel):
    is_module: bool = Field(description="HTTP 200 with JavaScript: a module vite compiled (and caches).")
    digest: str = Field(description="sha256 of status and body.")
    source: str | None = Field(default=None, description="The text it was compiled from, per its inline source map.")


async def _fetch_module(client: httpx.AsyncClient, base_url: str, rel_path: str) -> _ModuleAnswer | None:
    """What the vite server at ``base_url`` answers for a source file; None when it did not answer."""
    module_path = vite_module_path(rel_path)
    if module_path is None:
        return None
    try:
        response = await client.get(base_url.rstrip("/") + module_path, timeout=httpx.Timeout(5.0, connect=1.0))
    except httpx.HTTPError:
        return None
    digest = hashlib.sha256(str(response.status_code).encode() + b"\0" + response.content).hexdigest()
    is_module = response.status_code == 200 and "javascript" in response.headers.get("content-type", "")
    source = _embedded_source(response.text, rel_path) if is_module else None
    return _ModuleAnswer(is_module=is_module, digest=digest, source=source)


def _embedded_source(body: str, rel_path: str) -> str | None:
    """The source text a vite module's inline source map carries for ``rel_path``, if it does."""
    match = _INLINE_MAP.search(body[-200_000:])
    if match is None:
        return None
    try:
        source_map = json.loads(base64.b64decode(match.group(1)))
        sources, contents = source_map.get("sources") or [], source_map.get("sourcesContent") or []
    except (ValueError, AttributeError):
        return None
    name = rel_path.rsplit("/", 1)[-1]
    for source, content in zip(sources, contents):
        if isinstance(source, str) and source.rsplit("/", 1)[-1] == name and isinstance(content, str):
            return content.removeprefix("\ufeff")
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return None


async def served_modules(
    url: str, workspace: Path, paths: Iterable[str], compiled: set[str]
) -> dict[str, ServedModule]:
    """What the vite server at ``url`` serves now for those of ``paths`` a page loaded (``compiled``).

    Only modules a page loaded are asked for: asking vite for any other file would compile it, and
    a compile error with no page connected is kept by vite and shown to the next page that connects.
    """
    wanted = [p for p in paths if vite_module_path(p) in compiled and (workspace / p).is_file()]
    if not wanted:
        return {}
    async with httpx.AsyncClient(verify=False, trust_env=False) as client:
        answers = await asyncio.gather(*(_fetch_module(client, url, p) for p in wanted))
    served = {}
    for path, answer in zip(wanted, answers):
        if answer is None:
            # No answer in time (a busy machine): still checked after the edit. A script must
            # then serve exactly the file on disk; a stylesheet or JSON file, any answer at all.
            served[path] = ServedModule(digest="", embeds_source=not path.endswith(_UNMAPPED_SUFFIXES))
        elif answer.is_module:
            disk = _read_text(workspace / path)
            served[path] = ServedModule(digest=answer.digest, embeds_source=answer.source == disk)
    return served


async def await_fresh(
    url: str, workspace: Path, changed: set[str], served_before: dict[str, ServedModule]
) -> list[str]:
    """Poll until the server serves every changed module as it is on disk; the ones it never did.

    Polling, not a fixed wait: the usual case returns after one or two requests.
    """
    pending = {p for p in changed & served_before.keys() if (workspace / p).is_file()}
    started = time.monotonic()
    nudged = False
    async with httpx.AsyncClient(verify=False, trust_env=False) as client:
        while pending:
            paths = sorted(pending)
            answers = await asyncio.gather(*(_fetch_module(client, url, p) for p in paths))
            for path, answer in zip(paths, answers):
                if answer is not None and _serves_disk(workspace / path, answer, served_before[path]):
                    pending.discard(path)
            elapsed = time.monotonic() - started
            if not pending or elapsed >= _FRESH_CAP_S:
                break
            if not nudged and elapsed >= _FRESH_NUDGE_S:
                nudged = True
                for path in pending:
                    with contextlib.suppress(OSError):
                        os.utime(workspace / path)
            await asyncio.sleep(_FRESH_POLL_S)
    return sorted(pending)


def _serves_disk(path: Path, answer: _ModuleAnswer, before: ServedModule) -> bool:
    """Whether ``answer`` was compiled from the file at ``path`` as it is now (as far as can be told)."""
    if not answer.is_module:
        return True  # a failed compile is retried from disk on every request: nothing is cached
    if answer.source is not None and answer.source == _read_text(path):
        return True  # exact: the module's source map carries the text it was compiled from
    if before.embeds_source:
        return False  # this module says what it was compiled from, and that is not the file
    return answer.digest != before.digest  # no exact check (e.g. CSS): a new answer means a recompile
