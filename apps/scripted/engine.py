"""Request facts, rule matching and reply building for the scripted model server (no HTTP here).

Everything here is a pure function of the request, except the ``times`` counters of ``RuleBook``:
the same request always gets the same answer, so a run killed and resumed against a fresh server
sees identical replies.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from webgen_agent.apps.scripted.agent_steps import (
    AgentPrompt,
    build_agent_output,
    find_output_schema,
    parse_agent_prompt,
)
from webgen_agent.apps.scripted.views import (
    AssistantMessage,
    ChatCompletion,
    Choice,
    ChoiceLogprobs,
    FunctionCall,
    Rule,
    Scenario,
    TokenLogprob,
    ToolCall,
    TopLogprob,
    Usage,
)

IMAGE_TOKENS = 765  # OpenAI bills a 1024x1024 high-detail image 85 + 4 x 170 tokens: a plausible fixed cost
CREATED = 1_700_000_000  # fixed so that identical requests get byte-identical answers
MALFORMED_CONTENT = '{"score": 4, "desc'
INVALID_BODY = "upstream proxy error: <html>502 Bad Gateway</html>"


@dataclass(frozen=True)
class RequestFacts:
    """What the matchers look at, derived once from a chat-completions request body."""

    model: str
    turn: int
    agent: AgentPrompt | None
    all_text: str
    last_user_text: str
    system_texts: list[str]
    schema_name: str | None
    images: tuple[str, ...]  # a short digest of each image's URL, in order
    digest: str = field(repr=False)

    @property
    def image_count(self) -> int:
        return len(self.images)

    @property
    def prompt_tokens(self) -> int:
        return estimate_tokens(self.all_text) + IMAGE_TOKENS * self.image_count


def estimate_tokens(text: str) -> int:
    """About four characters a token, as OpenAI's rule of thumb says."""
    return math.ceil(len(text) / 4)


def message_text(message: dict[str, Any]) -> tuple[str, list[str]]:
    """The text of one message (text parts, tool-call names and arguments) and a short digest of each
    of its images (which screenshots a request carried, for tests to compare)."""
    content = message.get("content")
    texts: list[str] = []
    images: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "refusal":
                texts.append(str(part.get("refusal", "")))
            elif kind in ("image_url", "input_image"):
                url = part.get("image_url") if kind == "image_url" else part.get("image_url", part.get("url"))
                url = url.get("url") if isinstance(url, dict) else url
                images.append(hashlib.sha256(str(url).encode()).hexdigest()[:12])
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        texts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(texts), images


def request_facts(body: dict[str, Any]) -> RequestFacts:
    messages: list[dict[str, Any]] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    texts: list[str] = []
    user_texts: list[str] = []
    system_texts: list[str] = []
    images: list[str] = []
    for message in messages:
        text, digests = message_text(message)
        texts.append(text)
        images += digests
        if message.get("role") == "user":
            user_texts.append(text)
        elif message.get("role") in ("system", "developer"):
            system_texts.append(text)
    agent = parse_agent_prompt(user_texts)
    assistant_turns = sum(1 for m in messages if m.get("role") == "assistant")
    turn = agent.step if agent is not None and agent.step is not None else assistant_turns
    response_format = body.get("response_format") or {}
    schema_name = (response_format.get("json_schema") or {}).get("name") if isinstance(response_format, dict) else None
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return RequestFacts(
        model=str(body.get("model", "")),
        turn=turn,
        agent=agent,
        all_text="\n".join(texts),
        last_user_text=user_texts[-1] if user_texts else "",
        system_texts=system_texts,
        schema_name=schema_name,
        images=tuple(images),
        digest=hashlib.sha256(canonical.encode()).hexdigest(),
    )


def _all_in(needles: list[str], haystack: str) -> bool:
    return all(n in haystack for n in needles)


def _none_in(needles: list[str], haystack: str) -> bool:
    return not any(n in haystack for n in needles)


def rule_holds(rule: Rule, facts: RequestFacts) -> bool:
    """All stateless matchers of a rule hold for this request."""
    page = facts.agent.page_text if facts.agent is not None else ""
    return (
        (rule.model in (None, "*") or rule.model == facts.model)
        and (rule.turn is None or rule.turn == facts.turn)
        and (rule.schema_name is None or rule.schema_name == facts.schema_name)
        and _all_in(rule.contains, facts.all_text)
        and _none_in(rule.not_contains, facts.all_text)
        and _all_in(rule.last_contains, facts.last_user_text)
        and (not (rule.page_contains or rule.page_not_contains) or facts.agent is not None)
        and _all_in(rule.page_contains, page)
        and _none_in(rule.page_not_contains, page)
        and (rule.min_chars is None or len(facts.all_text) >= rule.min_chars)
    )


class RuleBook:
    """First matching rule wins; ``times`` counters are the only state."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._used = [0] * len(scenario.rules)
        self._lock = threading.Lock()

    def select(self, facts: RequestFacts) -> int | None:
        with self._lock:
            for index, rule in enumerate(self.scenario.rules):
                if not rule_holds(rule, facts):
                    continue
                if rule.times is not None:
                    if self._used[index] >= rule.times:
                        continue
                    self._used[index] += 1
                return index
        return None


# ---- replies ----


@dataclass(frozen=True)
class Reply:
    """The assistant's answer before it is wrapped into a completion or a stream."""

    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, JSON arguments)
    refusal: str | None = None
    finish_reason: str | None = None  # None: "tool_calls" or "stop"
    counted: bool = True  # False: sent without token counts

    @property
    def text_for_usage(self) -> str:
        return (self.content or "") + "".join(name + args for name, args in self.tool_calls)


def forced_function(body: dict[str, Any]) -> str | None:
    """The function the request forces the model to call, if any."""
    choice = body.get("tool_choice")
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if isinstance(choice, dict):
        return (choice.get("function") or {}).get("name")
    if choice in ("required", "any") and len(tools) == 1:
        return (tools[0].get("function") or {}).get("name")
    return None


def build_reply(rule: Rule, facts: RequestFacts, body: dict[str, Any]) -> Reply:
    """The reply of a non-fault rule; raises AgentStepError for an agent step it cannot resolve."""
    reply = replace(_reply(rule, facts, body), counted=rule.usage)
    return replace(reply, finish_reason=rule.finish_reason) if rule.finish_reason else reply


def _reply(rule: Rule, facts: RequestFacts, body: dict[str, Any]) -> Reply:
    kind = rule.reply_kind
    if kind == "refusal":
        return Reply(refusal=rule.refusal)
    if kind == "content":
        return Reply(content=rule.content or "")
    if kind == "json":
        text = json.dumps(rule.json_value)
        function = forced_function(body)
        # A schema asked for through a forced tool (langchain's function_calling method) gets the
        # same JSON as arguments, so one scenario serves every structured-output method.
        return Reply(tool_calls=[(function, text)]) if function else Reply(content=text)
    if kind == "tool_calls":
        return Reply(tool_calls=[(c.name, json.dumps(c.arguments)) for c in rule.tool_calls or []])
    assert rule.agent is not None
    schema = find_output_schema(body, facts.system_texts)
    output = build_agent_output(rule.agent, facts.agent or AgentPrompt(), schema)
    text = json.dumps(output)
    if schema.carrier == "tool":
        return Reply(tool_calls=[(schema.tool_name or "AgentOutput", text)])
    return Reply(content=text)


_WORDS = re.compile(r"\s*\S+")


def whitespace_tokens(text: str) -> list[str]:
    """Words with their leading whitespace; joined they give the text back exactly."""
    tokens = _WORDS.findall(text)
    rest = text[sum(len(t) for t in tokens) :]
    if rest:
        if tokens:
            tokens[-1] += rest
        else:
            tokens.append(rest)
    return tokens


def token_logprobs(text: str, top: int) -> list[TokenLogprob]:
    entries: list[TokenLogprob] = []
    for token in whitespace_tokens(text):
        raw = list(token.encode())
        alternatives = [TopLogprob(token=token, logprob=0.0, bytes=raw)] if top > 0 else []
        entries.append(TokenLogprob(token=token, logprob=0.0, bytes=raw, top_logprobs=alternatives))
    return entries


STAND_IN_VOCAB = 131_072


def stand_in_token_ids(text: str) -> list[int]:
    """Ids for vLLM's ``return_token_ids``, one per whitespace token (as the logprobs entries): crc32 of
    the token mod STAND_IN_VOCAB. They belong to no real tokenizer; they carry the plumbing only."""
    return [zlib.crc32(token.encode()) % STAND_IN_VOCAB for token in whitespace_tokens(text)]


class StandInTokenizer:
    """vLLM's /tokenize and /detokenize over the stand-in tokens (``whitespace_tokens``): each distinct
    token gets the next id of a vocabulary that grows with the server's life, so the ids decode back
    to the texts exactly. They belong to no real tokenizer (nor match ``stand_in_token_ids``)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._strings: list[str] = []
        self._lock = threading.Lock()

    def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        with self._lock:  # no special tokens to add: the stand-in has none
            for token in (tokens := whitespace_tokens(text)):
                if token not in self._ids:
                    self._ids[token] = len(self._strings)
                    self._strings.append(token)
            return [self._ids[token] for token in tokens]

    def detokenize(self, ids: list[int]) -> str | None:
        """The text, or None when an id was never handed out."""
        with self._lock:
            if not all(0 <= i < len(self._strings) for i in ids):
                return None
            return "".join(self._strings[i] for i in ids)


class FolderTokenizer:
    """A Hugging Face tokenizer's folder, answering /tokenize and /detokenize as vLLM does with its
    model's tokenizer (``encode`` with or without special tokens added, ``decode`` keeping them)."""

    def __init__(self, folder: str) -> None:
        from transformers import AutoTokenizer  # the train extra; only a scenario naming a folder needs it

        self._tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)

    def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(self._tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    def detokenize(self, ids: list[int]) -> str | None:
        if not all(0 <= i < len(self._tokenizer) for i in ids):
            return None
        return str(self._tokenizer.decode(ids))


def completion_id(facts: RequestFacts, rule_index: int) -> str:
    return f"chatcmpl-{facts.digest[:20]}{rule_index:04d}"


def _tool_call_id(facts: RequestFacts, position: int) -> str:
    return f"call_{facts.digest[20:36]}{position:02d}"


def usage_for(facts: RequestFacts, reply: Reply) -> Usage:
    prompt = facts.prompt_tokens
    completion = max(1, estimate_tokens(reply.text_for_usage))
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def build_completion(reply: Reply, facts: RequestFacts, body: dict[str, Any], rule_index: int) -> ChatCompletion:
    tool_calls = [
        ToolCall(id=_tool_call_id(facts, i), function=FunctionCall(name=name, arguments=args))
        for i, (name, args) in enumerate(reply.tool_calls)
    ]
    logprobs = None
    if body.get("logprobs"):
        logprobs = ChoiceLogprobs(content=token_logprobs(reply.content or "", int(body.get("top_logprobs") or 0)))
    message = AssistantMessage(content=reply.content, refusal=reply.refusal, tool_calls=tool_calls or None)
    finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
    with_ids = bool(body.get("return_token_ids"))
    choice = Choice(
        message=message,
        finish_reason=finish,  # type: ignore[arg-type]
        logprobs=logprobs,
        token_ids=stand_in_token_ids(reply.content or "") if with_ids else None,
    )
    return ChatCompletion(
        id=completion_id(facts, rule_index),
        created=CREATED,
        model=facts.model,
        choices=[choice],
        usage=usage_for(facts, reply) if reply.counted else None,
        prompt_token_ids=stand_in_token_ids(facts.all_text) if with_ids else None,
    )


def stream_events(completion: ChatCompletion, body: dict[str, Any]) -> list[str]:
    """The completion as server-sent events: role, content pieces, tool calls, finish, usage, [DONE]."""
    choice = completion.choices[0]
    base = {
        "id": completion.id,
        "object": "chat.completion.chunk",
        "created": completion.created,
        "model": completion.model,
        "system_fingerprint": completion.system_fingerprint,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> str:
        data = {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}],
        }
        return f"data: {json.dumps(data)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    content = choice.message.content or ""
    token_entries = choice.logprobs.content if choice.logprobs and choice.logprobs.content else None
    tokens = whitespace_tokens(content)
    for start in range(0, len(tokens), 8):
        piece = "".join(tokens[start : start + 8])
        logprobs = None
        if token_entries is not None:
            logprobs = {
                "content": [e.model_dump() for e in token_entries[start : start + 8]],
                "refusal": None,
            }
        events.append(chunk({"content": piece}, logprobs=logprobs))
    for position, call in enumerate(choice.message.tool_calls or []):
        header = {
            "index": position,
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [header]}))
        events.append(chunk({"tool_calls": [{"index": position, "function": {"arguments": call.function.arguments}}]}))
    events.append(chunk({}, finish=choice.finish_reason))
    if (body.get("stream_options") or {}).get("include_usage") and completion.usage is not None:
        events.append(f"data: {json.dumps({**base, 'choices': [], 'usage': completion.usage.model_dump()})}\n\n")
    events.append("data: [DONE]\n\n")
    return events
