"""Critic: turns the step's results into the message the Refiner sees.

``template`` formats the results deterministically: in the default profile this project's
results with grades, in the upstream profile WebGen-Agent's feedback (``upstream_feedback``, no
grades); ``llm`` asks the feedback model for a requirement-by-requirement diagnosis and repair plan
(WebLoop) and appends it.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.governor import governor_call
from webgen_agent.core.state import AgentState, StepUpdate
from webgen_agent.core.views import Critique
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, current_step, edit_step, node, sampled_turn, store, usage_record
from webgen_agent.nodes.feedback import results_text, step_feedback
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.tools.models import ask_structured


@node
async def critic(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    step = current_step(state)
    tested = edit_step(state) if step["action"] == "screenshot_validated" else None
    patch: StepUpdate = {"index": step["index"]}
    critique: Critique | None = None
    if runtime.context.critic == "llm" and step["action"] != "malformed":
        results, _ = results_text(step, tested)
        messages = [{"role": "user", "content": prompts.critic_llm_user(state["requirement"], results)}]
        answer = await ask_structured(runtime.context.feedback, "feedback", messages, Critique)
        patch["tokens"] = {"critic": usage_record(answer.usage)}
        if answer.value is not None:
            critique = answer.value
            patch["critique"] = await store().aput_json(critique.model_dump())
            # Exported with the critique as training data: the messages, the text and its logprobs as sampled.
            turn = await sampled_turn(answer, messages)
            patch["critic_prompt"], patch["critic_completion"] = turn["prompt"], turn["completion"]
            if turn["logprobs"] is not None:
                patch["critic_logprobs"] = turn["logprobs"]
    say = context_prompts(runtime.context).feedback
    text = await step_feedback(state, step, tested, runtime.context.rules, say, critique, runtime.context.coder)
    focus = "Follow the repair plan." if critique is not None else results_text(step, tested)[1]
    feedback = await store().aput_text(text)
    patch["feedback"] = feedback
    # Decided here, once: the router sends the run back on it and the backtrack node records its reason.
    governor = governor_call(state, runtime.context)
    return NodeResult({"feedback": feedback, "steps": [patch], "governor": governor}, focus)
