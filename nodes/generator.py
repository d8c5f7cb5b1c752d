"""Generator: the first coder turn, from the requirement alone.

The GUI test instruction depends only on the requirement, so the feedback model writes it while
the coder writes the first version, instead of later on the critical path of the first GUI test;
Chromium is launched and browser-use imported meanwhile too (after the model clients, so that the
two imports do not slow the first calls down).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from langgraph.config import get_config
from langgraph.runtime import Runtime

from webgen_agent.checkpoints.runs import new_run_id
from webgen_agent.core.context import AgentContext
from webgen_agent.core.costs import Usage
from webgen_agent.core.state import AgentState, ChatRef, Event
from webgen_agent.core.views import ReviewRequest
from webgen_agent.nodes import prompts
from webgen_agent.nodes.coding import ask_coder, chat_ref, coder_turn, in_graph_run, load_messages, record_turn
from webgen_agent.nodes.common import NodeResult, Update, metered_apart, node, node_cost, usage_record
from webgen_agent.nodes.gui_testing import early_test_instruction, warm_gui_agent
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.nodes.resources import get_resources
from webgen_agent.nodes.review import ask_review, review_event, review_on
from webgen_agent.nodes.start_from import imported_turn
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.models import import_model_clients
from webgen_agent.tools.scaffolds import load_scaffold


def run_id_of(state: AgentState) -> str:
    """The run's id: the state's, else the thread id (as for CLI runs), else a new one."""
    thread_id = str(get_config().get("configurable", {}).get("thread_id") or "")
    return state.get("run_id") or thread_id or new_run_id()


def run_identity(state: AgentState, context: AgentContext, run_id: str) -> Update:
    """``run_id`` and ``out_dir`` for a run started with only a requirement (LangGraph Studio, a parent graph).

    The folder defaults to ``runs_dir/RUN_ID``, made absolute: a relative ``runs_dir`` (the
    context's default) asks the file system for the working folder, so call this in a worker thread,
    never on the event loop (the LangGraph server fails a run that blocks its loop).
    """
    if state.get("run_id") and state.get("out_dir"):
        return {}
    out_dir = state.get("out_dir") or str((Path(context.runs_dir) / run_id).resolve())
    return {"run_id": run_id, "out_dir": out_dir}


def scaffold_start(context: AgentContext) -> tuple[str | None, str]:
    """The scaffold's snapshot (manifest hash) and the note that tells the coder about it; (None, "") without."""
    if not context.scaffold:
        return None, ""
    scaffold = load_scaffold(context.scaffold)
    files = get_resources().store.snapshot(scaffold.files_dir)
    shown = "\n\n".join(
        f"=== {path} ===\n{(scaffold.files_dir / path).read_text(encoding='utf-8')}"
        for path in sorted(get_resources().store.manifest(files))
    )
    note = prompts.scaffold_note(
        scaffold.name, scaffold.description, scaffold.guide, scaffold.fixed, scaffold.fillable, shown
    )
    return files, note


@node
async def generator(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    rules = runtime.context.rules.profile
    prompt_set = context_prompts(runtime.context)
    files, note = await asyncio.to_thread(scaffold_start, runtime.context)  # reads and stores the files
    request = prompt_set.first_user(state["requirement"])
    conversation = [
        await chat_ref("system", prompt_set.coder_system),
        await chat_ref("user", f"{request}\n\n{note}" if note else request),
    ]
    get_resources().warm_browser(runtime.context)  # ready by the first capture
    # The model clients first, then browser-use (seconds) while the first calls wait for their answers.
    await asyncio.to_thread(import_model_clients)
    warm_gui_agent()
    instruction = None
    reviewed = review_on(runtime.context, "plan") and not runtime.context.start_from  # no reply to review
    # The GUI test instruction serves WebGen-Agent's GUI tester only; a restart keeps the run's instruction.
    # Under plan review the GUI-Tester writes it when needed: this node runs again on resume.
    if runtime.context.rules.loop.gui_testing and not state.get("test_instruction") and not reviewed:
        # Its kept task is called before the coder's (this task runs at the node's next await, the
        # coder's call comes later), so both keep their places in the node's call order on a re-run.
        early = early_test_instruction(runtime.context, state["requirement"], kept=in_graph_run(runtime))
        instruction = asyncio.create_task(metered_apart(early))
    identity = await asyncio.to_thread(run_identity, state, runtime.context, run_id_of(state))
    try:
        if runtime.context.start_from:  # step 0 is the user's folder: no coder call
            turn = await imported_turn(state, runtime, conversation, identity.get("out_dir") or state["out_dir"])
        elif reviewed:
            turn = await reviewed_plan(state, runtime, conversation)
        else:
            turn = await coder_turn(state, runtime, node_name="generator", conversation=conversation, parent=None)
    except BaseException:
        if instruction is not None:
            instruction.cancel()
        raise
    written, meter = await instruction if instruction is not None else (None, None)
    update = turn.update
    if written is not None:
        update["test_instruction"] = written.text
        step = update["steps"][-1]
        step["tokens"] = {**step.get("tokens", {}), "test_instruction": usage_record(written.usage)}
        if written.sampled:
            step["sampled"] = {**step.get("sampled", {}), **written.sampled}
    if meter is not None and meter.by_role:  # what the instruction cost, failed or not
        step = update["steps"][-1]
        step["cost"] = {**step.get("cost", {}), "test_instruction": node_cost(meter, runtime.context)}
    update["edit_step"] = None
    update["files"] = files  # the scaffold the workspace starts from, or nothing
    update["profile"] = rules.name
    update.update(identity)
    return turn


async def reviewed_plan(state: AgentState, runtime: Runtime[AgentContext], conversation: list[ChatRef]) -> NodeResult:
    """plan: the first reply put to the reviewer before anything is written; asked again until approved.

    Every coder call is a kept task (``ask_coder(kept=True)``), so the node, run again from its
    start on each resume, gets its earlier replies back from the checkpoint instead of asking again.
    The step records the conversation that produced the reply finally used, and the tokens of all.
    """
    first = conversation
    events: list[Event] = []
    spent = Usage()
    while True:
        sent, completion = await ask_coder(runtime.context, conversation, kept=True)
        spent = spent + completion.usage
        index = len(state.get("steps") or [])
        parsed = parse_reply(completion.text, runtime.context.rules.environment.replies)
        decision = ask_review(
            ReviewRequest(
                point="plan",
                run_id=run_id_of(state),
                step=index,
                about_to="The generator's reply is about to be written to the workspace and run.",
                text=completion.text,
                files=[f.path for f in parsed.files],
                edit_means="text replaces the reply (used as if the coder wrote it); a note alone asks the "
                "coder to revise its reply following the note.",
                reject_means="the reply is dropped and the coder is asked again from the requirement, with the note.",
            )
        )
        events.append(review_event("plan", index, decision))
        if decision.action == "approve":
            break
        if decision.action == "edit" and decision.text is not None:
            completion = completion.model_copy(update={"text": decision.text})
            break
        if decision.action == "edit":
            answer = await chat_ref("assistant", completion.text)
            conversation = [*sent, answer, await chat_ref("user", prompts.PLAN_REVISE.format(note=decision.note))]
        else:
            request = await load_messages(first[-1:])
            conversation = [
                *first[:-1],
                await chat_ref("user", prompts.with_review_note(request[0]["content"], decision.note)),
            ]
    completion = completion.model_copy(update={"usage": spent})
    turn = await record_turn(
        state, runtime, node_name="generator", conversation=sent, parent=None, completion=completion
    )
    turn.update["events"] = events
    return turn
