"""Pydantic types of the scripted model server: the scenario file, the request log, the wire format.

A scenario is a list of rules; the first rule whose matchers all hold answers the request. The
wire models mirror the OpenAI chat-completions objects closely enough that the real clients
(openai SDK, langchain-openai, browser-use's ChatOpenAI) parse them unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

REPLY_FIELDS = ("content", "content_file", "json", "tool_calls", "agent", "refusal", "fault")


class ScenarioError(ValueError):
    """The scenario file is missing or invalid; the message names the file and the problem."""


class Fault(BaseModel):
    """A scripted failure: an HTTP error, a broken reply, a body that is not JSON, a dropped connection."""

    model_config = ConfigDict(extra="forbid")

    status: int | None = Field(default=None, ge=400, le=599, description="Answer with this HTTP status.")
    message: str = Field(default="scripted fault", description="Error message in the JSON error body.")
    retry_after_s: float | None = Field(
        default=None,
        gt=0,
        le=60,
        description="Sent as Retry-After-Ms with an HTTP error; the openai SDK then retries after it.",
    )
    retry_after: int | None = Field(
        default=None, ge=0, le=3600, description="Sent as Retry-After (whole seconds) with an HTTP error."
    )
    malformed: bool = Field(default=False, description="HTTP 200 whose content is cut-off JSON text.")
    invalid_body: bool = Field(default=False, description="HTTP 200 whose body is not JSON at all.")
    drop: bool = Field(default=False, description="The connection is closed halfway through the answer.")
    empty_choices: bool = Field(default=False, description="HTTP 200 with an empty choices list.")

    @model_validator(mode="after")
    def _one_kind(self) -> Fault:
        kinds = [self.status is not None, self.malformed, self.invalid_body, self.drop, self.empty_choices]
        if sum(kinds) != 1:
            raise ValueError(
                "a fault is exactly one of: status, malformed: true, invalid_body: true, drop: true, empty_choices: true"
            )
        if self.status is None and (self.retry_after is not None or self.retry_after_s is not None):
            raise ValueError("retry_after and retry_after_s go with an HTTP status")
        return self


class ToolCallSpec(BaseModel):
    """One function call the scripted assistant makes."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AgentStep(BaseModel):
    """One browser-use agent step, written with high-level actions that the server resolves.

    Each action is a one-key object ``{action_name: params}``; a ``target`` param is replaced by
    the index of the element it names in the interactive-element listing of the request.
    """

    model_config = ConfigDict(extra="forbid")

    actions: list[dict[str, Any]] = Field(min_length=1)
    thinking: str | None = None
    evaluation_previous_goal: str | None = None
    memory: str | None = None
    next_goal: str | None = None

    @field_validator("actions")
    @classmethod
    def _one_key_each(cls, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for position, action in enumerate(actions):
            if len(action) != 1:
                raise ValueError(f"action {position} must have exactly one key (the action name), got {sorted(action)}")
            (params,) = action.values()
            if params is not None and not isinstance(params, (dict, str)):
                raise ValueError(f"action {position}: params must be an object (or a direction string for scroll)")
        return actions


class Rule(BaseModel):
    """Matchers (all optional, all must hold) and exactly one reply."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # matchers
    model: str | None = Field(default=None, description='Exact model name, or "*".')
    turn: int | None = Field(
        default=None,
        ge=0,
        description="Assistant messages in the request; for browser-use agent steps the step (0 first).",
    )
    contains: list[str] = Field(default_factory=list, description="All in the text of all request messages.")
    not_contains: list[str] = Field(default_factory=list, description="None in the text of all request messages.")
    schema_name: str | None = Field(
        default=None,
        alias="schema",
        description="response_format.json_schema.name must equal this.",
    )
    last_contains: list[str] = Field(default_factory=list, description="All in the last user message.")
    page_contains: list[str] = Field(
        default_factory=list,
        description="Agent requests only: all in the <browser_state> section (the element listing).",
    )
    page_not_contains: list[str] = Field(
        default_factory=list, description="Agent requests only: none in the <browser_state> section."
    )
    min_chars: int | None = Field(
        default=None, ge=1, description="The text of all request messages has at least this many characters."
    )
    times: int | None = Field(default=None, ge=1, description="Only the first N requests this rule matches.")
    # replies
    content: str | None = None
    content_file: str | None = None
    json_value: Any = Field(default=None, alias="json")
    tool_calls: list[ToolCallSpec] | None = None
    agent: AgentStep | None = None
    refusal: str | None = Field(default=None, description="The assistant refuses: message.refusal, no content.")
    fault: Fault | None = None
    finish_reason: Literal["stop", "length", "content_filter"] | None = Field(
        default=None, description="Sent instead of the usual finish reason (content and json replies)."
    )
    delay_s: float = Field(default=0.0, ge=0, description="Sleep this long before answering.")
    usage: bool = Field(default=True, description="False: the answer carries no token counts, as some servers send it.")

    @model_validator(mode="before")
    @classmethod
    def _exactly_one_reply(cls, data: Any) -> Any:
        if isinstance(data, dict):
            given = [name for name in REPLY_FIELDS if name in data]
            if len(given) != 1:
                raise ValueError(f"a rule needs exactly one reply of {list(REPLY_FIELDS)}, got {given or 'none'}")
        return data

    @property
    def reply_kind(self) -> str:
        """Which reply field this rule uses (content_file is already loaded into content)."""
        if self.fault is not None:
            return "fault"
        if self.agent is not None:
            return "agent"
        if self.refusal is not None:
            return "refusal"
        if self.tool_calls is not None:
            return "tool_calls"
        if "json_value" in self.model_fields_set:
            return "json"
        return "content"


class Scenario(BaseModel):
    """A named list of rules; the first matching rule answers."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    rules: list[Rule] = Field(default_factory=list)
    tokenizer: bool | str = Field(
        default=True,
        description=(
            "Serve vLLM's /tokenize and /detokenize: true, over the stand-in tokens; a Hugging Face tokenizer's "
            "folder, with that tokenizer (needs transformers); false: 404, as OpenAI's API."
        ),
    )
    tokenizer_limit: int | None = Field(
        default=None,
        gt=0,
        description="/tokenize answers 400 for a text of more tokens, as a vLLM server does past its max_model_len.",
    )

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a scenario JSON file; ``content_file`` paths are read relative to it."""
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ScenarioError(f"scenario file not found: {path}") from None
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{path}: not valid JSON ({exc})") from None
        try:
            scenario = cls.model_validate(raw)
        except ValidationError as exc:
            # One line naming the fields (this server imports nothing of the agent's, so not core's helper).
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'scenario'}: {e['msg']}" for e in exc.errors()[:3])
            raise ScenarioError(f"{path}: invalid scenario: {problems}") from None
        except ValueError as exc:
            raise ScenarioError(f"{path}: invalid scenario: {exc}") from None
        return scenario.with_files_loaded(path.parent)

    def with_delay(self, delay_s: float, *, model: str | None = None, schema: str | None = None) -> Scenario:
        """The scenario with the rules of ``model`` (and ``schema``), or every rule, answering after
        ``delay_s``: a model that takes time, so a test or benchmark can act while a call is under way."""
        rules = [
            rule.model_copy(update={"delay_s": delay_s})
            if (model is None or rule.model == model) and (schema is None or rule.schema_name == schema)
            else rule
            for rule in self.rules
        ]
        return self.model_copy(update={"rules": rules})

    def with_files_loaded(self, base_dir: Path) -> Scenario:
        """Replace each ``content_file`` by its text, so answering never touches the disk; a tokenizer
        folder is read relative to ``base_dir`` too."""
        rules: list[Rule] = []
        for index, rule in enumerate(self.rules):
            if rule.content_file is None:
                rules.append(rule)
                continue
            file_path = base_dir / rule.content_file
            try:
                text = file_path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ScenarioError(f"rule {index}: content_file {file_path} cannot be read ({exc})") from None
            rules.append(rule.model_copy(update={"content": text, "content_file": None}))
        tokenizer = str(base_dir / self.tokenizer) if isinstance(self.tokenizer, str) else self.tokenizer
        return self.model_copy(update={"rules": rules, "tokenizer": tokenizer})


class RequestRecord(BaseModel):
    """One answered chat-completions request, for tests to inspect."""

    model: str
    turn: int | None
    agent_step: bool = Field(description="The request came from a browser-use agent step.")
    rule_index: int | None = Field(description="Index of the rule that answered; None when none matched.")
    status: int = Field(description="HTTP status sent; 0 when the connection was dropped mid-answer.")
    last_user_text: str = Field(default="", description="The text of the request's last user message.")
    images: int = Field(default=0, description="Images in the request's messages.")
    image_digests: list[str] = Field(
        default_factory=list, description="A short digest of each image's URL, in order: which screenshots it carried."
    )
    prompt_tokens: int = Field(default=0, description="The usage the answer reported (0 when none was sent).")
    completion_tokens: int = Field(default=0, description="The usage the answer reported (0 when none was sent).")


# ---- wire format (OpenAI chat.completion) ----


class FunctionCall(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None = None
    refusal: None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "tool_calls", "length", "content_filter"]
    logprobs: ChoiceLogprobs | None = None
    token_ids: list[int] | None = None  # vLLM's ``return_token_ids``: one id per sampled token


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage | None  # None: no token counts (a rule's ``usage: false``)
    system_fingerprint: str = "scripted"
    prompt_token_ids: list[int] | None = None  # vLLM's ``return_token_ids``: the prompt's ids


class ErrorDetail(BaseModel):
    message: str
    type: str
    code: str
    param: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail
