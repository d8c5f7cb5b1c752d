"""Concurrent runs: 4 demo runs at once against 1, in one process with one bound Resources.

Each run is the built-in demo (real npm + Vite app, real Chromium, two browser-use GUI tests),
scripted model at zero delay, then again with every model call answered after 1 s. The runs share the process's Chromium, blob store and dependency
cache; each has its own workspace and dev server. Memory is the PSS of this process plus every
process under it (dev servers, npm, Chromium), sampled every second; "added per extra run" is
(peak with 4 runs - peak with 1 run) / 3. RSS sums are printed beside it (they count pages shared
between processes once per process; see ``TreeMemory``).

    .venv/bin/python -m benchmarks.concurrency
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import psutil

from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.graph.resources import Resources, use_resources
from webgen_agent.tools.scripted.server import ScriptedServer
from webgen_agent.tools.scripted.views import Scenario

from benchmarks.model_share import slow_demo
from benchmarks.common import (
    REPEATS,
    Stopwatch,
    TreeMemory,
    median,
    print_header,
    run_main,
)

CONCURRENT = 4
SLOW_MODEL_S = 1.0  # the second measurement: every model call answered after this long


def busy_cores(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Average cores busy (whole machine) between two ``machine_cpu()`` readings."""
    return (after[0] - before[0]) / max(1e-9, after[1] - before[1])


def machine_cpu() -> tuple[float, float]:
    """(CPU-seconds the machine has spent busy, wall seconds), from the kernel's counters."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0), time.monotonic()


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
    single_cores: list[float] = []
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
                        cpu_before = machine_cpu()
                        with Stopwatch() as watch:
                            statuses = await batch(size, tag=f"r{rep}-{size}", base=base, db=db, server_url=server.base_url)
                        if size == 1:
                            single_cores.append(busy_cores(cpu_before, machine_cpu()))
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
        "single_busy_cores": median(single_cores),
    }
    figures["wall_ratio"] = figures["multi_s"] / figures["single_s"]
    figures["added_per_run_mib"] = (figures["multi_peak_mib"] - figures["single_peak_mib"]) / (CONCURRENT - 1)
    figures["added_per_run_rss_mib"] = (figures["multi_rss_mib"] - figures["single_rss_mib"]) / (CONCURRENT - 1)
    print(f"  wall time: 1 run {figures['single_s']:.1f} s, {CONCURRENT} runs {figures['multi_s']:.1f} s: "
          f"ratio {figures['wall_ratio']:.2f} (target <= 2) [median of {REPEATS}]")
    print(f"  one run alone keeps {figures['single_busy_cores']:.2f} cores busy on average, so {CONCURRENT} runs "
          f"on 2 cores take at least {CONCURRENT * figures['single_busy_cores'] / 2:.2f}x its time (zero-delay model)")
    print(f"  peak PSS (agent + children): before any run {figures['idle_mib']:.0f} MiB, 1 run "
          f"{figures['single_peak_mib']:.0f} MiB, {CONCURRENT} runs {figures['multi_peak_mib']:.0f} MiB: "
          f"{figures['added_per_run_mib']:.0f} MiB added per extra run (target <= 300 MB) [median of {REPEATS}]")
    print(f"  peak RSS sums: 1 run {figures['single_rss_mib']:.0f} MiB, {CONCURRENT} runs "
          f"{figures['multi_rss_mib']:.0f} MiB: {figures['added_per_run_rss_mib']:.0f} MiB per extra run "
          f"(shared pages counted once per process)")
    figures.update(await with_slow_model())
    return figures


async def with_slow_model() -> dict[str, float]:
    """The same comparison with every model call answered after ``SLOW_MODEL_S``, as a served model would."""
    single: list[float] = []
    multi: list[float] = []
    with tempfile.TemporaryDirectory(prefix="webgen-bench-concurrency-slow-") as scratch:
        base = Path(scratch)
        db = base / "webgen.db"
        with ScriptedServer(slow_demo(SLOW_MODEL_S)) as server:
            async with use_resources(Resources(db, deps_cache_dir=base / "deps-cache")):
                await batch(1, tag="warm", base=base, db=db, server_url=server.base_url)
                for rep in range(REPEATS):
                    for size, times in ((1, single), (CONCURRENT, multi)):
                        with Stopwatch() as watch:
                            statuses = await batch(size, tag=f"r{rep}-{size}", base=base, db=db, server_url=server.base_url)
                        times.append(watch.seconds)
                        if statuses != ["finished"] * size:
                            raise SystemExit(f"a demo run did not finish: {statuses}")
                    print(f"  {SLOW_MODEL_S:g} s model, round {rep + 1}/{REPEATS}: 1 run {single[-1]:.1f} s, "
                          f"{CONCURRENT} runs {multi[-1]:.1f} s", flush=True)
    figures = {"slow_single_s": median(single), "slow_multi_s": median(multi)}
    figures["slow_wall_ratio"] = figures["slow_multi_s"] / figures["slow_single_s"]
    print(f"  with a {SLOW_MODEL_S:g} s model: 1 run {figures['slow_single_s']:.1f} s, {CONCURRENT} runs "
          f"{figures['slow_multi_s']:.1f} s: ratio {figures['slow_wall_ratio']:.2f} [median of {REPEATS}]")
    return figures


if __name__ == "__main__":
    run_main(main)
