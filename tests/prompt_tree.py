"""A prompt tree shaped like a WebGen-Agent checkout (src/prompts/, src/utils/), in this project's own
words, for the ``--prompts-from`` tests. Every module also holds code that would leave a mark if it
ran: the reader must parse the files, never import or run them."""

from __future__ import annotations

from pathlib import Path

SYSTEM = "Checkout system prompt: you write websites as bolt artifacts, whole files only."
FUNCTION_TEST = (
    "Checkout test request. Turn this instruction into one GUI test:\n<instruction>{instruction}</instruction>"
)
REMINDERS = "Checkout reminder: every file you write is written whole."
DESCRIBE = 'Checkout describe request: return {"is_error", "error_message", "screenshot_description", "suggestions"}.'
GRADE = 'Checkout grade request: answer {{"analysis": "...", "grade": 0-5}} as JSON.'
SUMMARY = "Checkout summary request.\nInstruction: {gui_instruction}\nWhat happened:\n{result}\nAnswer with JSON."

# Where each text goes: (file under src/, variable, text). Two live in one utils module, as upstream's do.
FILES: dict[str, list[tuple[str, str]]] = {
    "prompts/system.py": [("system_prompt", SYSTEM)],
    "prompts/function_test.py": [("function_test_prompt", FUNCTION_TEST)],
    "prompts/reminders.py": [("reminders_prompt", REMINDERS)],
    "utils/get_screenshot_description.py": [("screenshot_prompt", DESCRIBE), ("appearance_grade_prompt", GRADE)],
    "utils/get_webvoyager_feedback.py": [("summary_prompt", SUMMARY)],
}


def write_prompt_tree(root: Path, *, leave_out: str | None = None) -> Path:
    """The tree under ``root`` (its ``src/``); ``leave_out``: a variable not written. Returns ``root``."""
    ran = root / "ran"
    for relative, assignments in FILES.items():
        lines = [
            "import pathlib",
            f"pathlib.Path({str(ran)!r}).mkdir(exist_ok=True)  # runs only if the module is run",
            "",
        ]
        lines += [f"{name} = {text!r}" for name, text in assignments if name != leave_out]
        lines += ["", "def helper(x):", "    return x", ""]
        path = root / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines))
    (root / "src" / "prompts" / "__init__.py").write_text("raise SystemExit('never imported')\n")
    return root
