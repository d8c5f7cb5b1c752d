"""Code-Critic (WebLoop): an execution-free critique of the latest code against each requirement.

It reads the instruction, its requirement list and the project's files, never the running page
(no screenshot, grade or test result), and answers with a verdict per requirement (met / partly /
unmet, with evidence), a diagnosis and an ordered repair plan. With ``shared_policy`` the coder
model answers (one policy in every role, as the paper trains it), else the feedback model.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.requirements import requirement_items
from webgen_agent.core.context import AgentContext, Role
from webgen_agent.core.state import AgentState, RequirementCheck, StepUpdate
from webgen_agent.core.views import CodeCritique
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, current_step, edit_step, node, sampled_turn, store, usage_record
from webgen_agent.tools.models import ask_structured

MAX_CODE_CHARS = 40_000
_SKIPPED = ("package-lock.json", ".webgen-manifest")


def project_text(files: str | None) -> str:
    """The project's text files as ``=== path ===`` sections, capped (binary and lock files left out)."""
    if not files:
        return "(no files yet)"
    blobs = store()
    manifest = blobs.manifest(files)
    sections: list[str] = []
    used = 0
    for path in sorted(manifest):
        if path.endswith(_SKIPPED):
            continue
        try:
            text = blobs.get(manifest[path]).decode("utf-8")
        except UnicodeDecodeError:
            continue
        section = f"=== {path} ===\n{text}"
        if used + len(section) > MAX_CODE_CHARS:
            sections.append(f"=== {path} === (left out: the code shown is capped at {MAX_CODE_CHARS} characters)")
            continue
        sections.append(section)
        used += len(section)
    return "\n\n".join(sections) or "(no text files)"


def format_code_critique(critique: CodeCritique, requirements: list[RequirementCheck]) -> str:
    lines = []
    for verdict in sorted(critique.verdicts, key=lambda v: v.id):
        task = requirements[verdict.id]["task"] if 0 <= verdict.id < len(requirements) else f"requirement {verdict.id}"
        lines.append(f"- [{verdict.status}] {task}: {verdict.evidence}")
    plan = "\n".join(f"{n}. {item}" for n, item in enumerate(critique.plan, 1))
    return "Requirement review:\n" + "\n".join(lines) + f"\n\nDiagnosis: {critique.diagnosis}\n\nRepair plan:\n{plan}"


@node
async def code_critic(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    context = runtime.context
    step = current_step(state)
    target = edit_step(state) or step
    blobs = store()
    given = state.get("requirements")
    requirements = await asyncio.to_thread(requirement_items, given, blobs) if given else []
    code = await asyncio.to_thread(project_text, state.get("files"))
    messages = [{"role": "user", "content": prompts.code_critic_user(state["requirement"], requirements, code)}]
    role: Role = "coder" if context.shared_policy else "feedback"
    settings = context.coder if context.shared_policy else context.feedback
    answer = await ask_structured(settings, role, messages, CodeCritique)
    # The messages that produced the answer (a retry's included), its text and logprobs as sampled:
    # the Critic's turn as training data (what an importance ratio needs).
    turn = await sampled_turn(answer, messages)
    patch: StepUpdate = {
        "index": step["index"],
        "critic_target": target["index"],
        "critic_prompt": turn["prompt"],
        "critic_model": role,
        "tokens": {"code_critic": usage_record(answer.usage)},
    }
    if answer.value is not None:
        patch["critique"] = await blobs.aput_json(answer.value.model_dump())
        patch["critic_completion"] = turn["completion"]
        if turn["logprobs"] is not None:
            patch["critic_logprobs"] = turn["logprobs"]
        review = format_code_critique(answer.value, requirements)
    else:
        review = f"(The code review failed: {answer.error}.) Check the code against every requirement yourself."
    notes = step.get("problems") or []
    feedback = await blobs.aput_text(prompts.refine_user(state["requirement"], review, notes))
    patch["feedback"] = feedback
    return NodeResult(
        {"feedback": feedback, "steps": [patch]}, "critique" if answer.value is not None else "no critique"
    )
