"""The graph that ``langgraph dev`` / LangGraph Studio load (see ``langgraph.json``).

Compiled without a checkpointer: the server brings its own (and refuses a graph that has one).
The context schema (``AgentContext``) is what Studio shows as the editable settings form: the three
model roles, the limits and the critic mode. Live resources (blob store, Chromium, dev servers) come
from the per-process default in ``nodes/resources.py``, configured by ``WEBGEN_DB`` and friends.
"""

from __future__ import annotations

from webgen_agent.graph.builder import compile_graph

graph = compile_graph()
