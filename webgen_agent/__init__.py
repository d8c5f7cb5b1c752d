"""webgen-agent: a website-generation code agent built as a LangGraph workflow.

The implementation lives in layered sub-packages (docs/architecture.md): ``webgen_agent.core``
(state, settings, shared types), ``webgen_agent.tools`` (what acts on the world),
``webgen_agent.checkpoints`` (what is remembered), ``webgen_agent.nodes`` (the decisions),
``webgen_agent.graph`` (the wiring) and ``webgen_agent.apps`` (CLI, rollout, benchmark, report). The public embedding API is re-exported here
(see docs/embedding.md):

- ``run_requirement(requirement, context=..., ...) -> RunResult``: one run, start to finish;
  ``on_progress`` receives the ``ProgressEvent`` dicts as nodes start and end.
- ``build_graph()`` / ``compile_graph(checkpointer=None)``: the workflow itself, to run directly or
  to add as a node (subgraph) of a host graph; ``InputState`` in, ``OutputState`` out,
  ``AgentContext`` (three ``ModelSettings`` roles, limits, critic mode) as its context.
- ``Resources`` / ``use_resources`` and ``open_checkpointer``: what a host binds around graph runs.
- ``scripted_models(scenario)``: the offline scripted model server and a context naming its models
  (examples and tests run without an endpoint).
- ``ReviewRequest`` / ``ReviewDecision``: what a run with ``review`` points asks and the answer
  (``resume_run(..., answer=...)``; docs/review.md).

Names are imported on first use, so ``import webgen_agent`` stays cheap (no LangGraph, browser or
model client imports until something needs them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentContext": "webgen_agent.core.context",
    "ModelSettings": "webgen_agent.core.context",
    "Settings": "webgen_agent.core.context",
    "AgentState": "webgen_agent.core.state",
    "InputState": "webgen_agent.core.state",
    "OutputState": "webgen_agent.core.state",
    "ProgressEvent": "webgen_agent.core.events",
    "ReviewDecision": "webgen_agent.core.views",
    "ReviewRequest": "webgen_agent.core.views",
    "Step": "webgen_agent.core.state",
    "build_graph": "webgen_agent.graph.builder",
    "compile_graph": "webgen_agent.graph.builder",
    "RunResult": "webgen_agent.graph.api",
    "run_requirement": "webgen_agent.graph.api",
    "resume_run": "webgen_agent.graph.api",
    "Resources": "webgen_agent.nodes.resources",
    "use_resources": "webgen_agent.nodes.resources",
    "open_checkpointer": "webgen_agent.checkpoints.saver",
    "scripted_models": "webgen_agent.apps.demo",
}

__all__ = [
    "AgentContext",
    "AgentState",
    "InputState",
    "ModelSettings",
    "OutputState",
    "ProgressEvent",
    "Resources",
    "ReviewDecision",
    "ReviewRequest",
    "RunResult",
    "Settings",
    "Step",
    "__version__",
    "build_graph",
    "compile_graph",
    "open_checkpointer",
    "resume_run",
    "run_requirement",
    "scripted_models",
    "use_resources",
]

if TYPE_CHECKING:
    from webgen_agent.apps.demo import scripted_models
    from webgen_agent.checkpoints.saver import open_checkpointer
    from webgen_agent.core.context import AgentContext, ModelSettings, Settings
    from webgen_agent.core.events import ProgressEvent
    from webgen_agent.core.state import (
        AgentState,
        InputState,
        OutputState,
        Step,
    )
    from webgen_agent.core.views import ReviewDecision, ReviewRequest
    from webgen_agent.graph.api import RunResult, resume_run, run_requirement
    from webgen_agent.graph.builder import build_graph, compile_graph
    from webgen_agent.nodes.resources import Resources, use_resources


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'webgen_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
