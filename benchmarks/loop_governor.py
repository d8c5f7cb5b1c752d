"""Steps the loop governor saves, and how its default ``stall_steps`` was chosen.

Each static scripted scenario (no npm; real Chromium) runs under the default profile with a budget
of 10 steps without the governor (``stall_steps=0``) and with it at each ``stall_steps`` of SWEEP. Figures: the steps each run took, how it ended, and, for the runs without the
governor, the longest stretch of steps that a later better score ended (a plateau the run came out
of), and per ``stall_steps`` the steps saved and the runs that ended with a worse best score than
without the governor (a run cut before it improved). Not in the CI suite (about 8 minutes on 2 cores). Run: .venv/bin/python -m benchmarks.loop_governor
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import run_main, sized
from webgen_agent.core.views import Grade

SCENARIOS = sized(
    ("governor-circling", "governor-improving", "backtrack", "restart", "landing"), ("governor-circling",)
)
MAX_STEPS = sized(10, 6)
SWEEP = sized((3, 4, 5, 6), (5,))  # stall_steps values measured (5 is the default)
REQUIREMENT = "A notes page that shows the user's notes."


def productive_plateau(steps: Sequence[Any]) -> int:
    """The most steps between two improvements of the run's best score (0 when it never improved twice)."""
    from webgen_agent.core.governor import best_reached

    longest, reached = 0, -1
    for current in range(len(steps)):
        _, now = best_reached(steps[: current + 1])
        if now != reached and reached >= 0:
            longest = max(longest, now - reached)
        reached = now
    return longest


async def _run(name: str, base: Path, stall_steps: int) -> dict[str, Any]:
    from webgen_agent.apps.demo import scenario_path, scripted_context
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.checkpoints.history import final_state
    from webgen_agent.graph.api import run_requirement

    overrides: dict[str, Any] = {"max_steps": MAX_STEPS, "stall_steps": stall_steps}
    if name == "governor-improving":
        overrides["appearance_threshold"] = 5  # as its description says: no GUI test
    run_id = f"{name}-k{stall_steps}"
    await asyncio.to_thread(base.mkdir, parents=True, exist_ok=True)
    with ScriptedServer(Scenario.load(scenario_path(name))) as server:
        await run_requirement(
            REQUIREMENT,
            context=scripted_context(server.base_url, gui_max_actions=3, **overrides),
            run_id=run_id,
            out_dir=base / run_id,
            db_path=base / "runs.db",
        )
    state = await final_state(base / "runs.db", run_id)
    governed = [e for e in state["events"] if str(e.get("reason", "")).startswith("loop governor")]
    return {"steps": state["steps"], "governed": governed}


def _best(steps: Sequence[Any]) -> tuple[bool, Grade, Grade]:
    """The run's best score (good page, GUI grade, screenshot grade); all zero without an edit."""
    from webgen_agent.core.governor import best_reached

    best, _ = best_reached(steps)
    if best is None:
        return (False, 0, 0)
    return (not best["errored"] and best["screenshot_score"] >= 3, best["gui_score"], best["screenshot_score"])


async def main() -> dict[str, float]:
    from webgen_agent.core.context import AgentContext

    default = AgentContext.model_fields["stall_steps"].default
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="loop-governor-") as folder:
        base = Path(folder)
        without = {name: await _run(name, base / "off", 0) for name in SCENARIOS}
        for name, run in without.items():
            key = name.replace("-", "_")
            figures[f"{key}_steps_without"] = len(run["steps"])
            figures[f"{key}_plateau"] = productive_plateau(run["steps"])
            print(
                f"{name}: {len(run['steps'])} steps without the governor; longest plateau ended by a better "
                f"score: {figures[f'{key}_plateau']} steps",
                flush=True,
            )
        for stall_steps in SWEEP:
            steps, cut, lines = 0, 0, []
            for name in SCENARIOS:
                run = await _run(name, base / f"k{stall_steps}", stall_steps)
                steps += len(run["steps"])
                worse = _best(run["steps"]) < _best(without[name]["steps"])
                cut += worse
                actions = ", ".join(f"{e['kind']} after {e['after_step']}" for e in run["governed"]) or "-"
                lines.append(f"{name} {len(run['steps'])} ({actions}){' WORSE' if worse else ''}")
                if stall_steps == default:
                    figures[f"{name.replace('-', '_')}_steps"] = len(run["steps"])
            total = sum(len(run["steps"]) for run in without.values())
            figures[f"k{stall_steps}_steps_saved"] = total - steps
            figures[f"k{stall_steps}_runs_worse"] = cut
            print(
                f"stall_steps={stall_steps}: {total - steps} of {total} steps saved, {cut} runs ended worse: "
                + "; ".join(lines),
                flush=True,
            )
    return figures


if __name__ == "__main__":
    run_main(main)
