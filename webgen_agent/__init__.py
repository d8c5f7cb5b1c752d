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

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public names: this block is their one list. Type checkers read it as it stands; at run time
# it is not executed but read (below) into where each name is imported from on first use.
if TYPE_CHECKING:
    from webgen_agent.apps.demo import scripted_models as scripted_models
    from webgen_agent.checkpoints.saver import open_checkpointer as open_checkpointer
    from webgen_agent.core.context import AgentContext as AgentContext
    from webgen_agent.core.context import ModelSettings as ModelSettings
    from webgen_agent.core.context import Settings as Settings
    from webgen_agent.core.events import ProgressEvent as ProgressEvent
    from webgen_agent.core.state import AgentState as AgentState
    from webgen_agent.core.state import InputState as InputState
    from webgen_agent.core.state import OutputState as OutputState
    from webgen_agent.core.state import Step as Step
    from webgen_agent.core.views import ReviewDecision as ReviewDecision
    from webgen_agent.core.views import ReviewRequest as ReviewRequest
    from webgen_agent.graph.api import RunResult as RunResult
    from webgen_agent.graph.api import resume_run as resume_run
    from webgen_agent.graph.api import run_requirement as run_requirement
    from webgen_agent.graph.builder import build_graph as build_graph
    from webgen_agent.graph.builder import compile_graph as compile_graph
    from webgen_agent.nodes.resources import Resources as Resources
    from webgen_agent.nodes.resources import use_resources as use_resources


def _public_names() -> dict[str, str]:
    """Name -> module, from the ``if TYPE_CHECKING:`` block above (the standard library's ast: no
    import of the modules themselves, so ``import webgen_agent`` stays cheap)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: statement.module
        for statement in block.body
        if isinstance(statement, ast.ImportFrom) and statement.module
        for alias in statement.names
    }


_EXPORTS = _public_names()
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'webgen_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
