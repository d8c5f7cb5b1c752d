"""The upstream profile's prompts read from the user's own checkout of WebGen-Agent (``prompts_from``).

The project's prompts are its own words; a model trained on WebGen-Agent's data saw WebGen-Agent's
text. A user who has that checkout points a run at it and gets the same text, never copied into
this project: each prompt module is parsed as data (``ast``) and only module-level string
constants are read; nothing in the checkout is imported or run.

What is read (paths under the checkout's ``src/``): the coder's system prompt, the request for the
GUI test instruction and the whole-files reminder (``prompts/``), the screenshot description and
grade requests (``utils/get_screenshot_description.py``) and the GUI-run summary request
(``utils/get_webvoyager_feedback.py``). The feedback sentences and the GUI test suffix are written
inline in upstream's functions, not as prompt constants, and stay this project's words
(docs/fidelity.md).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from webgen_agent.core.errors import ConfigError

# Each prompt the upstream profile takes from a checkout: (file under src/, variable, placeholders
# its text must hold for upstream's own .format call).
NEEDED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "coder_system": ("prompts/system.py", "system_prompt", ()),
    "test_instruction": ("prompts/function_test.py", "function_test_prompt", ("{instruction}",)),
    "reminder": ("prompts/reminders.py", "reminders_prompt", ()),
    "describe": ("utils/get_screenshot_description.py", "screenshot_prompt", ()),
    "grade": ("utils/get_screenshot_description.py", "appearance_grade_prompt", ()),
    "gui_summary": ("utils/get_webvoyager_feedback.py", "summary_prompt", ("{gui_instruction}", "{result}")),
}


class PromptsFromError(ConfigError):
    """A checkout that lacks a prompt the upstream profile needs (the message is one line)."""


@dataclass(frozen=True)
class CheckoutPrompts:
    """The prompt texts as the checkout holds them (templates keep upstream's placeholders)."""

    coder_system: str
    test_instruction: str  # .format(instruction=...)
    reminder: str
    describe: str
    grade: str  # sent as it is: upstream never formats it
    gui_summary: str  # .format(gui_instruction=..., result=...)


def string_constants(source: str) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments of a Python source, parsed, never executed."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = value.value
    return found


def source_root(path: str | Path) -> Path:
    """The checkout's ``src/`` folder, given the checkout or its ``src/``."""
    root = Path(path).expanduser()
    return root / "src" if (root / "src").is_dir() else root


@functools.lru_cache(maxsize=8)
def _read(src: Path) -> CheckoutPrompts:
    texts: dict[str, str] = {}
    parsed: dict[str, dict[str, str]] = {}
    for key, (relative, name, placeholders) in NEEDED.items():
        if relative not in parsed:
            file = src / relative
            try:
                parsed[relative] = string_constants(file.read_text(encoding="utf-8"))
            except OSError:
                raise PromptsFromError(
                    f"prompts from {src}: {relative} is missing (a WebGen-Agent checkout?)"
                ) from None
            except (SyntaxError, ValueError) as exc:
                raise PromptsFromError(f"prompts from {src}: {relative} is not readable Python ({exc})") from None
        text = parsed[relative].get(name)
        if text is None:
            raise PromptsFromError(
                f"prompts from {src}: {relative} has no string `{name}`, which the upstream profile needs"
            )
        missing = [p for p in placeholders if p not in text]
        if missing:
            raise PromptsFromError(f"prompts from {src}: `{name}` in {relative} lacks {', '.join(missing)}")
        texts[key] = text
    return CheckoutPrompts(**texts)


def read_checkout(path: str | Path) -> CheckoutPrompts:
    """The upstream profile's prompts from a WebGen-Agent checkout; ``PromptsFromError`` names the
    first one missing."""
    src = source_root(path).resolve()
    if not src.is_dir():
        raise PromptsFromError(f"prompts from {path}: no such folder")
    return _read(src)
