"""Budget: where a run whose USD or token budget is spent waits, between two coder steps.

The routers send a run here instead of into its next coder turn once ``budget_usd`` or
``budget_tokens`` is spent, and the graph is compiled to pause *before* this node (a LangGraph
interrupt: the checkpoint is saved, nothing is half done). Resuming the thread (``webgen-agent
resume RUN_ID --budget-usd MORE``, or Studio after editing the context) runs it; it changes nothing,
and its router continues with the held-back coder step, or pauses here again while the resumed
run's budget is still spent (docs/costs.md).
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState
from webgen_agent.nodes.common import Update


async def budget(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    return {}
