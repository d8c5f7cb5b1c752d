"""Human review (docs/review.md): what the coder is told about a reviewer's answer."""

from __future__ import annotations

# A reviewer's note, appended to what the coder gets next (the plan's request, the critic's feedback).
REVIEW_NOTE = "Note from the reviewer: {note}"
# plan, edit with a note: the coder revises its first reply (it sees that reply, then this).
PLAN_REVISE = "A reviewer read your reply before anything was written. Revise it and reply in full.\n\n{note}"
# critique, reject: the refiner gets this instead of the critic's feedback.
FEEDBACK_SET_ASIDE = (
    "A reviewer set aside the automatic feedback on your last reply. Keep improving the website against "
    "the requirement."
)
# shell, reject: the coder's step notes say the command did not run.
SHELL_REFUSED = "Shell action not run (the reviewer refused it): {command}"
# shell, edit with a text: the command that ran instead.
SHELL_REPLACED = "The reviewer replaced the shell action `{command}` by `{replacement}`."


def review_note(note: str) -> str:
    return REVIEW_NOTE.format(note=note.strip()) if note.strip() else ""


def with_review_note(text: str, note: str) -> str:
    """``text`` followed by the reviewer's note, if there is one."""
    return f"{text}\n\n{review_note(note)}" if note.strip() else text
