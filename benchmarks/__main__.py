"""Run the benchmark suite: ``.venv/bin/python -m benchmarks [--quick] [NAME ...]``.

``--quick``: tiny sizes and one round of each (what CI runs, so that a broken benchmark fails it);
its figures are not measurements.

Each benchmark runs in its own process (so memory sampling and Chromium start from a clean slate),
prints its own figures, and hands its headline figures back for the summary against the targets.
About 10-13 minutes on a 2-core machine; needs npm's registry (or a warm npm cache) and Chromium.
``chaos`` (docs/performance.md) runs only when named: it needs PostgreSQL and Ray, and takes minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import machine

# Fast ones first, so a broken environment shows early.
SUITE = (
    "cli_start",
    "storage",
    "export_throughput",
    "step_overhead",
    "sandbox_network",
    "concurrency",
    "model_share",
    "scale",
    "server_threads",
    "replay",
    "loop_governor",
    "train_throughput",
)
# Run only when named (``python -m benchmarks chaos``): a PostgreSQL server, Ray and two rollouts.
ON_REQUEST = ("chaos",)


# Each benchmark's figures against its target: (benchmark, label, figures -> (text, met)).
Target = tuple[str, str, Callable[[dict[str, float]], tuple[str, bool]]]
TARGETS: list[Target] = [
    (
        "step_overhead",
        "1. source-only step vs upstream-style step (executor, median)",
        lambda f: (
            f"{f['source_executor_s']:.2f} s vs {f['baseline_source_s']:.2f} s = {f['source_ratio']:.3f} "
            f"(target <= 0.2)",
            f["source_ratio"] <= 0.2,
        ),
    ),
    (
        "step_overhead",
        "1. dependency step vs upstream-style step",
        lambda f: (
            f"{f['dependency_executor_s']:.2f} s vs {f['baseline_dependency_s']:.2f} s = "
            f"{f['dependency_ratio']:.3f} (no target)",
            True,
        ),
    ),
    (
        "sandbox_network",
        "5. dependency step (npm install, no dependency cache), own network / shared network",
        lambda f: (
            f"{f['dependency_own_s']:.2f} s vs {f['dependency_shared_s']:.2f} s = {f['dependency_netns_ratio']:.3f} "
            f"(target <= 1.15; no sandbox {f['dependency_off_s']:.2f} s)",
            f["dependency_netns_ratio"] <= 1.15,
        ),
    ),
    (
        "sandbox_network",
        "5. source-only step (edit, freshness, page load), own network / shared network",
        lambda f: (
            f"{f['source_own_s']:.3f} s vs {f['source_shared_s']:.3f} s = {f['source_netns_ratio']:.3f} "
            f"(target: within noise, <= 1.10; no sandbox {f['source_off_s']:.3f} s)",
            f["source_netns_ratio"] <= 1.10,
        ),
    ),
    (
        "concurrency",
        "2. 4 runs / 1 run wall time",
        lambda f: (f"{f['wall_ratio']:.2f} (target <= 2)", f["wall_ratio"] <= 2),
    ),
    (
        "concurrency",
        "2. 4 runs / 1 run wall time, model answering after 1 s",
        lambda f: (
            f"{f['slow_wall_ratio']:.2f} (target <= 1.2)",
            f["slow_wall_ratio"] <= 1.2,
        ),
    ),
    (
        "concurrency",
        "2. memory added per extra run",
        lambda f: (
            f"{f['added_per_run_mib'] * 2**20 / 1e6:.0f} MB (target <= 300 MB)",
            f["added_per_run_mib"] * 2**20 / 1e6 <= 300,
        ),
    ),
    (
        "model_share",
        "3. framework share with a 5 s model",
        lambda f: (f"{f['share']:.1%} (target <= 5%)", f["share"] <= 0.05),
    ),
    (
        "server_threads",
        "langgraph dev, 3 threads: 1 job per worker / 3 jobs, model answering after 1 s",
        lambda f: (
            f"{f['jobs1_wall_s']:.1f} s / {f['jobs3_wall_s']:.1f} s = {f['speedup']:.2f}x (no target)",
            True,
        ),
    ),
    (
        "cli_start",
        "CLI start, --help (median)",
        lambda f: (f"{f['help_s']:.2f} s, {f['help_mb']:.0f} MB (target <= 0.3 s)", f["help_s"] <= 0.3),
    ),
    (
        "cli_start",
        "CLI start, history / report of a recorded run (median)",
        lambda f: (
            f"{f['history_run_s']:.2f} s / {f['report_run_s']:.2f} s "
            f"(CPU {f['history_run_cpu_s']:.2f} s / {f['report_run_cpu_s']:.2f} s; target <= 0.3 s)",
            max(f["history_run_s"], f["report_run_s"]) <= 0.3,
        ),
    ),
    (
        "chaos",
        "5. chaos: failed / steps repeated / steps lost under random faults",
        lambda f: (
            f"{f['failed']:.0f} / {f['steps_repeated']:.0f} / {f['steps_lost']:.0f} of {f['trajectories']:.0f} "
            f"trajectories, {f['faults']:.0f} faults (targets 0 / 0 / 0)",
            f["failed"] == f["steps_repeated"] == f["steps_lost"] == 0,
        ),
    ),
    (
        "export_throughput",
        "4. Step-GRPO export of 10,000 steps",
        lambda f: (f"{f['step-grpo_s']:.2f} s (target <= 5 s)", f["step-grpo_s"] <= 5),
    ),
    (
        "replay",
        "6. GUI-agent tokens per run, replay on / off (3+ GUI-tested steps)",
        lambda f: (
            f"{f['agent_tokens_on']:,.0f} / {f['agent_tokens_off']:,.0f}: {f['token_saving']:.0%} fewer (target >= 50%)",
            f["token_saving"] >= 0.5,
        ),
    ),
    (
        "replay",
        "6. injected regressions caught at their step; false regressions on the redesign",
        lambda f: (
            f"{f['regressions_caught_at_step']:.0f} of {f['regressions_injected']:.0f}; "
            f"{f['false_regressions_redesign']:.0f} false (targets: all, 0)",
            f["regressions_caught_at_step"] == f["regressions_injected"] and f["false_regressions_redesign"] == 0,
        ),
    ),
    (
        "replay",
        "6. replay seconds per passing test (max)",
        lambda f: (f"{f['replay_pass_s_max']:.2f} s (target < 2 s)", f["replay_pass_s_max"] < 2),
    ),
]


def _target_lines(figures: dict[str, dict[str, float]]) -> list[str]:
    lines = []
    for name, label, check in TARGETS:
        if name in figures:
            text, met = check(figures[name])
            lines.append(f"  {'met   ' if met else 'MISSED'}  {label}: {text}")
    return lines


def main(args: list[str]) -> int:
    quick = "--quick" in args
    names = [a for a in args if a != "--quick"]
    unknown = [n for n in names if n not in SUITE + ON_REQUEST]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {', '.join(SUITE + ON_REQUEST)}", file=sys.stderr)
        return 2
    print(f"machine: {machine()}", flush=True)
    figures: dict[str, dict[str, float]] = {}
    durations: dict[str, float] = {}
    failed: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="webgen-bench-figures-") as scratch:
        for name in names or SUITE:
            out = Path(scratch) / f"{name}.json"
            mark = time.monotonic()
            argv = [sys.executable, "-m", f"benchmarks.{name}"] + (["--figures", str(out)] if name != "storage" else [])
            env = {**os.environ, "WEBGEN_BENCH_QUICK": "1" if quick else "0"}
            if subprocess.run(argv, env=env).returncode != 0:
                failed.append(name)
            durations[name] = time.monotonic() - mark
            if out.is_file():
                figures[name] = json.loads(out.read_text())
    print("\n== summary ==" + (" (quick run: sizes too small for the figures to mean anything)" if quick else ""))
    print("\n".join(_target_lines(figures)))
    print(
        "  "
        + ", ".join(f"{n} {s:.0f} s" for n, s in durations.items())
        + f"; whole suite {time.monotonic() - started:.0f} s"
    )
    if failed:
        print(f"  FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
