"""Three threads on ``langgraph dev``: one job per worker (its default) against three
(``--n-jobs-per-worker 3``, the README's command).

Each thread is the demo scenario (real npm + Vite app, Chromium, two browser-use GUI tests) with
every model call answered after 1 s, a model with latency, where a run mostly waits. The three are
streamed at once with langgraph_sdk, as three Studio users would start them. Figures: wall time
from the three requests to the last thread finished, and the longest a thread waited for its first
node update (its time in the server's queue plus the generator's turn).

    .venv/bin/python -m benchmarks.server_threads
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from benchmarks.common import print_header, run_main, sized
from benchmarks.model_share import slow_demo, warm_cache
from tests.studio import langgraph_dev, wait_until_ready
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.core.context import find_chromium

THREADS = 3
MODEL_DELAY_S = sized(1.0, 0.2)


async def three_threads(jobs: int, base: Path, model_url: str) -> tuple[float, float, list[str]]:
    """(wall s, longest wait for a first update s, statuses) of three threads on a server with ``jobs``."""
    from langgraph_sdk import get_client

    chromium = await asyncio.to_thread(find_chromium)
    folder = base / f"jobs-{jobs}"
    await asyncio.to_thread(folder.mkdir)
    with langgraph_dev(folder, chromium, jobs=jobs) as server:
        await wait_until_ready(server)
        client = get_client(url=server.url)
        context = scripted_context(model_url, max_steps=8, runs_dir=str(server.runs_dir)).model_dump()
        threads = [(await client.threads.create())["thread_id"] for _ in range(THREADS)]
        started = time.monotonic()

        async def play(thread_id: str) -> float:
            first = 0.0
            stream = client.runs.stream(
                thread_id,
                "webgen_agent",
                input={"requirement": DEMO_REQUIREMENT},
                context=context,
                stream_mode=["updates"],
            )
            async for part in stream:
                if part.event == "updates" and not first:
                    first = time.monotonic() - started
            return first

        waits = await asyncio.gather(*(play(t) for t in threads))
        wall = time.monotonic() - started
        statuses = [_status((await client.threads.get_state(t))["values"]) for t in threads]
    return wall, max(waits), statuses


async def main() -> dict[str, float]:
    print_header(
        f"Server threads: {THREADS} demo runs at once on langgraph dev, model answering after {MODEL_DELAY_S:g} s"
    )
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="webgen-bench-server-") as scratch:
        base = Path(scratch)
        cache = base / "deps-cache"
        await warm_cache(base, cache)
        os.environ["WEBGEN_DEPS_CACHE"] = str(cache)  # the servers inherit it
        with ScriptedServer(slow_demo(MODEL_DELAY_S)) as model:
            for jobs in (1, THREADS):
                wall, wait, statuses = await three_threads(jobs, base, model.base_url)
                print(
                    f"  --n-jobs-per-worker {jobs}: {wall:.1f} s for all {THREADS}; longest wait for a first "
                    f"update {wait:.1f} s; {', '.join(statuses)}",
                    flush=True,
                )
                figures[f"jobs{jobs}_wall_s"] = wall
                figures[f"jobs{jobs}_first_update_s"] = wait
    figures["speedup"] = figures["jobs1_wall_s"] / figures[f"jobs{THREADS}_wall_s"]
    print(f"  {THREADS} jobs per worker finish {figures['speedup']:.2f}x sooner than 1")
    return figures


def _status(values: object) -> str:
    """The run status in a thread's values (a dict for this graph's state)."""
    return str(values.get("status", "?")) if isinstance(values, dict) else "?"


if __name__ == "__main__":
    run_main(main)
