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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import (
    REPEATS,
    Stopwatch,
    TreeMemory,
    median,
    print_header,
    run_main,
    sized,
)
from benchmarks.model_share import slow_demo
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.resources import Resources, use_resources

CONCURRENT = sized(4, 2)
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
    results = await asyncio.gather(
        *(
            run_requirement(
                DEMO_REQUIREMENT, context=context, run_id=f"{tag}-{n}", out_dir=base / tag / str(n), db_path=db
            )
            for n in range(size)
        )
    )
    return [r.status for r in results]


@dataclass
class Round:
    """One round: 1 run alone, then CONCURRENT at once."""

    single_s: float
    multi_s: float
    single_cores: float  # whole-machine cores busy during the single run / the concurrent runs
    multi_cores: float
    single_peak: int = 0  # PSS / RSS peaks, when memory is sampled
    multi_peak: int = 0
    single_rss: int = 0
    multi_rss: int = 0


async def rounds(scenario: Scenario, *, tag: str, memory: TreeMemory | None = None) -> list[Round]:
    """REPEATS rounds of 1 run then CONCURRENT runs of ``scenario``, after one untimed warm-up run."""
    measured: list[Round] = []
    with tempfile.TemporaryDirectory(prefix=f"webgen-bench-{tag}-") as scratch:
        base = Path(scratch)
        db = base / "webgen.db"
        with ScriptedServer(scenario) as server:
            async with use_resources(Resources(db, deps_cache_dir=base / "deps-cache")):
                # Untimed: fills the dependency cache (npm runs once) and starts the shared Chromium.
                await batch(1, tag="warm", base=base, db=db, server_url=server.base_url)
                for rep in range(REPEATS):
                    figures: dict[str, Any] = {}
                    for size, name in ((1, "single"), (CONCURRENT, "multi")):
                        if memory is not None:
                            memory.window()
                        cpu_before = machine_cpu()
                        with Stopwatch() as watch:
                            statuses = await batch(
                                size, tag=f"r{rep}-{size}", base=base, db=db, server_url=server.base_url
                            )
                        if statuses != ["finished"] * size:
                            raise SystemExit(f"a demo run did not finish: {statuses}")
                        figures[f"{name}_s"] = watch.seconds
                        figures[f"{name}_cores"] = busy_cores(cpu_before, machine_cpu())
                        if memory is not None:
                            figures[f"{name}_peak"], figures[f"{name}_rss"] = memory.peak, memory.peak_rss
                    measured.append(Round(**figures))
                    last = measured[-1]
                    line = f"  {tag}, round {rep + 1}/{REPEATS}: 1 run {last.single_s:.1f} s, {CONCURRENT} runs {last.multi_s:.1f} s"
                    if memory is not None:
                        line += (
                            f"; peak PSS {last.single_peak / 2**20:.0f} / {last.multi_peak / 2**20:.0f} MiB "
                            f"(RSS {last.single_rss / 2**20:.0f} / {last.multi_rss / 2**20:.0f})"
                        )
                    print(line, flush=True)
    return measured


def _median_of(measured: list[Round], name: str) -> float:
    return median(getattr(r, name) for r in measured)


async def main() -> dict[str, float]:
    print_header(f"2. Concurrency: {CONCURRENT} demo runs at once against 1 (one process, one Resources)")
    with TreeMemory() as memory:
        idle, _ = memory.now()
        fast = await rounds(Scenario.load(scenario_path("demo")), tag="zero-delay model", memory=memory)
    figures = {
        "single_s": _median_of(fast, "single_s"),
        "multi_s": _median_of(fast, "multi_s"),
        "single_peak_mib": _median_of(fast, "single_peak") / 2**20,
        "multi_peak_mib": _median_of(fast, "multi_peak") / 2**20,
        "idle_mib": idle / 2**20,
        "single_rss_mib": _median_of(fast, "single_rss") / 2**20,
        "multi_rss_mib": _median_of(fast, "multi_rss") / 2**20,
        "single_busy_cores": _median_of(fast, "single_cores"),
    }
    figures["wall_ratio"] = figures["multi_s"] / figures["single_s"]
    figures["added_per_run_mib"] = (figures["multi_peak_mib"] - figures["single_peak_mib"]) / (CONCURRENT - 1)
    figures["added_per_run_rss_mib"] = (figures["multi_rss_mib"] - figures["single_rss_mib"]) / (CONCURRENT - 1)
    print(
        f"  wall time: 1 run {figures['single_s']:.1f} s, {CONCURRENT} runs {figures['multi_s']:.1f} s: "
        f"ratio {figures['wall_ratio']:.2f} (target <= 2) [median of {REPEATS}]"
    )
    print(
        f"  one run alone keeps {figures['single_busy_cores']:.2f} cores busy on average, so {CONCURRENT} runs "
        f"on 2 cores take at least {CONCURRENT * figures['single_busy_cores'] / 2:.2f}x its time (zero-delay model)"
    )
    print(
        f"  peak PSS (agent + children): before any run {figures['idle_mib']:.0f} MiB, 1 run "
        f"{figures['single_peak_mib']:.0f} MiB, {CONCURRENT} runs {figures['multi_peak_mib']:.0f} MiB: "
        f"{figures['added_per_run_mib']:.0f} MiB added per extra run (target <= 300 MB) [median of {REPEATS}]"
    )
    print(
        f"  peak RSS sums: 1 run {figures['single_rss_mib']:.0f} MiB, {CONCURRENT} runs "
        f"{figures['multi_rss_mib']:.0f} MiB: {figures['added_per_run_rss_mib']:.0f} MiB per extra run "
        f"(shared pages counted once per process)"
    )

    # The same comparison with every model call answered after SLOW_MODEL_S, as a served model would.
    slow = await rounds(slow_demo(SLOW_MODEL_S), tag=f"{SLOW_MODEL_S:g} s model")
    figures["slow_single_s"] = _median_of(slow, "single_s")
    figures["slow_multi_s"] = _median_of(slow, "multi_s")
    figures["slow_wall_ratio"] = figures["slow_multi_s"] / figures["slow_single_s"]
    print(
        f"  with a {SLOW_MODEL_S:g} s model: 1 run {figures['slow_single_s']:.1f} s, {CONCURRENT} runs "
        f"{figures['slow_multi_s']:.1f} s: ratio {figures['slow_wall_ratio']:.2f} [median of {REPEATS}]"
    )
    return figures


if __name__ == "__main__":
    run_main(main)
