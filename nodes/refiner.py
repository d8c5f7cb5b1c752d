"""Refiner: the next coder turn, answering the Critic's feedback (as a reviewer left it, with ``critique``)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, ChatRef, Event, conversation_of
from webgen_agent.nodes.coding import coder_turn
from webgen_agent.nodes.common import NodeResult, node
from webgen_agent.nodes.review import review_feedback, review_on


@node
async def refiner(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    feedback_hash = state.get("feedback")
    if not feedback_hash:
        raise RuntimeError("refiner reached without feedback from the critic or a backtrack")
    events: list[Event] = []
    if review_on(runtime.context, "critique"):  # first thing: a resumed Refiner asks no model twice
        feedback_hash, events = await review_feedback(state, feedback_hash)
    conversation = [*conversation_of(state), ChatRef(role="user", hash=feedback_hash)]
    turn = await coder_turn(
        state, runtime, node_name="refiner", conversation=conversation, parent=state.get("edit_step")
    )
    if events:
        turn.update["events"] = events
    return turn
