"""One coder turn, shared by the Generator and the Refiner: send the conversation, record the step."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.pregel import kept_task
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.core.error_count import count_after, verdict_of
from webgen_agent.core.profiles import ERRORED_SCORE
from webgen_agent.core.state import AgentState, ChatRef, Step
from webgen_agent.nodes.common import NodeResult, Update, store, usage_record
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.models import Completion, complete


async def load_messages(refs: list[ChatRef]) -> list[dict[str, str]]:
    blobs = store()
    texts = await asyncio.to_thread(lambda: [blobs.get_text(ref["hash"]) for ref in refs])
    return [{"role": ref["role"], "content": text} for ref, text in zip(refs, texts, strict=True)]


async def chat_ref(role: Literal["system", "user", "assistant"], text: str) -> ChatRef:
    return {"role": role, "hash": await store().aput_text(text)}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(text: str) -> tuple[str, int]:
    """The reply with unpaired surrogates (legal as JSON escapes, not encodable) replaced; and how many."""
    return _SURROGATE.subn("\ufffd", text)


async def coder_turn(
    state: AgentState,
    runtime: Runtime[AgentContext],
    *,
    node_name: Literal["generator", "refiner"],
    conversation: list[ChatRef],
    parent: int | None,
) -> NodeResult:
    """Ask the coder with ``conversation`` and record the reply as a new step.

    Inside a graph run the call is a kept task: its reply is in the checkpoint (a pending write)
    before the node goes on with it, so a node run again after its process died (a killed Ray actor,
    a resumed run) gets the reply back instead of asking the coder again.
    """
    sent, completion = await ask_coder(runtime.context, conversation, kept=in_graph_run(runtime))
    return await record_turn(
        state, runtime, node_name=node_name, conversation=sent, parent=parent, completion=completion
    )


def in_graph_run(runtime: Runtime[AgentContext]) -> bool:
    """Whether a LangGraph task can run here: inside a graph run's node, not a node called on its own
    (tests/node_harness.py), where LangGraph has no task runner to keep a result with. LangGraph gives
    each node it runs as a task its ``execution_info`` (the task's id and checkpoint); a node called by
    hand has none."""
    return runtime.execution_info is not None


@kept_task
async def coder_reply(settings: ModelSettings, messages: list[dict[str, str]]) -> dict[str, Any]:
    """One coder call whose answer the checkpoint keeps: a node run again (after an interrupt, a kill,
    its Ray actor's death) gets it back. The answer is stored before the task returns
    (``kept_task``), not by LangGraph's write in the background, which a kill can overtake."""
    return (await complete(settings, "coder", messages)).model_dump()


async def ask_coder(
    context: AgentContext, conversation: list[ChatRef], *, kept: bool = False
) -> tuple[list[ChatRef], Completion]:
    """(what the coder was really sent, its completion); ``kept``: a LangGraph task (inside a node only)."""
    messages = await load_messages(conversation)
    if kept:
        completion = Completion.model_validate(await coder_reply(context.coder, messages))
    else:
        completion = await complete(context.coder, "coder", messages)
    if completion.sent is not None:
        # The endpoint found the conversation too long and it was condensed (tools.condense): the
        # step records what the coder really saw, and the run goes on from there.
        conversation = [await chat_ref(m["role"], m["content"]) for m in completion.sent]
    return conversation, completion


async def record_turn(
    state: AgentState,
    runtime: Runtime[AgentContext],
    *,
    node_name: Literal["generator", "refiner"],
    conversation: list[ChatRef],
    parent: int | None,
    completion: Completion,
) -> NodeResult:
    """The coder's reply to ``conversation`` recorded as a new step (what a coder node returns)."""
    rules = runtime.context.rules.profile
    text, replaced = _valid_text(completion.text)
    parsed = parse_reply(text, runtime.context.rules.environment.replies)
    index = len(state.get("steps") or [])
    action = parsed.kind
    tests_step = None
    problems = list(parsed.problems)
    premature = False
    if replaced:
        problems.append(
            f"The reply held {replaced} invalid character(s) (unpaired UTF-16 surrogates: binary data, not text); "
            "they were replaced by U+FFFD. Write text files only."
        )
    if action in ("screenshot_validated", "finish"):
        # A control word refers to the latest code edit on this branch.
        tests_step = state.get("edit_step")
        premature = tests_step is None
        if premature and rules.premature_control_is_malformed:
            action = "malformed"
            problems.append(f"There is no website yet, so '{parsed.kind}' is premature: write the project first.")
    answer = await chat_ref("assistant", text)
    step: Step = {
        "index": index,
        "role": node_name,
        "action": action,
        "parent": parent,
        "tests_step": tests_step,
        "prompt_len": len(conversation),
        "prompt": await store().aput_json(conversation),
        "completion": answer["hash"],
        "summary": parsed.summary() if action == parsed.kind else action,
        "format_ok": parsed.format_ok and action != "malformed",
        "problems": problems,
        "screenshot_score": 0,
        "gui_score": 0,
        "gui_passed": None,
        # Upstream: a signal with no website to test is an errored step (its GUI test cannot run).
        "errored": action == "malformed" or (premature and action == "screenshot_validated"),
        "timings": {},
        "model": completion.model,
        "tokens": {node_name: usage_record(completion.usage)},
    }
    if rules.control_steps_carry_grades and tests_step is not None:
        # Upstream keeps the grades of the last edit (and its GUI test) on every later control step,
        # and a step whose screenshot grade is 2 or less is errored; the GUI test re-grades its own step.
        tested = state["steps"][tests_step]
        step["screenshot_score"] = tested["screenshot_score"]
        step["gui_score"] = tested["gui_score"]
        step["errored"] = action == "finish" and tested["screenshot_score"] <= ERRORED_SCORE
    if completion.logprobs is not None:
        step["logprobs"] = await store().aput_json(completion.logprobs)
    if completion.token_ids is not None or completion.prompt_token_ids is not None:
        step["token_ids"] = await store().aput_json(
            {"prompt": completion.prompt_token_ids, "completion": completion.token_ids}
        )
    update: Update = {
        "conversation": [*conversation, answer],
        "current": index,
        "steps": [step],
        "feedback": None,
        # An unerrored step is judged later (its run, its grade, its GUI test).
        "consecutive_errors": count_after(state, verdict_of(step["errored"], final=False)),
    }
    return NodeResult(update, f"step {index}: {step['summary']}")
