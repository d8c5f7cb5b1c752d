"""Parser for the bolt-style edit format the WebGen-Agent / WebGen-LM coders write.

A reply is one of: a code edit (``<boltArtifact>`` holding ``<boltAction type="file" filePath=...>``
whole files and ``<boltAction type="shell">`` commands), a control signal ``screenshot_validated``
(run the GUI test on the current code) or ``finish``, either as the bare word or as the tag
``<boltAction type="finish"/>`` that models trained on WebGen-Agent's data write. Two rule sets:

- ``default``: a reply without a usable action or control signal is malformed, and the problems
  are written for the model to read;
- ``upstream`` (WebGen-Agent's loop and Step-GRPO trainer): a reply holding the tag text
  ``boltAction type="finish"`` (then ``screenshot_validated``; either quote) anywhere is that
  control signal, badly formatted when over 400 characters or holding ``boltArtifact``; any other
  reply is an edit, even with no file in it (the code simply runs again); a repetitive reply
  (``has_repetition``) is badly formatted;
- ``webgen-rl`` (WebGen-RL's rollout environment): the same, but ``screenshot_validated`` is
  checked first, and the files of an artifact inside a control reply are kept: the environment
  writes every assistant turn's files before it runs the GUI test.

Hand-written with regular expressions because the format is XML-like but not XML (raw JSX,
unescaped ``<`` and ``&`` inside file bodies).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from webgen_agent.core.profiles.rules import REPEATS_ITSELF, ReplyFormat

ReplyKind = Literal["edit", "screenshot_validated", "finish", "malformed"]
ControlWord = Literal["screenshot_validated", "finish"]
CONTROL_WORDS: tuple[ControlWord, ...] = ("screenshot_validated", "finish")
# The Step-GRPO trainer scores a control reply longer than this as badly formatted.
CONTROL_REPLY_MAX_CHARS = 400

_ATTR = re.compile(r"""([A-Za-z_:][\w:.-]*)\s*=\s*("([^"]*)"|'([^']*)')""")
_ARTIFACT_OPEN = re.compile(r"<boltArtifact\b([^>]*)>", re.IGNORECASE)
_ARTIFACT_CLOSE = re.compile(r"</boltArtifact\s*>", re.IGNORECASE)
_ACTION = re.compile(r"<boltAction\b([^>]*)>(.*?)</boltAction\s*>", re.IGNORECASE | re.DOTALL)
_ACTION_OPEN = re.compile(r"<boltAction\b", re.IGNORECASE)
# WebGen-Agent's own reading of a file action (A and RL `file_management.py`
# `extract_and_write_files`): exactly this spelling, the content as written (its first newline too).
_UPSTREAM_FILE = re.compile(r'<boltAction type="file" filePath="(.*?)">(.*?)</boltAction>', re.DOTALL)
_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```\s*$", re.DOTALL)
# A control signal written as a tag: <boltAction type="finish"/> or <boltAction type='finish'></boltAction>.
_CONTROL_TAG = re.compile(
    r"""<boltAction\s+type\s*=\s*["'](screenshot_validated|finish)["']\s*/?>(?:\s*</boltAction\s*>)?""",
    re.IGNORECASE,
)
# has_repetition's canonical form: colours and numbers become one placeholder.
_HEX_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}\b")
_RGB_COLOUR = re.compile(r"rgba?\([^)]*\)")
_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:e[-+]?\d+)?")
_WHITESPACE = re.compile(r"\s+")
REPETITION_WINDOW = 50  # characters
REPETITION_SHARE = 0.40  # of all windows, counting windows seen at least 3 times


class FileAction(BaseModel):
    path: str = Field(description="filePath as written by the model (checked later for safety).")
    content: str = Field(description="The whole file, HTML entities unescaped.")


class ParsedReply(BaseModel):
    kind: ReplyKind
    files: list[FileAction] = Field(default_factory=list)
    shell: list[str] = Field(default_factory=list)
    title: str = ""
    problems: list[str] = Field(default_factory=list, description="Format problems, written for the model.")
    format_ok: bool = Field(default=True, description="False for replies upstream rewards with -1.")

    def summary(self) -> str:
        """One line describing the reply, for step tables and reports."""
        if self.kind != "edit":
            return self.kind
        paths = ", ".join(f.path for f in self.files[:6])
        more = f" (+{len(self.files) - 6} more)" if len(self.files) > 6 else ""
        shell = f"; {len(self.shell)} shell" if self.shell else ""
        return f"{len(self.files)} file(s): {paths}{more}{shell}"


def parse_attributes(text: str) -> dict[str, str]:
    """Attributes in any order, single or double quotes, names case-insensitive."""
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(text):
        value = match.group(3) if match.group(3) is not None else match.group(4)
        attrs[match.group(1).lower()] = html.unescape(value)
    return attrs


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text.strip())
    return match.group(1) if match else text


def _control_word(text: str) -> ControlWord | None:
    bare = re.sub(r"[`*_\"'.!\s]+", " ", text).strip().lower()
    for word in CONTROL_WORDS:
        if bare == word or bare == word.replace("_", " "):
            return word
        if re.search(rf"(?<![\w]){word}(?![\w])", text, re.IGNORECASE):
            return word
    return None


def upstream_control(text: str, *, validated_first: bool = False) -> ControlWord | None:
    """WebGen-Agent's control detection: the tag text anywhere, ``finish`` checked first (the agent
    loop's ``step``) or ``screenshot_validated`` first (the rollout environment's ``create_workspace``)."""
    order: tuple[ControlWord, ...] = ("finish", "screenshot_validated")
    for word in reversed(order) if validated_first else order:
        if f'boltAction type="{word}"' in text or f"boltAction type='{word}'" in text:
            return word
    return None


def is_repetitive(text: str) -> bool:
    """Heavy repetition: a long reply mostly made of the same few lines (degenerate sampling)."""
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 12]
    if len(lines) < 60:
        return False
    most_common = Counter(lines).most_common(1)[0][1]
    return most_common / len(lines) > 0.4


def has_repetition(text: str) -> bool:
    """The Step-GRPO trainer's repetition rule, exactly.

    Colours and numbers become one placeholder, whitespace is collapsed and case folded; then
    the share of 50-character windows (every offset) that occur at least three times must reach
    40 %. Texts under 100 characters never count.
    """
    canonical = _NUMBER.sub("<VAR>", _RGB_COLOUR.sub("<VAR>", _HEX_COLOUR.sub("<VAR>", text)))
    canonical = _WHITESPACE.sub(" ", canonical).strip().lower().replace("<|endoftext|>", "")
    if len(canonical) < 2 * REPETITION_WINDOW:
        return False
    normal = _WHITESPACE.sub(" ", canonical.strip())
    if len(normal) < 2 * REPETITION_WINDOW:
        return False
    count = len(normal) - REPETITION_WINDOW + 1
    windows = Counter(normal[i : i + REPETITION_WINDOW] for i in range(count))
    repeated = sum(n for n in windows.values() if n >= 3)
    return repeated / count >= REPETITION_SHARE


def parse_reply(text: str, reply_format: ReplyFormat = "project") -> ParsedReply:
    """Classify and parse one coder reply in ``reply_format`` (a profile's rule); never raises."""
    return _PARSERS[reply_format](text or "")


def _parse_project(text: str) -> ParsedReply:
    """This project's reading: a <boltArtifact> of whole files, or a control word (also as a tag)."""
    if not text or not text.strip():
        return ParsedReply(
            kind="malformed",
            format_ok=False,
            problems=["The reply was empty. Reply with a <boltArtifact> holding whole files, or a control word."],
        )
    # A control tag counts as its bare word (models trained on WebGen-Agent's data write the tag).
    body = _CONTROL_TAG.sub(lambda match: match.group(1), _strip_fence(text))
    has_action = bool(_ACTION_OPEN.search(body))
    if not has_action:
        word = _control_word(body)
        if word is not None:
            if len(body.strip()) > CONTROL_REPLY_MAX_CHARS:
                return ParsedReply(
                    kind=word,  # honoured, but scored as malformed like upstream
                    format_ok=False,
                    problems=[f"A '{word}' reply should be the signal alone, not {len(body.strip())} characters."],
                )
            return ParsedReply(kind=word)
        return ParsedReply(
            kind="malformed",
            format_ok=False,
            problems=[
                'No <boltArtifact> with <boltAction type="file" filePath="..."> was found, and no control '
                "word. Write every changed file whole inside boltAction tags, or reply 'screenshot_validated' "
                "or 'finish'."
            ],
        )

    edit = _edit(body)
    problems = edit.problems
    format_ok = True
    outside = _ACTION.sub("", body)
    if _control_word(outside) is not None and re.search(r"(?m)^\W*(screenshot_validated|finish)\W*$", outside):
        problems.append("A control word was mixed with code; it was ignored and the code applied.")
        format_ok = False
    if is_repetitive(body):
        problems.append("The reply repeats the same lines many times.")
        format_ok = False
    if not edit.files and not edit.shell:
        problems.append("The artifact held no usable file or shell action.")
        return ParsedReply(kind="malformed", title=edit.title, problems=problems, format_ok=False)
    if any("not closed" in p for p in problems):
        format_ok = False
    return edit.model_copy(update={"problems": problems, "format_ok": format_ok})


def _parse_upstream(text: str, *, rollout: bool = False) -> ParsedReply:
    word = upstream_control(text, validated_first=rollout)
    repetitive = has_repetition(text)
    if word is not None:
        problems: list[str] = []
        if len(text.strip()) > CONTROL_REPLY_MAX_CHARS:
            problems.append(f"A '{word}' reply should be the tag alone, not {len(text.strip())} characters.")
        if "boltArtifact" in text:
            applied = "was applied" if rollout else "was not applied"
            problems.append(f"A '{word}' reply must not hold a boltArtifact; its code {applied}.")
        if repetitive:
            problems.append(REPEATS_ITSELF)
        # The rollout environment writes the file actions of every assistant turn, a control reply's
        # included (RL `file_management.py` `create_workspace` 111-114); the agent loop only an edit's.
        files = _upstream_files(text) if rollout else []
        return ParsedReply(kind=word, files=files, problems=problems, format_ok=not problems)
    edit = _edit(_strip_fence(text))
    problems = [*edit.problems, *([REPEATS_ITSELF] if repetitive else [])]
    return edit.model_copy(update={"files": _upstream_files(text), "problems": problems, "format_ok": not repetitive})


def _upstream_files(text: str) -> list[FileAction]:
    """The files WebGen-Agent writes for a reply: the actions its pattern finds, HTML entities
    unescaped, nothing stripped (a file action spelled otherwise is not written)."""
    return [FileAction(path=path, content=html.unescape(content)) for path, content in _UPSTREAM_FILE.findall(text)]


def _parse_rollout(text: str) -> ParsedReply:
    return _parse_upstream(text, rollout=True)


_PARSERS: dict[ReplyFormat, Callable[[str], ParsedReply]] = {
    "project": _parse_project,
    "webgen-agent": _parse_upstream,
    "webgen-rl": _parse_rollout,
}


def _edit(body: str) -> ParsedReply:
    """The files and shell commands of a reply, with the problems of its markup (kind ``edit``)."""
    problems: list[str] = []
    opens = len(_ARTIFACT_OPEN.findall(body))
    closes = len(_ARTIFACT_CLOSE.findall(body))
    if opens == 0 and _ACTION_OPEN.search(body):
        problems.append("The boltAction tags were not inside a <boltArtifact>; they were applied anyway.")
    elif opens != closes:
        problems.append("A <boltArtifact> tag was not closed with </boltArtifact>.")
    title_match = _ARTIFACT_OPEN.search(body)
    title = parse_attributes(title_match.group(1)).get("title", "") if title_match else ""

    files: list[FileAction] = []
    shell: list[str] = []
    closed_actions = 0
    for match in _ACTION.finditer(body):
        closed_actions += 1
        attrs = parse_attributes(match.group(1))
        content = html.unescape(match.group(2))
        kind = attrs.get("type", "").lower()
        if kind == "file":
            path = attrs.get("filepath") or attrs.get("path") or ""
            if not path:
                problems.append("A file action had no filePath attribute and was skipped.")
                continue
            files.append(FileAction(path=path.strip(), content=_strip_leading_newline(content)))
        elif kind == "shell":
            if content.strip():
                shell.append(content.strip())
        else:
            problems.append(f"Unknown boltAction type {kind or '(none)'!r} was skipped.")
    total_actions = len(_ACTION_OPEN.findall(body))
    if closed_actions < total_actions:
        problems.append(
            f"{total_actions - closed_actions} <boltAction> tag(s) were not closed with </boltAction>; "
            "the reply may have been cut off. Those files were not written."
        )
    return ParsedReply(kind="edit", files=files, shell=shell, title=title, problems=problems)


def _strip_leading_newline(content: str) -> str:
    # Models put the file body on the line after the tag; that first newline is not file content.
    return content[1:] if content.startswith("\n") else content
