"""Log summaries for the coder model, and the local URLs a server announced in its log.

A log explains a failure; it never decides one (failures are exit codes, dead servers, HTTP answers).
"""

from __future__ import annotations

import re

from webgen_agent.tools.process import strip_ansi

_LOCAL_URL = re.compile(r"https?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):\d+[^\s'\"<>]*")
_ANNOUNCE = re.compile(r"\blocal\b|listening|running|started|ready|available|serving", re.IGNORECASE)
_ERROR_MARKER = re.compile(
    r"error|ERR!|failed|cannot |can't |not found|unexpected|exception|✘|EADDRINUSE|ENOENT|EACCES|ERESOLVE",
    re.IGNORECASE,
)


def summarize_log(text: str, *, max_lines: int = 40, max_chars: int = 4000) -> str:
    """The lines of a log worth showing: error-marked lines with context first, then the tail.

    Marked lines get a ``>> `` prefix; skipped stretches show as ``...``.
    """
    lines = [line.rstrip() for line in strip_ansi(text).split("\n") if line.strip()]
    if not lines:
        return ""
    marked = [i for i, line in enumerate(lines) if _ERROR_MARKER.search(line)]
    keep: set[int] = set()
    for i in marked:  # the first errors are usually the cause; later ones are fallout
        window = set(range(max(0, i - 1), min(len(lines), i + 3)))
        if len(keep | window) > max_lines - 10:
            break
        keep |= window
    for i in range(len(lines) - 1, -1, -1):  # fill the rest with the tail
        if len(keep) >= max_lines:
            break
        keep.add(i)
    marked_set = set(marked)
    out: list[str] = []
    previous = -1
    for i in sorted(keep):
        if i != previous + 1:
            out.append("...")
        out.append((">> " if i in marked_set else "   ") + lines[i][:400])
        previous = i
    summary = "\n".join(out)
    if len(summary) > max_chars:
        half = max_chars // 2
        summary = summary[:half] + "\n...\n" + summary[-half:]
    return summary


def last_lines(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def explain(headline: str, log: str) -> str:
    summary = summarize_log(log)
    return f"{headline}\n{summary}" if summary else headline


def printed_urls(log: str) -> list[str]:
    """Local URLs a server announced (vite: ``Local: http://127.0.0.1:5173/``), normalised for polling.

    Only lines that announce a server count: an error such as "could not proxy to
    http://localhost:8080" must not send us to some other service.
    """
    urls: list[str] = []
    announced = [line for line in strip_ansi(log).split("\n") if _ANNOUNCE.search(_LOCAL_URL.sub(" ", line))]
    for match in _LOCAL_URL.findall("\n".join(announced)):
        url = match.rstrip(".,;)")
        for host in ("0.0.0.0", "[::]", "[::1]"):
            url = url.replace(f"//{host}:", "//127.0.0.1:")
        candidates = [url, url.replace("//localhost:", "//127.0.0.1:")] if "//localhost:" in url else [url]
        urls.extend(u for u in candidates if u not in urls)
    return urls
