"""A recorded test as data: one step list that the Python replayer runs and the spec writer prints."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TargetKind = Literal["test_id", "role", "label", "placeholder", "text", "css"]
StepKind = Literal["goto", "click", "fill", "select", "press", "go_back", "expect_text", "expect_count", "expect_url"]
ReplayStatus = Literal["passed", "failed", "flaky", "unmatched"]


class Target(BaseModel):
    """A Playwright locator: how a person (or a screen reader) finds the element, never an index."""

    model_config = ConfigDict(frozen=True)

    by: TargetKind
    value: str = Field(description="Test id, role, label, placeholder, text, or CSS selector.")
    name: str | None = Field(default=None, description="Accessible name, for a role.")
    first: bool = Field(default=False, description="Several elements matched when recorded: act on the first.")

    def describe(self) -> str:
        if self.by == "role":
            return f'{self.value} "{self.name}"' if self.name else self.value
        return f"{self.by} {self.value!r}"


class ReplayStep(BaseModel):
    """One action or assertion of a recorded test."""

    kind: StepKind
    target: Target | None = None
    value: str | None = Field(default=None, description="Text typed, option, key, path, CSS (count) or URL pattern.")
    count: int | None = Field(default=None, description="Expected number of elements (expect_count).")
    agent_step: int | None = Field(default=None, description="The GUI agent's step it was recorded from.")

    def describe(self) -> str:
        """The step as a person reads it, e.g. 'click button "Add item"'."""
        on = f" {self.target.describe()}" if self.target else ""
        if self.kind == "fill":
            return f"fill{on} with {self.value!r}"
        if self.kind == "expect_count":
            return f"expect {self.count} elements matching {self.value!r}"
        if self.kind == "expect_text":
            return f"expect text {self.target.value if self.target else ''!r} visible"
        if self.kind in ("goto", "expect_url", "press", "select"):
            return f"{self.kind}{on} {self.value!r}"
        return f"{self.kind}{on}"


class RecordedTest(BaseModel):
    """What a passing GUI test did, replayable without a model."""

    name: str = Field(description="File-name-safe name, unique in the run, e.g. step-3.")
    instruction: str = Field(description="The GUI test instruction the agent followed.")
    recorded_at_step: int = Field(description="The code-edit step whose GUI test it was recorded from.")
    covers_all: bool = Field(description="Recorded from a full pass: replaying it green covers the instruction.")
    source_score: int = Field(description="The GUI grade of the run it was recorded from (1-5).")
    steps: list[ReplayStep]

    @property
    def actions(self) -> int:
        return sum(not s.kind.startswith("expect") and s.kind != "goto" for s in self.steps)

    @property
    def assertions(self) -> int:
        return sum(s.kind.startswith("expect") for s in self.steps)


class ReplayVerdict(BaseModel):
    """How one replay of a recorded test went.

    passed: every step held; flaky: failed, then passed on the retry (never counted as a pass);
    failed: an action or assertion failed where its element was found (a regression); unmatched:
    a locator found no element (the page changed: a redesign or a removed function; the GUI agent
    re-checks).
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    test: str
    recorded_at_step: int
    status: ReplayStatus
    failed_step: int | None = Field(default=None, description="Index of the step that failed (first attempt).")
    failed_action: str | None = Field(default=None, description="That step as a person reads it.")
    error: str | None = None
    screenshot_png: bytes | None = Field(default=None, repr=False, description="The page when it failed.")
    page_text: str = Field(default="", description="The start of the page's visible text when it failed.")
    seconds: float = 0.0
    attempts: int = 1

    def for_coder(self) -> str:
        """The failure as the coder reads it: which test, which step it passed at, what failed."""
        where = f"step {self.failed_step + 1}" if self.failed_step is not None else "its start"
        return (
            f"Recorded test {self.test!r} (it passed at step {self.recorded_at_step}) now fails at {where}: "
            f"{self.failed_action or 'loading the page'}: {self.error or 'failed'}"
            + (f" (the page showed: {self.page_text})" if self.page_text else "")
        )
