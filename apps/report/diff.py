"""A file's change as a unified diff whose lines are highlighted in the file's own language.

difflib finds the hunks and pygments lexes the whole file (before and after), so tokens that span
lines (comments, template strings) are coloured right; each diff line then takes its highlighted
line from the side it comes from. pygments' own formatters highlight either a diff or a language,
not both at once, which is why the lines are put together here.
"""

from __future__ import annotations

import difflib
import html
from functools import cache
from typing import Literal

from pydantic import BaseModel, Field
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

CONTEXT_LINES = 3
MAX_DIFF_LINES = 600  # per file; a lockfile's diff is cut, with the count of lines left out
MAX_HIGHLIGHTED_CHARS = 200_000  # a bigger file is shown as plain text (lexing it would be slow)

LineKind = Literal["hunk", "context", "added", "removed"]


class DiffLine(BaseModel):
    kind: LineKind
    html: str = Field(description="The line's text, escaped and highlighted (the hunk header for kind hunk).")
    old_number: int | None = None
    new_number: int | None = None


class FileDiff(BaseModel):
    lines: list[DiffLine]
    added: int = Field(description="Lines added in the whole file.")
    removed: int = Field(description="Lines removed in the whole file.")
    left_out: int = Field(default=0, description="Diff lines not shown (beyond MAX_DIFF_LINES).")


def file_diff(path: str, before: str, after: str) -> FileDiff:
    """The unified diff of ``before`` -> ``after`` (either may be empty: a file added or deleted)."""
    old, new = split_lines(before), split_lines(after)
    old_html, new_html = highlighted_lines(path, before, len(old)), highlighted_lines(path, after, len(new))
    lines: list[DiffLine] = []
    added = removed = 0
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        lines.append(DiffLine(kind="hunk", html=html.escape(_hunk_header(first[1], last[2], first[3], last[4]))))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [
                    DiffLine(kind="context", html=new_html[j1 + k], old_number=i1 + k + 1, new_number=j1 + k + 1)
                    for k in range(i2 - i1)
                ]
                continue
            lines += [DiffLine(kind="removed", html=old_html[i], old_number=i + 1) for i in range(i1, i2)]
            lines += [DiffLine(kind="added", html=new_html[j], new_number=j + 1) for j in range(j1, j2)]
            removed += i2 - i1
            added += j2 - j1
    shown = lines[:MAX_DIFF_LINES]
    return FileDiff(lines=shown, added=added, removed=removed, left_out=len(lines) - len(shown))


def _hunk_header(old_start: int, old_end: int, new_start: int, new_end: int) -> str:
    def span(start: int, end: int) -> str:
        length = end - start
        first = start + 1 if length else start  # an empty side names the line before it, as diff -u does
        return f"{first},{length}" if length != 1 else f"{first}"

    return f"@@ -{span(old_start, old_end)} +{span(new_start, new_end)} @@"


def split_lines(text: str) -> list[str]:
    """Lines as pygments counts them (only newlines end a line; a final newline adds no empty line)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def highlighted_lines(path: str, text: str, count: int) -> list[str]:
    """``count`` lines of ``text`` as HTML, each token in a ``<span>`` of pygments' short class."""
    if len(text) > MAX_HIGHLIGHTED_CHARS:
        return [html.escape(line) for line in split_lines(text)][:count]
    lines: list[list[str]] = [[]]
    for token, value in _lexer(path).get_tokens(text):
        for position, part in enumerate(value.split("\n")):
            if position:
                lines.append([])
            if part:
                lines[-1].append(_span(token, part))
    out = ["".join(parts) for parts in lines][:count]
    return out + [""] * (count - len(out))


def _span(token: _TokenType, text: str) -> str:
    css = _css_class(token)
    escaped = html.escape(text)
    return f'<span class="{css}">{escaped}</span>' if css else escaped


@cache
def _css_class(token: _TokenType) -> str:
    """pygments' short class for a token type (its nearest typed ancestor's), as its HTML formatter uses."""
    while token not in STANDARD_TYPES and token.parent is not None:
        token = token.parent
    return STANDARD_TYPES.get(token, "")


def _lexer(path: str) -> Lexer:
    # Keep every newline and tab as written: lines must line up with difflib's.
    options = {"stripnl": False, "ensurenl": False, "tabsize": 0}
    try:
        return get_lexer_for_filename(path, **options)
    except ClassNotFound:
        return TextLexer(**options)


def highlight_css(selector: str) -> str:
    """The colours of pygments' default style for the token classes under ``selector``."""
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="default").get_style_defs(selector))
