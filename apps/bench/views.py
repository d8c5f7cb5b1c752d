"""WebGen-Bench types: what the evaluation models answer, and the records the benchmark writes.

Model answers (``CaseVerdict``) forbid extra fields so a sloppy answer is
retried rather than half-read. Records (``CaseResult``, ``SiteResult``, ``GenerationRecord``) are
one JSON line each, carry their own key, and hold everything the summary is computed from, so
``summary.json`` can always be rebuilt from ``results.jsonl`` and ``sites.jsonl`` alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Answer = Literal["YES", "PARTIAL", "NO"]
Verdict = Literal["YES", "PARTIAL", "NO", "START_FAILED"]
VerdictSource = Literal["agent", "feedback", "start_failed", "error"]
# Benchmark credit of each verdict: accuracy = mean credit x 100.
CREDIT: dict[Verdict, float] = {"YES": 1.0, "PARTIAL": 0.5, "NO": 0.0, "START_FAILED": 0.0}


# -- model answers -------------------------------------------------------------------------------


class CaseVerdict(BaseModel):
    """The feedback model's verdict on one UI test case, from the GUI agent's run."""

    model_config = ConfigDict(extra="forbid")

    verdict: Answer = Field(
        description="YES: the expected result was fully achieved; PARTIAL: only some of it; "
        "NO: not at all, or the run shows no evidence that it was."
    )
    reason: str = Field(description="One or two sentences: what the run showed that decides the verdict.")


class CaseResult(BaseModel):
    """One line of ``results.jsonl``: the outcome of one UI test case."""

    record_id: str
    case_index: int = Field(description="Position among the record's test cases (0-based).")
    task: str
    expected_result: str
    instruction_category: str = Field(description="The record's primary category.")
    case_category: str = Field(description="The test case's primary category.")
    verdict: Verdict
    reason: str = ""
    source: VerdictSource = Field(
        description="Who decided: the agent's final answer, the feedback model, a site that never "
        "started, or an error (endpoint down, crash) that left no usable verdict."
    )
    final_answer: str | None = Field(default=None, description="The GUI agent's own final answer.")
    actions: int = Field(default=0, description="Browser actions the GUI agent took.")
    stopped_reason: str | None = Field(default=None, description="Why the GUI agent stopped.")
    seconds: float = Field(default=0.0, description="Wall time of the GUI run and the verdict.")
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    error: str | None = Field(default=None, description="Infrastructure problem; --retry-errors redoes the case.")

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.record_id, self.case_index, self.task)


class SiteResult(BaseModel):
    """One line of ``sites.jsonl``: whether a record's site started, and its appearance grade."""

    record_id: str
    instruction_category: str
    started: bool
    start_stage: str | None = Field(default=None, description="install, start or http when it did not start.")
    start_error: str | None = None
    appearance: int = Field(
        default=0,
        ge=0,
        le=9,
        description="The grader's 1-5, read as WebGen-Bench reads it (the first digit after 'Grade'); 0 when the "
        "site never started, was not graded, or the answer had no grade.",
    )
    appearance_reason: str = ""
    screenshot: str | None = Field(default=None, description="Landing-page PNG, relative to the output folder.")
    install_s: float = 0.0
    start_s: float = 0.0
    seconds: float = Field(default=0.0, description="Wall time of start, screenshot and grade.")
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = Field(default=None, description="Why no grade came back from a started site.")

    @property
    def key(self) -> str:
        return self.record_id


class GenerationRecord(BaseModel):
    """One line of ``generation.jsonl``: the agent's run for one instruction."""

    record_id: str
    run_id: str
    status: str = Field(description="finished, failed or interrupted (as in the runs table).")
    site: str | None = Field(default=None, description="Final site folder, relative to the output folder.")
    steps: int = 0
    chosen_step: int | None = None
    seconds: float = Field(default=0.0, description="Wall time of this invocation's work on the run.")
    node_seconds: float = Field(default=0.0, description="Sum of node wall times over all steps.")
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    error: str | None = None

    @property
    def key(self) -> str:
        return self.record_id


# -- summary -------------------------------------------------------------------------------------


class Rates(BaseModel):
    """Verdict counts and rates over a group of test cases; rates and accuracy are percentages."""

    test_cases: int = Field(description="Test cases in the group (the denominator).")
    yes: int = 0
    partial: int = 0
    no: int = 0
    start_failed: int = 0
    missing: int = Field(default=0, description="Test cases with no result yet (counted as 0).")
    accuracy: float = Field(default=0.0, description="(YES + 0.5 PARTIAL) / test cases x 100.")
    yes_rate: float = 0.0
    partial_rate: float = 0.0
    no_rate: float = 0.0
    start_failed_rate: float = 0.0


class Cost(BaseModel):
    """Time and tokens of one phase, in total and per unit (instruction or test case)."""

    units: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds_per_unit: float = 0.0
    tokens_per_unit: float = Field(default=0.0, description="Input + output tokens per unit.")


class BenchSummary(BaseModel):
    """``summary.json``: the benchmark's figures for the records evaluated."""

    data: str = Field(description="The data file the records came from.")
    instructions: int
    test_cases: int
    overall: Rates
    by_instruction_category: dict[str, Rates]
    by_case_category: dict[str, Rates]
    appearance: float = Field(
        description="Mean appearance score over all instructions (0 for sites that never started)."
    )
    appearance_by_instruction_category: dict[str, float]
    sites_started: int
    generation: Cost | None = Field(default=None, description="Per instruction; None with --evaluate-only.")
    evaluation: Cost = Field(description="Per test case: GUI run and verdict.")
    models: dict[str, str] = Field(default_factory=dict, description="Evaluation role -> model name.")
