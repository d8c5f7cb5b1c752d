"""Pydantic types of what the models answer (structured outputs) and what nodes pass around."""

from __future__ import annotations

import re
from collections.abc import Callable, Sized
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


# A judge's grade as given: an integer from this project's own judges (their schemas say so);
# upstream's readings keep any number the model wrote ("3.5" stays 3.5, as WebGen-RL's reward reads it).
Grade = int | float


def _asked_as_integer(low: int, high: int) -> Callable[[dict[str, Any]], None]:
    """The grade as the request asks for it, an integer from ``low`` to ``high``; the answer is read as
    any number, as upstream reads it (the bounds are the request's, not checked)."""

    def schema_of(schema: dict[str, Any]) -> None:
        schema.pop("anyOf", None)
        schema.update(type="integer", minimum=low, maximum=high)

    return schema_of


def upstream_number(value: object) -> Grade:
    """A grade as WebGen-RL reads it (``extract_number``): a number as it is, else the first number
    written in a string ("4/5" is 4), else 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and (match := _NUMBER.search(value)):
        return int(match.group(0)) if re.fullmatch(r"[-+]?\d+", match.group(0)) else float(match.group(0))
    return 0


def upstream_text(value: object) -> str:
    """A field as WebGen-Agent shows it (an f-string of whatever the key holds): None is nothing."""
    return "" if value is None else value if isinstance(value, str) else str(value)


class ScreenshotJudgement(BaseModel):
    """The VLM's verdict on the landing page screenshot."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(description="What the page shows: layout, content, colours, visible problems.")
    score: int = Field(
        ge=1,
        le=5,
        description="1 broken or unrelated, 2 poor, 3 acceptable, 4 good, 5 polished and complete.",
    )
    suggestions: list[str] = Field(description="Concrete fixes to the appearance, most important first.")


class TestInstruction(BaseModel):
    """The single GUI test the feedback model writes from the requirement."""

    model_config = ConfigDict(extra="forbid")

    instruction: str = Field(
        description="Step-by-step instruction for a browser agent covering every required function."
    )


class GuiVerdict(BaseModel):
    """The feedback model's summary of one GUI-agent run."""

    model_config = ConfigDict(extra="forbid")

    passed: bool = Field(description="True only if every required function worked as described.")
    score: int = Field(ge=1, le=5, description="1 nothing works ... 5 everything works smoothly.")
    suggestions: list[str] = Field(description="What to fix in the code, most important first.")


class ScreenshotDescription(BaseModel):
    """Upstream profile: the VLM's reading of a screenshot (errors, description, suggestions)."""

    model_config = ConfigDict(extra="forbid")

    is_error: bool = Field(description="The screenshot shows a rendering or runtime error.")
    error_message: str = Field(description="The visible error message(s); empty when there is none.")
    screenshot_description: str = Field(description="Layout, components, colours, text; empty on an error.")
    suggestions: str = Field(description="How to improve the appearance; empty when nothing needs it.")

    @model_validator(mode="before")
    @classmethod
    def _read_as_upstream(cls, data: Any) -> Any:
        """Any JSON object is read as WebGen-Agent reads it (A `agent/webgen_agent.py` 186-196): each of
        the three texts when its key is there, shown as written (a list of suggestions too); other
        keys, and ``is_error``, are not read."""
        if not isinstance(data, dict):
            return data
        texts = {
            key: upstream_text(data.get(key)) for key in ("error_message", "screenshot_description", "suggestions")
        }
        return {"is_error": data.get("is_error") is True, **texts}


class ScreenshotGrade(BaseModel):
    """Upstream profile: the VLM's 0-5 appearance grade of a screenshot."""

    model_config = ConfigDict(extra="forbid")

    analysis: str = Field(description="A few sentences: strengths and weaknesses.")
    # Asked for 0-5; read as given (upstream keeps whatever number the model wrote).
    grade: Grade = Field(description="0 blank ... 5 excellent.", json_schema_extra=_asked_as_integer(0, 5))

    @model_validator(mode="before")
    @classmethod
    def _read_as_upstream(cls, data: Any) -> Any:
        """Any JSON object is read as WebGen-Agent reads it: ``data.get("grade", 0)`` and nothing else
        (A `utils/get_screenshot_description.py` 174), the grade's first number when it is text
        (RL `execute_for_feedback.py` 484)."""
        if not isinstance(data, dict):
            return data
        return {"analysis": upstream_text(data.get("analysis")), "grade": upstream_number(data.get("grade", 0))}


def _asked_as_text(schema: dict[str, Any]) -> None:
    """The field as the request asks for it, plain text; None only marks an answer that left it out."""
    schema.pop("anyOf", None)
    schema.pop("default", None)
    schema["type"] = "string"


class GuiSummary(BaseModel):
    """Upstream profile: the feedback model's summary of a GUI-agent run."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"required": ["passed", "suggestions", "grade"]})

    passed: bool = Field(description="The run shows the website working as the instruction asks.")
    # Asked for; None when the object has none, which upstream reports as a summary it could not
    # get, keeping the grade (A `agent/webgen_agent.py` 162-172).
    suggestions: str | None = Field(
        default=None,
        description="Fixes for the problems the run revealed; empty when it passed.",
        json_schema_extra=_asked_as_text,
    )
    # Asked for 1-5; read as given, 0 when missing (upstream's ``get("grade", 0)``).
    grade: Grade = Field(
        description="1 nearly everything fails ... 5 everything works.", json_schema_extra=_asked_as_integer(1, 5)
    )

    @model_validator(mode="before")
    @classmethod
    def _read_as_upstream(cls, data: Any) -> Any:
        """Upstream's own names (``test_passed``, ``improvement_suggestions``: its prompt, read with
        ``--prompts-from``) as well as these; the grade as upstream reads it, 0 when missing, its first
        number when it is text (RL `execute_for_feedback.py` 463-464); other keys are not read."""
        if not isinstance(data, dict):
            return data
        suggestions = data.get("suggestions", data.get("improvement_suggestions"))
        read = {
            # Not read upstream (only set by a YES): an answer without it is not unusable.
            "passed": data.get("passed", data.get("test_passed")) is True,
            "grade": upstream_number(data.get("grade", 0)),
        }
        if suggestions is None:
            return read
        # Upstream shows them when ``len(...) > 0``: an empty list is nothing to improve.
        shown = not isinstance(suggestions, Sized) or len(suggestions) > 0
        return {**read, "suggestions": upstream_text(suggestions) if shown else ""}


class RequirementCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requirement: str = Field(description="One requirement, quoted or paraphrased briefly.")
    status: Literal["met", "partly", "unmet"]
    evidence: str = Field(description="What in the results shows this (screenshot, test, error).")


class Critique(BaseModel):
    """The llm Critic's diagnosis and repair plan (WebLoop-style)."""

    model_config = ConfigDict(extra="forbid")

    checks: list[RequirementCheck] = Field(description="Every requirement, one by one.")
    diagnosis: str = Field(description="The root cause of what is wrong, in a few sentences.")
    plan: list[str] = Field(description="Ordered, concrete code changes to make next.")


class RequirementItem(BaseModel):
    """One checkable requirement of an instruction (a WebGen-Bench test case has the same two fields)."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="What a browser tester does on the site: what to open, click or type.")
    expected_result: str = Field(description="What the site shows when the requirement is met.")


class RequirementList(BaseModel):
    """The feedback model's requirements for an instruction that came without test cases."""

    model_config = ConfigDict(extra="forbid")

    requirements: list[RequirementItem] = Field(description="One per function or visible feature asked for.")


class RequirementVerdict(BaseModel):
    """The execution-free Critic's verdict on one requirement, judged from the code."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=0, description="The requirement's id in the numbered list.")
    status: Literal["met", "partly", "unmet"]
    evidence: str = Field(description="What in the code shows this.")


class CodeCritique(BaseModel):
    """The execution-free Critic's answer (WebLoop): verdicts per requirement, diagnosis, repair plan."""

    model_config = ConfigDict(extra="forbid")

    verdicts: list[RequirementVerdict] = Field(description="One verdict per requirement id.")
    diagnosis: str = Field(description="The root cause of what is wrong, in a few sentences.")
    plan: list[str] = Field(description="Ordered, concrete code changes to make next.")


# ---- human review (docs/review.md) -------------------------------------------------------------

ReviewPoint = Literal["plan", "critique", "shell", "finalize"]
REVIEW_POINTS: tuple[ReviewPoint, ...] = ("plan", "critique", "shell", "finalize")
ReviewAction = Literal["approve", "edit", "reject"]


class ReviewRequest(BaseModel):
    """What a run asks its reviewer at a review point: the payload of LangGraph's ``interrupt()``."""

    kind: Literal["review"] = Field(default="review", description="Marks a review request among interrupts.")
    point: ReviewPoint
    run_id: str
    step: int | None = Field(description="The step the text belongs to (the chosen step for finalize).")
    about_to: str = Field(description="What happens on approve, in one sentence.")
    text: str = Field(description="What to review: the reply, the feedback, the command, or the chosen step.")
    files: list[str] = Field(default_factory=list, description="plan: the files the reply writes.")
    command: int | None = Field(default=None, description="shell: which command of the step (from 1).")
    commands: int | None = Field(default=None, description="shell: how many commands the step asks to run.")
    screenshot: str | None = Field(default=None, description="finalize: blob hash of the chosen step's PNG.")
    screenshot_path: str | None = Field(default=None, description="finalize: that PNG in the run's output folder.")
    edit_means: str = Field(description="What an edit's text replaces at this point.")
    reject_means: str = Field(description="What reject does at this point.")
    error: str = Field(default="", description="Why the previous answer was refused (then answer again).")


class ReviewDecision(BaseModel):
    """The reviewer's answer, sent as ``Command(resume=...)``: approve, edit (text and/or note) or reject."""

    model_config = ConfigDict(extra="forbid")

    action: ReviewAction
    text: str | None = Field(default=None, description="edit: the replacement (reply, feedback, command, step).")
    note: str = Field(default="", description="A note for the coder (edit or reject; finalize: kept in run.json).")

    @model_validator(mode="before")
    @classmethod
    def _bare_action(cls, data: object) -> object:
        """A bare action word (``"approve"``) stands for ``{"action": "approve"}``."""
        return {"action": data.strip().lower()} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _edit_says_what(self) -> ReviewDecision:
        if self.action == "edit" and self.text is None and not self.note.strip():
            raise ValueError("an edit needs a replacement 'text' or a 'note'")
        if self.action != "edit" and self.text is not None:
            raise ValueError(f"'text' is for edits; {self.action} takes only a 'note'")
        return self


def review_decision(value: object) -> ReviewDecision:
    """The resume value as a decision; raises ValueError with one line saying what is wrong."""
    try:
        return ReviewDecision.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        expected = '{"action": "approve" | "edit" | "reject", "text": "...", "note": "..."}'
        raise ValueError(
            f"invalid review answer {str(value)[:120]!r}: {f'{where}: ' if where else ''}{first['msg']} "
            f"(expected {expected})"
        ) from None
