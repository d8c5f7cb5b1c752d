"""webgen-agent as one node of a bigger LangGraph application.

    planner -> website (the webgen-agent graph, as a subgraph) -> review

The planner turns a short brief into a website requirement, the agent builds and tests the site,
and the review step reads what the agent returned (status, chosen step, scores, site folder). The
agent's progress events reach this app through the parent graph's stream (``subgraphs=True``).

Offline, with the project's scripted model (a small static site, no npm)::

    python examples/embed_in_parent_graph.py "a neighbourhood coffee shop called Bean There" \
        --out /tmp/embed-demo --scripted

With real models, set OPENAI_BASE_URL / OPENAI_API_KEY and WEBGEN_MODEL (or the per-role
WEBGEN_CODER_MODEL, WEBGEN_VLM_MODEL, WEBGEN_FEEDBACK_MODEL) and leave out ``--scripted``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer
from typing_extensions import TypedDict

from webgen_agent import (
    AgentContext,
    Resources,
    Settings,
    Step,
    compile_graph,
    open_checkpointer,
    scripted_models,
    use_resources,
)


class PipelineState(TypedDict, total=False):
    brief: str  # what the host app was asked for
    # Shared with the agent: it reads ``requirement`` and ``out_dir`` (its InputState) and writes
    # ``run_id``, ``status``, ``chosen_step``, ``site_dir`` and ``steps`` (its OutputState).
    requirement: str
    out_dir: str
    run_id: str
    status: str
    chosen_step: int | None
    site_dir: str | None
    steps: list[Step]
    review: str  # written by the last node


def planner(state: PipelineState) -> dict[str, Any]:
    """Stands in for an LLM planner: writes the requirement the agent works from."""
    return {
        "requirement": (
            f"Build a one-page website for {state['brief']}. Show the menu with prices and the address, "
            "and add a button that reveals the opening hours. Warm, friendly look."
        )
    }


def review(state: PipelineState) -> dict[str, Any]:
    """Reads the agent's result: what was chosen and how it scored."""
    chosen = next((s for s in state.get("steps", []) if s["index"] == state.get("chosen_step")), None)
    if state.get("status") != "finished" or chosen is None:
        return {"review": f"no usable site (status {state.get('status')})"}
    return {
        "review": (
            f"site ready in {state['site_dir']}: step {chosen['index']} of {len(state['steps'])}, "
            f"screenshot {chosen.get('screenshot_score', 0)}/5, GUI {chosen.get('gui_score', 0)}/5"
        )
    }


def build_pipeline(checkpointer: Checkpointer = None):
    """The host graph; the agent runs as the ``website`` node (it inherits the checkpointer)."""
    builder = StateGraph(PipelineState, context_schema=AgentContext)
    builder.add_node("planner", planner)
    builder.add_node("website", compile_graph())
    builder.add_node("review", review)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "website")
    builder.add_edge("website", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


async def run_pipeline(
    brief: str,
    *,
    context: AgentContext,
    out_dir: Path,
    db_path: Path,
    on_event: Callable[[tuple[str, ...], dict[str, Any]], None] | None = None,
) -> PipelineState:
    """Run the host graph once; ``on_event(namespace, event)`` gets every progress event of the agent."""
    # The agent's nodes use a blob store, a Chromium and dev servers bound for the duration of the
    # run; the checkpointer makes the whole pipeline (agent included) resumable.
    # Opening the store and resolving paths touch the disk: done in a worker thread, off the event loop.
    resources = await asyncio.to_thread(Resources, db_path, chromium=context.chromium)
    folder = await asyncio.to_thread(out_dir.resolve)
    async with use_resources(resources), open_checkpointer(db_path) as saver:
        pipeline = build_pipeline(saver)
        config = {"configurable": {"thread_id": f"pipeline-{uuid.uuid4().hex[:8]}"}, "recursion_limit": 1000}
        async for namespace, mode, chunk in pipeline.astream(
            {"brief": brief, "out_dir": str(folder)},
            config,
            context=context,
            stream_mode=["custom", "updates"],
            subgraphs=True,
        ):
            if mode == "custom" and isinstance(chunk, dict) and "webgen" in chunk and on_event is not None:
                on_event(namespace, chunk["webgen"])
        return (await pipeline.aget_state(config)).values


@contextlib.contextmanager
def model_context(scripted: bool, runs_dir: Path) -> Iterator[AgentContext]:
    """Real endpoints from the environment, or the project's scripted model server (offline)."""
    if not scripted:
        yield Settings().to_context(runs_dir=str(runs_dir))
        return
    with scripted_models("landing", max_steps=6, runs_dir=str(runs_dir)) as context:
        yield context


def print_event(namespace: tuple[str, ...], event: dict[str, Any]) -> None:
    if event.get("phase") != "end":
        return
    scores = "".join(
        f" {label} {event[key]}/5"
        for key, label in (("screenshot_score", "screenshot"), ("gui_score", "GUI"))
        if event.get(key)
    )
    where = "/".join(part.split(":")[0] for part in namespace)
    print(
        f"[{where}] step {event.get('step')} {event['node']:<16} {event.get('seconds', 0):6.2f}s{scores}"
        f"  {event.get('message', '')[:70]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("brief", help="What the site is for, e.g. 'a neighbourhood coffee shop'.")
    parser.add_argument("--out", type=Path, required=True, help="Folder for the site, screenshots and database.")
    parser.add_argument("--scripted", action="store_true", help="Use the offline scripted model.")
    args = parser.parse_args(argv)
    with model_context(args.scripted, args.out / "runs") as context:
        final = asyncio.run(
            run_pipeline(
                args.brief,
                context=context,
                out_dir=args.out / "site-run",
                db_path=args.out / "webgen.db",
                on_event=print_event,
            )
        )
    print(f"requirement: {final['requirement']}")
    print(f"review: {final['review']}")
    return 0 if final.get("status") == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
