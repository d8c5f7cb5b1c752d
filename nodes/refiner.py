"""Refiner: the next coder turn, answering the Critic's feedback."""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, ChatRef
from webgen_agent.nodes.coding import coder_turn
from webgen_agent.nodes.common import Update, node


@node
async def refiner(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    feedback_hash = state.get("feedback")
    if not feedback_hash:
        raise RuntimeError("refiner reached without feedback from the critic or a backtrack")
    conversation = [*state["messages"], ChatRef(role="user", hash=feedback_hash)]
    return await coder_turn(
        state, runtime, node_name="refiner", conversation=conversation, parent=state.get("edit_step")
    )
