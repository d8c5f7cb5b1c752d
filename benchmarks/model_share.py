"""Share of wall time that is the framework's own, when every model call takes 5 s.

A copy of the demo scenario with ``delay_s: 5`` on every rule (coder, judge, GUI-agent steps,
test instruction, verdicts). The scripted server times each request from inside (arrival to
answer); the model's share of a run is the union of those intervals (calls that overlap, such as
the test instruction written beside the first coder call, count once). Framework overhead = run
wall time - model time. Each run also prints where that time went: each node's wall time with no
model call in flight (from the nodes' start and end progress events), and what lies outside the nodes.
The dependency cache is filled before the timed runs (npm once, untimed); each run then starts its
own Chromium, dev server and GUI agents, as a CLI run would.

    .venv/bin/python -m benchmarks.model_share
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import REPEATS, Stopwatch, median, print_header, run_main, sized
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.site import SiteRunner

MODEL_DELAY_S = sized(5.0, 0.2)


class ModelClock:
    """Records when the scripted server was handling a chat request (benchmark instrumentation).

    From the request's arrival to its answer: the rule's ``delay_s`` plus the server's own work
    (reading the request, which for a GUI-agent step carries a screenshot, and building the reply).
    """

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []

    def install(self) -> None:
        original = scripted_server.ScriptedModel.chat_completions
        clock = self

        async def timed(model, request):
            started = time.monotonic()
            try:
                return await original(model, request)
            finally:
                clock.intervals.append((started, time.monotonic()))

        scripted_server.ScriptedModel.chat_completions = timed  # type: ignore[method-assign]

    def busy_seconds(self, start: float, end: float) -> tuple[float, int]:
        """Seconds in [start, end] with at least one model call waiting, and how many calls."""
        spans = sorted((max(a, start), min(b, end)) for a, b in self.intervals if b > start and a < end)
        total, reach = 0.0, start
        for a, b in spans:
            if b > reach:
                total += b - max(a, reach)
                reach = b
        return total, len(spans)


class NodeClock:
    """The nodes' start and end progress events, timed as they arrive (benchmark instrumentation)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self._open: dict[str, float] = {}

    def __call__(self, event: dict) -> None:
        now = time.monotonic()
        if event.get("phase") == "start":
            self._open[event["node"]] = now
        elif event.get("phase") == "end" and event.get("node") in self._open:
            self.spans.append((event["node"], self._open.pop(event["node"]), now))

    def framework_by_node(self, model: ModelClock) -> dict[str, float]:
        """Seconds of each node's wall time with no model call in flight, summed over its runs."""
        found: dict[str, float] = {}
        for node, start, end in self.spans:
            found[node] = found.get(node, 0.0) + (end - start) - model.busy_seconds(start, end)[0]
        return dict(sorted(found.items(), key=lambda item: -item[1]))


def slow_demo(delay_s: float = MODEL_DELAY_S) -> Scenario:
    """The demo scenario with every model answer delayed by ``delay_s``."""
    return Scenario.load(scenario_path("demo")).with_delay(delay_s)


async def warm_cache(base: Path, cache: Path) -> None:
    """Install the demo app's dependencies into ``cache`` (untimed)."""
    first_reply = next(r.content for r in Scenario.load(scenario_path("demo")).rules if r.turn == 0 and r.content)
    workspace = base / "warm"
    for action in parse_reply(first_reply).files:
        (workspace / action.path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / action.path).write_text(action.content)
    result = await SiteRunner(workspace, log_dir=base / "warm-logs", deps_cache_dir=cache).ensure_dependencies()
    if result.error:
        raise SystemExit(f"npm install of the demo app failed:\n{result.error}")


async def main() -> dict[str, float]:
    print_header(
        f"3. Framework share of wall time with a {MODEL_DELAY_S:g} s model (demo scenario, every call delayed)"
    )
    clock = ModelClock()
    clock.install()
    walls: list[float] = []
    models: list[float] = []
    calls: list[int] = []
    with tempfile.TemporaryDirectory(prefix="webgen-bench-model-") as scratch:
        base = Path(scratch)
        cache = base / "deps-cache"
        await warm_cache(base, cache)
        with ScriptedServer(slow_demo()) as server:
            for rep in range(REPEATS):
                db = base / f"run{rep}" / "webgen.db"
                context = scripted_context(server.base_url, max_steps=8)
                nodes = NodeClock()
                async with use_resources(Resources(db, deps_cache_dir=cache)):
                    with Stopwatch() as watch:
                        result = await run_requirement(
                            DEMO_REQUIREMENT,
                            context=context,
                            run_id=f"slow-{rep}",
                            out_dir=base / f"run{rep}" / "out",
                            db_path=db,
                            on_progress=nodes,
                        )
                if result.status != "finished":
                    raise SystemExit(f"the demo run ended {result.status}")
                busy, count = clock.busy_seconds(watch.started, watch.started + watch.seconds)
                walls.append(watch.seconds)
                models.append(busy)
                calls.append(count)
                print(
                    f"  run {rep + 1}/{REPEATS}: {watch.seconds:.1f} s wall, {count} model calls, model busy {busy:.1f} s, "
                    f"framework {watch.seconds - busy:.1f} s ({(watch.seconds - busy) / watch.seconds:.1%})",
                    flush=True,
                )
                by_node = nodes.framework_by_node(clock)
                outside = watch.seconds - busy - sum(by_node.values())
                print(
                    "    framework by node: "
                    + ", ".join(f"{node} {seconds:.2f} s" for node, seconds in by_node.items() if seconds >= 0.05)
                    + f", outside the nodes {outside:.2f} s",
                    flush=True,
                )
    shares = [(w - m) / w for w, m in zip(walls, models)]
    figures = {
        "wall_s": median(walls),
        "model_s": median(models),
        "overhead_s": median(w - m for w, m in zip(walls, models)),
        "share": median(shares),
        "calls": median(calls),
    }
    print(
        f"  framework overhead {figures['overhead_s']:.1f} s of {figures['wall_s']:.1f} s wall "
        f"({figures['calls']:.0f} calls x {MODEL_DELAY_S:g} s, {figures['model_s']:.1f} s with a call in flight): "
        f"share {figures['share']:.1%} (target <= 5%) [median of {REPEATS}]"
    )
    return figures


if __name__ == "__main__":
    run_main(main)
