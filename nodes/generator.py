"""Generator: the first coder turn, from the requirement alone."""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.graph.context import AgentContext
from webgen_agent.graph.state import AgentState
from webgen_agent.nodes import prompts
from webgen_agent.nodes.coding import chat_ref, coder_turn
from webgen_agent.nodes.common import Update, node


@node("generator")
async def generator(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    conversation = [
        chat_ref("system", prompts.CODER_SYSTEM),
        chat_ref("user", prompts.generator_user(state["requirement"])),
    ]
    update = await coder_turn(state, runtime, node_name="generator", conversation=conversation, parent=None)
    update.setdefault("consecutive_errors", state.get("consecutive_errors", 0))
    update["edit_step"] = None
    update["files"] = None
    return update
