"""Graph state: small and JSON-like. Big things live in the blob store; state holds their hashes.

Two keys are for people, not nodes: ``messages`` (the coder conversation as LangChain messages,
the latest screenshot as an image) and ``latest_step`` / ``latest_files`` (the latest step's grades
and files in words and text). The graph derives them after each node (nodes/readable.py) and no
node reads them; the checkpointer stores their texts and images by content (checkpoints/saver.py),
so they cost little beyond the blobs the hashes name.

``steps`` is the run's log of coder steps, merged by step index, so a node returns only the fields
it learned about the current step. Steps are never removed: a backtrack restores files and
messages from an earlier step while the abandoned steps stay listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, NotRequired, Required

# pydantic (and so the LangGraph server's input/output schemas for Studio) needs typing_extensions'
# TypedDict on Python < 3.12.
from langchain_core.messages import AnyMessage
from pydantic import Field
from typing_extensions import TypedDict

from webgen_agent.core.profiles.rules import Profile
from webgen_agent.core.views import Grade

StepAction = Literal["edit", "screenshot_validated", "finish", "malformed"]
RunStatus = Literal["running", "finished", "failed", "rejected"]  # rejected: by the reviewer at finalize


class ChatRef(TypedDict):
    """One message of the coder conversation; the text is in the store under ``hash``."""

    role: Literal["system", "user", "assistant"]
    hash: str


class Execution(TypedDict):
    """How running the project went (the executor's record of ``SiteRunner.ensure_running`` and the capture)."""

    ok: bool
    stage: str  # install, start, http, render, or ok
    error: str | None  # for the coder: what failed and the log lines that say why
    install_ran: bool
    install_cached: bool
    server_restarted: bool
    url: str | None
    install_s: float
    start_s: float
    fresh_s: float  # confirming a kept dev server serves the edit
    capture_s: NotRequired[float]
    # Upstream profile: blob hash of {"install": npm's output, "server": the server's log of this step},
    # and WebGen-Agent's error signals: the word "error" in either.
    logs: NotRequired[str]
    install_error: NotRequired[bool]
    start_error: NotRequired[bool]


class SampledTurn(TypedDict):
    """A model turn as sampled, for training: blob hashes of its messages, its text and its logprobs."""

    prompt: str  # JSON list of the messages that produced the used answer (a retry's included)
    completion: str  # the answer's text exactly as sampled
    logprobs: str | None  # JSON list of its token logprobs; None when the endpoint returned none


class ReplayTestRef(TypedDict):
    """A recorded GUI test (tools/replay); the test itself is in the store under ``hash``."""

    name: str
    hash: str
    step: int  # the code-edit step whose GUI test it was recorded from
    covers_all: bool  # recorded from a full pass: green, it covers the whole test instruction
    score: int  # the GUI grade of the run it was recorded from


class ReplaySummary(TypedDict):
    """The recorded tests replayed on a step's site, with no model call (default profile)."""

    verdicts: str  # blob hash of the JSON list of verdicts (each failure's screenshot a blob hash)
    passed: int
    failed: int  # regressions: an action or assertion failed where its element was found
    flaky: int  # failed, then passed on the retry: never counted as a pass
    unmatched: int  # a locator matched nothing (a redesign, or a function removed): the GUI agent re-checks
    seconds: float
    regressions: list[str]  # each failure as the coder reads it


class Step(TypedDict):
    """One coder output (Generator or Refiner) and what followed it.

    The coder turn writes every required field; later nodes of the step add the others.
    """

    index: int
    role: Literal["generator", "refiner"]
    action: StepAction
    parent: int | None  # step whose files and conversation this one built on
    tests_step: int | None  # for a control step: the code-edit step it refers to
    prompt_len: int  # number of messages the coder was sent
    prompt: str  # blob hash of the JSON list of ChatRef the coder was sent (exactly)
    completion: str  # blob hash of the coder's raw output
    summary: str  # one-line description of the edit
    format_ok: bool
    problems: list[str]  # format problems and refused paths, for the model
    screenshot_score: Grade  # 1-5, 0 when nothing rendered
    gui_score: Grade  # 1-5, 0 when not run
    gui_passed: bool | None  # None when no GUI test ran
    errored: bool
    timings: dict[str, float]  # node -> wall seconds
    tokens: dict[str, dict[str, int]]  # node -> {input, output, calls}
    model: str
    cost: NotRequired[dict[str, float | None]]  # node -> USD of its model calls; None: a price was unknown
    files: NotRequired[str | None]  # manifest hash after the edit
    base_files: NotRequired[str | None]  # manifest hash the edit was applied to (its diff's left side)
    changed: NotRequired[list[str]]
    execution: NotRequired[Execution]
    screenshot: NotRequired[str | None]  # blob hash of the PNG
    page: NotRequired[str | None]  # blob hash of {title, visible_text, console_errors, page_errors}
    description: NotRequired[str]
    suggestions: NotRequired[list[str]]
    gui_suggestions: NotRequired[list[str]]
    gui_run: NotRequired[str | None]  # blob hash of the GUI run record (actions, answer)
    visible_error: NotRequired[str]  # upstream profile: an error the VLM read off the screenshot
    judge_error: NotRequired[str]  # why the screenshot judge gave no usable answer (its grade is then 0)
    # upstream profile: the step raised (a judge reply with no JSON object); it is never ranked, and
    # the run restarts from its best good step before every later step (docs/fidelity.md)
    exception: NotRequired[str]
    gui_error: NotRequired[str]  # upstream profile: why the GUI test could not run
    critique: NotRequired[str | None]  # blob hash of the llm Critic's answer
    critic_prompt: NotRequired[str | None]  # blob hash of the JSON messages the llm Critic was sent
    feedback: NotRequired[str | None]  # blob hash of the message the next Refiner turn got
    logprobs: NotRequired[str | None]  # blob hash, when the endpoint returned them
    pages: NotRequired[str | None]  # blob hash of the JSON list of captured pages (landing page first)
    page_count: NotRequired[int]
    structure_ok: NotRequired[bool]  # the scaffold's structural check passed (only with a scaffold)
    checks: NotRequired[str | None]  # blob hash of the JSON list of requirement-check results of this page
    check_score: NotRequired[float]  # mean credit of those checks (0-1)
    critic_target: NotRequired[int]  # for an execution-free critique: the step whose page it judged
    critic_model: NotRequired[str]  # the model role that answered as Critic (coder or feedback)
    critic_completion: NotRequired[str | None]  # blob hash of the Critic's answer as sampled (its text)
    critic_logprobs: NotRequired[str | None]  # blob hash of its token logprobs, when the endpoint returned them
    # "node/role" -> {retries, waited_s, fallback, condensed, reasons}: endpoint trouble met while the
    # step was worked on (waits, fallback model, condensed prompt); never a mark against the step.
    endpoint: NotRequired[dict[str, dict[str, Any]]]
    token_ids: NotRequired[str | None]  # blob hash of {"prompt": ids | None, "completion": ids | None}
    # node (or node/call) -> its model turn as sampled, kept when the role's settings ask for logprobs
    # (the screenshot judge, the GUI verdict; the Critic keeps its own in critic_*)
    sampled: NotRequired[dict[str, SampledTurn]]
    replay: NotRequired[ReplaySummary]  # the recorded GUI tests replayed on this step's site
    # step 0 of a run started from a folder (run --from): the manifest hash of the user's files, which
    # the executor writes instead of a reply's (no coder call; no export trains on its turn), and the folder
    imported: NotRequired[str]
    imported_from: NotRequired[str]


class StepUpdate(TypedDict, total=False):
    """What a node returns about a step: its index and the fields it learned (merged by ``merge_steps``)."""

    index: Required[int]
    role: Literal["generator", "refiner"]
    action: StepAction
    parent: int | None
    tests_step: int | None
    prompt_len: int
    prompt: str
    completion: str
    summary: str
    format_ok: bool
    problems: list[str]
    screenshot_score: Grade
    gui_score: Grade
    gui_passed: bool | None
    errored: bool
    timings: dict[str, float]
    tokens: dict[str, dict[str, int]]
    model: str
    cost: dict[str, float | None]
    files: str | None
    base_files: str | None
    changed: list[str]
    execution: Execution
    screenshot: str | None
    page: str | None
    description: str
    suggestions: list[str]
    gui_suggestions: list[str]
    gui_run: str | None
    visible_error: str
    judge_error: str
    exception: str
    gui_error: str
    critique: str | None
    critic_prompt: str | None
    feedback: str | None
    logprobs: str | None
    pages: str | None
    page_count: int
    structure_ok: bool
    checks: str | None
    check_score: float
    critic_target: int
    critic_model: str
    critic_completion: str | None
    critic_logprobs: str | None
    endpoint: dict[str, dict[str, Any]]
    token_ids: str | None
    sampled: dict[str, SampledTurn]
    replay: ReplaySummary
    imported: str
    imported_from: str


class Event(TypedDict, total=False):
    """Something that happened between steps (backtrack, restart, finish)."""

    kind: Literal["backtrack", "restart", "stop", "finalize", "error", "review"]  # stop: the loop governor
    after_step: int
    target_step: int | None
    reason: str


def conversation_of(state: AgentState) -> list[ChatRef]:
    """The coder conversation. Runs checkpointed before it had its own key kept it under ``messages``
    (then a list of ChatRef), so such a run resumes where it was."""
    if "conversation" in state:
        return state["conversation"]
    earlier: list[Any] = list(state.get("messages") or [])
    return [
        ChatRef(role=m["role"], hash=m["hash"]) for m in earlier if isinstance(m, dict) and set(m) == {"role", "hash"}
    ]


def merge_steps(current: list[Step] | None, updates: list[StepUpdate] | None) -> list[Step]:
    """Reducer: merge partial step records by ``index``; nested timing/token/cost/endpoint/sampled dicts merge too.

    A step's first update (the coder turn) carries every required field of ``Step``.
    """
    # Plain dicts while merging: a step is complete only once its first update is in.
    merged: list[dict[str, Any]] = [dict(step) for step in (current or [])]
    by_index: dict[int, dict[str, Any]] = {step["index"]: step for step in merged}
    for update in updates or []:
        index = update["index"]
        existing = by_index.get(index)
        if existing is None:
            record: dict[str, Any] = dict(update)
            merged.append(record)
            by_index[index] = record
            continue
        for key, value in update.items():
            if key in ("timings", "tokens", "cost", "endpoint", "sampled") and isinstance(value, dict):
                existing[key] = {**existing.get(key, {}), **value}
            else:
                existing[key] = value
    merged.sort(key=lambda step: step["index"])
    return merged  # type: ignore[return-value]


def append_events(current: list[Event] | None, new: list[Event] | None) -> list[Event]:
    return [*(current or []), *(new or [])]


class StepView(TypedDict, total=False):
    """The latest coder step as a person reads it (LangGraph Studio): words and numbers, no blob hashes."""

    index: int
    role: str  # generator or refiner
    action: str  # edit, screenshot_validated, finish or malformed
    summary: str
    errored: bool
    run: str  # "ok", or the stage that failed and why (install, start, http, render)
    screenshot_score: Grade  # 1-5 from the Screenshot-Judge, 0 when nothing rendered
    screenshot: str  # what the judge saw
    gui_score: Grade  # 1-5 from the GUI test, 0 when it did not run
    gui_passed: bool | None
    check_score: float  # WebLoop: share of the requirement checks passed
    problems: list[str]
    changed: list[str]
    feedback: str  # the message the next Refiner turn gets


class RequirementCheck(TypedDict):
    """One requirement the checks test (a WebGen-Bench test case has the same two fields)."""

    task: str  # what a tester does on the site
    expected_result: str  # what the site then shows


class InputState(TypedDict, total=False):
    """What a caller passes in (Studio's input form): the requirement; the rest is optional."""

    # The descriptions are what Studio's input form shows beside each field.
    requirement: Required[Annotated[str, Field(description="The website to build, in words.")]]
    run_id: Annotated[str, Field(description="Optional. Default: the thread's id.")]
    out_dir: Annotated[str, Field(description="Optional. The run's folder; default: runs_dir/run_id.")]
    group_id: Annotated[str, Field(description="Optional. Runs of one GRPO group share it.")]
    requirements: Annotated[
        list[RequirementCheck],
        Field(description="Optional. What the requirement checks test; default: the feedback model writes them."),
    ]


class OutputState(TypedDict, total=False):
    """What a caller gets back."""

    run_id: str
    status: str
    chosen_step: int | None
    site_dir: str | None
    steps: Annotated[list[Step], merge_steps]
    out_dir: str


class GovernorCall(TypedDict):
    """The loop governor's verdict at the latest critique (core/governor.py), decided once, by the
    critic node: its router sends the run back on it, and the backtrack node acts on it and records
    its reason, without asking the governor again."""

    action: Literal["backtrack", "stop"]
    reason: str


class AgentState(TypedDict, total=False):
    requirement: str
    run_id: str
    out_dir: str
    group_id: str
    conversation: list[ChatRef]  # the coder conversation, replaced as a whole (a few hashes)
    messages: list[AnyMessage]  # for people: the conversation as chat messages (nodes/readable.py)
    latest_step: StepView  # for people: the latest step's grades in words
    latest_files: dict[str, str]  # for people: the latest step's files, path -> text
    files: str | None  # manifest hash of the current workspace
    current: int  # index of the latest coder step
    edit_step: int | None  # the latest code-edit step on the current branch (what a test checks)
    consecutive_errors: int
    test_instruction: str | None
    feedback: str | None  # blob hash of the critic's message for the next refiner turn
    steps: Annotated[list[Step], merge_steps]
    events: Annotated[list[Event], append_events]
    status: RunStatus
    chosen_step: int | None
    site_dir: str | None
    profile: Profile  # the rules the run followed (exports read it)
    # Steps that raised so far (upstream profile). Once one did, every later step starts from the
    # best good step (WebGen-Agent's restart flag is never reset); past the limit the run ends.
    restarts: int
    requirements: list[RequirementCheck] | None  # the instruction's requirement list (checks, execution-free critic)
    replay_tests: list[ReplayTestRef]  # GUI tests recorded so far, replayed after each edit (replaced as a whole)
    governor: GovernorCall | None  # why the critic's router sends the run back (None: it does not)


class NodeUpdate(TypedDict, total=False):
    """What a node returns: any ``AgentState`` field, with ``steps`` as partial records (``StepUpdate``,
    merged by index) and ``events`` as the new ones (appended). tests/test_one_source.py checks that the
    fields are ``AgentState``'s."""

    requirement: str
    run_id: str
    out_dir: str
    group_id: str
    conversation: list[ChatRef]
    messages: list[AnyMessage]
    latest_step: StepView
    latest_files: dict[str, str]
    files: str | None
    current: int
    edit_step: int | None
    consecutive_errors: int
    test_instruction: str | None
    feedback: str | None
    steps: Sequence[Step | StepUpdate]  # a new step's first record is whole (the coder turn's)
    events: list[Event]
    status: RunStatus
    chosen_step: int | None
    site_dir: str | None
    profile: Profile
    restarts: int
    requirements: list[RequirementCheck] | None
    replay_tests: list[ReplayTestRef]
    governor: GovernorCall | None
