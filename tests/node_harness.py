"""Run one node on a hand-built state and context, without the graph.

Real parts all the way down but the models: the node's own code (its ``node`` decorator included),
a blob store on a fresh SQLite file, the workspace on disk, and the scripted model server answering
over HTTP. Fast tests get no browser: a node that would launch Chromium fails at once saying so
(``NO_BROWSER``); tests marked e2e pass the session's Chromium (``shared_browser``).

    async def test_x(node_harness):
        state = node_harness.state(steps=[...])
        run = await node_harness.run(critic, state, rules=[{"model": "scripted-feedback", ...}])
        assert run.update["feedback"]
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime

from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import RequestRecord, Scenario
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, NodeUpdate, Step, append_events, merge_steps
from webgen_agent.nodes.resources import Resources, bind_resources
from webgen_agent.tools.browser import SharedBrowser

# Fast tests run no Chromium: a launch (the Generator's warm-up, a capture) fails at once.
NO_BROWSER = "/nonexistent/no-chromium-in-fast-node-tests"
RUN_ID = "node-test"
REQUIREMENT = "A page that lists the user's notes, with a button that adds one."

GraphNode = Callable[[AgentState, Runtime[AgentContext]], Awaitable[NodeUpdate]]


@dataclass
class NodeRun:
    """What one node run returned and showed, and what the models were asked."""

    update: NodeUpdate
    progress: list[dict[str, Any]]  # the node's progress events (start, waits, end)
    requests: list[RequestRecord]
    before: AgentState = field(repr=False)

    @property
    def message(self) -> str:
        """The line the node's end event shows."""
        return next(e for e in reversed(self.progress) if e["phase"] == "end").get("message", "")

    @property
    def state(self) -> AgentState:
        """The state after the update, merged as the graph merges it."""
        after: dict[str, Any] = {**self.before, **self.update}
        after["steps"] = merge_steps(self.before.get("steps"), list(self.update.get("steps") or []) or None)
        after["events"] = append_events(self.before.get("events"), self.update.get("events"))
        return after  # type: ignore[return-value]


class NodeHarness:
    """One test's run folder, store and resources (bound while a node runs)."""

    def __init__(self, root: Path, resources: Resources, *, has_browser: bool) -> None:
        self.root = root
        self.resources = resources
        self.has_browser = has_browser

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, root: Path, browser: SharedBrowser | None = None) -> AsyncIterator[NodeHarness]:
        resources = Resources(root / "webgen.db", deps_cache_dir=root / "deps-cache", browser=browser)
        try:
            yield cls(root, resources, has_browser=browser is not None)
        finally:
            await resources.close()  # stops the dev servers the node started; a given browser stays

    @property
    def store(self) -> BlobStore:
        return self.resources.store

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def workspace(self) -> Path:
        return self.out_dir / "workspace"

    def state(self, **fields: Any) -> AgentState:
        """A run's state with its identity filled in; ``fields`` add to or replace it."""
        base: dict[str, Any] = {
            "requirement": REQUIREMENT,
            "run_id": RUN_ID,
            "out_dir": str(self.out_dir),
            "steps": [],
            "events": [],
        }
        return {**base, **fields}  # type: ignore[return-value]

    def step(self, index: int, **fields: Any) -> Step:
        """A whole step record (a sound code edit unless ``fields`` say otherwise)."""
        record: dict[str, Any] = {
            "index": index,
            "role": "generator" if index == 0 else "refiner",
            "action": "edit",
            "parent": None if index == 0 else index - 1,
            "tests_step": None,
            "prompt_len": 2,
            "prompt": self.store.put_json([]),
            "completion": self.store.put_text(""),
            "summary": f"step {index}",
            "format_ok": True,
            "problems": [],
            "screenshot_score": 0,
            "gui_score": 0,
            "gui_passed": None,
            "errored": False,
            "timings": {},
            "tokens": {},
            "model": "scripted-coder",
        }
        return {**record, **fields}  # type: ignore[return-value]

    def context(self, base_url: str, *, logprobs: tuple[str, ...] = (), **overrides: Any) -> AgentContext:
        """The scripted server's three models, those named in ``logprobs`` asked for token logprobs;
        no Chromium unless a test gave the harness one."""
        chromium = {} if self.has_browser else {"chromium": NO_BROWSER}
        context = scripted_context(base_url, **{**chromium, **overrides})
        asked = {role: getattr(context, role).model_copy(update={"logprobs": True}) for role in logprobs}
        return context.model_copy(update=asked)

    async def run(
        self,
        node: GraphNode,
        state: AgentState,
        *,
        rules: list[dict[str, Any]] | None = None,
        **context: Any,
    ) -> NodeRun:
        """Run ``node`` once on ``state``, its models answered by ``rules`` (scripted-server rules)."""
        scenario = Scenario.model_validate({"name": "node-test", "rules": rules or []})
        progress: list[dict[str, Any]] = []
        with ScriptedServer(scenario) as server, bind_resources(self.resources):
            runtime = Runtime(
                context=self.context(server.base_url, **context),
                stream_writer=lambda chunk: progress.append(chunk["webgen"]),
            )
            # A node may read the run's config (the thread id) as it does inside the graph.
            token = var_child_runnable_config.set({"configurable": {"thread_id": state.get("run_id", RUN_ID)}})
            try:
                update = await node(state, runtime)
            finally:
                var_child_runnable_config.reset(token)
            requests = server.requests
        return NodeRun(update=update, progress=progress, requests=requests, before=state)
