"""Lists that must agree with another: each test fails as soon as one side changes without the other."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Required, get_origin, get_type_hints

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, Event, NodeUpdate, Step, StepUpdate
from webgen_agent.graph.api import HOST_SETTINGS, RUN_SETTINGS
from webgen_agent.graph.builder import NODES

ROOT = Path(__file__).resolve().parent.parent
INDEPENDENCE = "Each node decides on its own: node modules do not import each other"


def test_a_step_update_has_every_field_of_a_step_with_its_type():
    assert get_type_hints(StepUpdate) == get_type_hints(Step)
    # A node sends the step's index and only what it learned.
    required = {k for k, v in get_type_hints(StepUpdate, include_extras=True).items() if get_origin(v) is Required}
    assert required == {"index"}


def test_a_node_update_has_every_field_of_the_state_with_its_type():
    state = get_type_hints(AgentState)  # reducers and other annotations left out, at every depth
    update = get_type_hints(NodeUpdate)
    assert set(update) == set(state)
    # The merged fields take partial step records and new events (their reducers' inputs).
    assert update.pop("steps") == Sequence[Step | StepUpdate] and state.pop("steps") == list[Step]
    assert update.pop("events") == state.pop("events") == list[Event]
    assert update == state


def test_run_settings_are_every_context_field_but_the_hosts():
    assert HOST_SETTINGS <= set(AgentContext.model_fields), "a host setting names no AgentContext field"
    assert set(RUN_SETTINGS) | HOST_SETTINGS == set(AgentContext.model_fields)
    assert {"profile", "loop", "max_steps", "review"} <= set(RUN_SETTINGS)
    assert not {"coder", "sandbox", "chromium"} & set(RUN_SETTINGS)  # endpoints (keys) and the machine's


def _contract_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (independence,) = [c for c in contracts if c["name"] == INDEPENDENCE]
    return set(independence["modules"])


def _defines_a_node(path: Path) -> bool:
    """The module has a node's function: ``async def name(state, runtime)`` at its top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(function, ast.AsyncFunctionDef)
        and [a.arg for a in function.args.args] == ["state", "runtime"]
        and not function.args.kwonlyargs
        for function in tree.body
    )


def test_every_node_module_is_in_the_independence_contract():
    graph_nodes = {node.__module__ for node in NODES}
    defining = {f"webgen_agent.nodes.{path.stem}" for path in (ROOT / "nodes").glob("*.py") if _defines_a_node(path)}
    assert graph_nodes <= defining  # the scan sees the decorator
    assert _contract_modules() == graph_nodes | defining, "add the node module to the contract in pyproject.toml"
