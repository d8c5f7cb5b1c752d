"""Recorded GUI tests: GUI-agent tokens with and without replay, regressions caught, replay seconds.

Two scripted scenarios (apps/scripted/scenarios), each a todo app with two functions (add an item,
mark it done) over real npm, Vite and Chromium:

- ``replay``: step 0 works and its GUI test passes; step 2 adds a subtitle; step 3 restyles and
  breaks marking done (the injected regression, two edits after the recording); step 4 fixes it.
- ``replay_redesign``: step 0 as above; step 2 is an intended redesign (other button and field
  names, same functions): no regression may be reported.

Each runs with replay on (the default profile) and off (``AgentContext.replay_tests=False``). The
GUI agent's tokens are what the scripted server counted for its requests (browser-use's prompts with
their screenshots). ``--quick`` (CI): the regression scenario with replay on only.

    .venv/bin/python -m benchmarks.replay
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import QUICK, print_header, run_main
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.graph.api import run_requirement

REQUIREMENT = "A todo app: add todos, mark them done, and show how many there are and how many are done."
INJECTED_AT = 3  # the step of the replay scenario that breaks marking done


async def one_run(scenario: str, replay: bool, base: Path) -> dict[str, Any]:
    """Run ``scenario``; its steps, the GUI agent's tokens and the per-test replay seconds."""
    run_id = f"{scenario}-{'on' if replay else 'off'}"
    db = base / "webgen.db"  # one database: the first run's install fills the dependency cache for all
    with ScriptedServer(Scenario.load(scenario_path(scenario))) as server:
        context = scripted_context(server.base_url, max_steps=6, gui_max_actions=4, replay_tests=replay)
        await run_requirement(REQUIREMENT, context=context, run_id=run_id, out_dir=base / run_id, db_path=db)
        agent = [r for r in server.requests if r.agent_step]
    state = await final_state(db, run_id)
    steps = [s for s in state["steps"] if s["action"] == "edit"]
    blobs = BlobStore(db)
    try:
        verdicts = [v for s in steps if s.get("replay") for v in blobs.get_json(s["replay"]["verdicts"])]
    finally:
        blobs.close()
    return {
        "steps": steps,
        "agent_tokens": sum(r.prompt_tokens + r.completion_tokens for r in agent),
        "agent_runs": sum(1 for s in steps if s.get("gui_run")),
        "gui_tested": sum(1 for s in steps if s["gui_passed"] is not None),
        "passing_s": [v["seconds"] for v in verdicts if v["status"] == "passed"],
        "failing_s": [v["seconds"] for v in verdicts if v["status"] != "passed"],
    }


def describe(name: str, run: dict[str, Any]) -> None:
    replays = [
        f"{s['index']}:{s['replay']['passed']}p/{s['replay']['failed']}f/{s['replay']['unmatched']}u"
        for s in run["steps"]
        if s.get("replay")
    ]
    print(
        f"{name:24} GUI-tested steps {run['gui_tested']}, agent runs {run['agent_runs']}, "
        f"agent tokens {run['agent_tokens']:,}, replays (step:passed/failed/unmatched) {' '.join(replays) or '-'}",
        flush=True,
    )


async def main() -> dict[str, float]:
    print_header("replay: recorded GUI tests" + (" (quick)" if QUICK else ""))
    with tempfile.TemporaryDirectory(prefix="webgen-bench-replay-") as scratch:
        base = Path(scratch)
        runs = {"regression on": await one_run("replay", True, base)}
        if not QUICK:
            runs["regression off"] = await one_run("replay", False, base)
            runs["redesign on"] = await one_run("replay_redesign", True, base)
            runs["redesign off"] = await one_run("replay_redesign", False, base)
    for name, run in runs.items():
        describe(name, run)
    on = runs["regression on"]
    broken = next(s for s in on["steps"] if s["index"] == INJECTED_AT)
    caught = bool(broken.get("replay") and broken["replay"]["failed"] and broken["gui_passed"] is False)
    # Before the injected step: no replay failed (a regression reported early would be a false one).
    early = sum(s["replay"]["failed"] for s in on["steps"] if s.get("replay") and s["index"] < INJECTED_AT)
    passing = on["passing_s"] + (runs["redesign on"]["passing_s"] if "redesign on" in runs else [])
    figures = {
        "regressions_injected": 1.0,
        "regressions_caught_at_step": float(caught),
        "false_regressions_before": float(early),
        "replay_pass_s_median": statistics.median(passing) if passing else 0.0,
        "replay_pass_s_max": max(passing, default=0.0),
        "replay_fail_s_max": max(on["failing_s"], default=0.0),
        "agent_tokens_on": float(on["agent_tokens"]),
        "gui_tested_steps": float(on["gui_tested"]),
    }
    if QUICK:  # not measured in a quick run
        figures.update(dict.fromkeys(("agent_tokens_off", "token_saving", "false_regressions_redesign"), float("nan")))
    else:
        off = runs["regression off"]
        figures["agent_tokens_off"] = float(off["agent_tokens"])
        figures["token_saving"] = 1 - on["agent_tokens"] / off["agent_tokens"] if off["agent_tokens"] else 0.0
        redesign = runs["redesign on"]
        figures["false_regressions_redesign"] = float(
            sum(s["replay"]["failed"] for s in redesign["steps"] if s.get("replay"))
            + sum(1 for s in redesign["steps"] if s["gui_passed"] is False)
        )
        figures["redesign_tokens_on"] = float(redesign["agent_tokens"])
        figures["redesign_tokens_off"] = float(runs["redesign off"]["agent_tokens"])
    for key, value in figures.items():
        print(f"  {key}: {value:.3f}", flush=True)
    if not caught or early:
        raise SystemExit("replay benchmark: the injected regression was not caught at its step")
    return figures


if __name__ == "__main__":
    run_main(main)
