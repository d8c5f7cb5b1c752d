"""Concurrent runs: 4 demo runs at once against 1, in one process with one bound Resources.

Each run is the built-in demo (real npm + Vite app, real Chromium, two browser-use GUI tests),
scripted model at zero delay. The runs share the process's Chromium, blob store and dependency
cache; each has its own workspace and dev server. Memory is the PSS of this process plus every
process under it (dev servers, npm, Chromium), sampled every 0.2 s; "added per extra run" is
(peak with 4 runs - peak with 1 run) / 3. RSS sums are printed beside it (they count pages shared
between processes once per process; see ``TreeMemory``).

    .venv/bin/python -m benchmarks.concurrency
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.graph.resources import Resources, use_resources
from webgen_agent.tools.scripted.server import ScriptedServer
from webgen_agent.tools.scripted.views import Scenario

from benchmarks.common import (
    REPEATS,
    Stopwatch,
    TreeMemory,
    median,
    print_header,
    run_main,
)

CONCURRENT = 4


async def batch(size: int, *, tag: str, base: Path, db: Path, server_url: str) -> list[str]:
    """``size`` demo runs at once; their statuses."""
    context = scripted_context(server_url, max_steps=8)
    results = await asyncio.gather(*(
        run_requirement(DEMO_REQUIREMENT, context=context, run_id=f"{tag}-{n}", out_dir=base / tag / str(n), db_path=db)
        for n in range(size)
    ))
    return [r.status for r in results]


async def main() -> dict[str, float]:
    print_header(f"2. Concurrency: {CONCURRENT} demo runs at once against 1 (one process, one Resources)")
    single: list[float] = []
    multi: list[float] = []
    single_peak: list[int] = []
    multi_peak: list[int] = []
    single_rss: list[int] = []
    multi_rss: list[int] = []
    with tempfile.TemporaryDirectory(prefix="webgen-bench-concurrency-") as scratch:
        base = Path(scratch)
        db = base / "webgen.db"
        with ScriptedServer(Scenario.load(scenario_path("demo"))) as server, TreeMemory() as memory:
            idle, idle_rss = memory.now()
            async with use_resources(Resources(db, deps_cache_dir=base / "deps-cache")):
                # Untimed: fills the dependency cache (npm runs once) and starts the shared Chromium.
                await batch(1, tag="warm", base=base, db=db, server_url=server.base_url)
                for rep in range(REPEATS):
                    for size, times, peaks, rss_peaks in ((1, single, single_peak, single_rss),
                                                          (CONCURRENT, multi, multi_peak, multi_rss)):
                        memory.window()
                        with Stopwatch() as watch:
                            statuses = await batch(size, tag=f"r{rep}-{size}", base=base, db=db, server_url=server.base_url)
                        times.append(watch.seconds)
                        peaks.append(memory.peak)
                        rss_peaks.append(memory.peak_rss)
                        if statuses != ["finished"] * size:
                            raise SystemExit(f"a demo run did not finish: {statuses}")
                    print(f"  round {rep + 1}/{REPEATS}: 1 run {single[-1]:.1f} s, {CONCURRENT} runs {multi[-1]:.1f} s; "
                          f"peak PSS {single_peak[-1] / 2**20:.0f} / {multi_peak[-1] / 2**20:.0f} MiB "
                          f"(RSS {single_rss[-1] / 2**20:.0f} / {multi_rss[-1] / 2**20:.0f})", flush=True)
    figures = {
        "single_s": median(single),
        "multi_s": median(multi),
        "single_peak_mib": median(single_peak) / 2**20,
        "multi_peak_mib": median(multi_peak) / 2**20,
        "idle_mib": idle / 2**20,
        "single_rss_mib": median(single_rss) / 2**20,
        "multi_rss_mib": median(multi_rss) / 2**20,
    }
    figures["wall_ratio"] = figures["multi_s"] / figures["single_s"]
    figures["added_per_run_mib"] = (figures["multi_peak_mib"] - figures["single_peak_mib"]) / (CONCURRENT - 1)
    figures["added_per_run_rss_mib"] = (figures["multi_rss_mib"] - figures["single_rss_mib"]) / (CONCURRENT - 1)
    print(f"  wall time: 1 run {figures['single_s']:.1f} s, {CONCURRENT} runs {figures['multi_s']:.1f} s: "
          f"ratio {figures['wall_ratio']:.2f} (target <= 2) [median of {REPEATS}]")
    print(f"  peak PSS (agent + children): before any run {figures['idle_mib']:.0f} MiB, 1 run "
          f"{figures['single_peak_mib']:.0f} MiB, {CONCURRENT} runs {figures['multi_peak_mib']:.0f} MiB: "
          f"{figures['added_per_run_mib']:.0f} MiB added per extra run (target <= 300 MB) [median of {REPEATS}]")
    print(f"  peak RSS sums: 1 run {figures['single_rss_mib']:.0f} MiB, {CONCURRENT} runs "
          f"{figures['multi_rss_mib']:.0f} MiB: {figures['added_per_run_rss_mib']:.0f} MiB per extra run "
          f"(shared pages counted once per process)")
    return figures


if __name__ == "__main__":
    run_main(main)
