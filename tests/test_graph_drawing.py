"""What Studio draws is what the docs say: docs/architecture.md's table of nodes and their next
nodes equals the compiled graph's nodes and edges, and the README names every node."""

from __future__ import annotations

import re
from pathlib import Path

from webgen_agent.graph.builder import compile_graph

REPO = Path(__file__).resolve().parents[1]
ENDS = {"START": "__start__", "END": "__end__"}


def _documented_edges() -> set[tuple[str, str]]:
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text[text.index("| node | goes to next |") :].split("\n\n", 1)[0]
    edges = set()
    for row in table.splitlines()[2:]:
        source, targets = (cell.strip() for cell in row.strip("|").split("|"))
        for target in targets.split(","):
            edges.add((ENDS.get(source, source.strip("` ")), ENDS.get(target.strip(), target.strip("` "))))
    return edges


def test_the_documented_table_is_the_compiled_graph() -> None:
    drawn = compile_graph().get_graph()
    assert {(edge.source, edge.target) for edge in drawn.edges} == _documented_edges()
    assert set(drawn.nodes) == {node for edge in _documented_edges() for node in edge}


def test_the_readme_names_every_node() -> None:
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r"`(\w+)`", readme))
    nodes = set(compile_graph().get_graph().nodes) - {"__start__", "__end__"}
    assert nodes <= named, nodes - named


def test_each_node_goes_where_its_router_type_says() -> None:
    """The edges are the routers' ``Literal`` return types (mypy checks each router returns only
    those): no second list of destinations to drift from them."""
    import pytest

    from webgen_agent.graph.builder import ROUTES, destinations

    drawn = compile_graph().get_graph()
    for source, router in ROUTES.items():
        assert {edge.target for edge in drawn.edges if edge.source == source} == set(destinations(router)), source

    def untyped(state: object) -> str:
        return "finalize"

    with pytest.raises(TypeError, match="must return a Literal"):
        destinations(untyped)
