"""webgen-agent: a website-generation code agent built as a LangGraph workflow.

The implementation lives in the sub-packages ``webgen_agent.graph`` (wiring, state, settings, CLI),
``webgen_agent.nodes`` (the decisions), ``webgen_agent.tools`` (what acts on the world) and
``webgen_agent.checkpoints`` (what is remembered). The public embedding API is re-exported here.
"""

__version__ = "0.1.0"
