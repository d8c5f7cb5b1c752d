"""Chaos: a scripted rollout on Ray and PostgreSQL while its infrastructure is broken at random moments.

12 trajectories (the landing instruction x 12 samples, a static site: two coder steps each), 2 actors
x 2 runs, once clean and once with faults injected every 1-4 s (random, seeded) until the rollout
ends and at least 10 were made: the PostgreSQL server stopped hard and started again 2 s later, an
actor's process killed (SIGKILL), an actor's Chromium killed, a dev server (the static site's
server) killed. The scripted coder takes CODER_DELAY_S to answer, as a model does, so that a kill
can land while a coder call is under way.

Figures: trajectories finished and failed; steps repeated: coder replies received beyond the steps
recorded (a reply the run had, asked again: checkpointed work done twice); coder calls cut off: calls
whose client went away before the answer (the scripted server saw it leave: status 499), asked again
on the replacement actor, which no checkpoint can hold and which are not steps; steps lost (steps the
clean run recorded that the chaos run did not); duplicates in the export; and the wall time against
the clean run. Target: 0 failed, 0 repeated, 0 lost. ``--quick``: 3 trajectories, one fault of each kind.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import print_header, run_main, sized
from tests.postgres import PostgresCluster, throwaway_cluster
from webgen_agent.apps.cluster.rollout import rollout_on_pool, rollout_pool
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import TrajectorySpec, plan_rollout, rollout_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.tools.webgen_bench import BenchRecord

TRAJECTORIES = sized(12, 3)
FAULTS = sized(10, 4)
KINDS = ("database restart", "actor kill", "chromium kill", "dev server kill")
CODER_DELAY_S = 1.0
REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."


def _actor_pids(pool: Any) -> list[int]:
    return [int(actor.where["pid"]) for actor in pool._actors if actor.where]


def _descendants(pids: list[int], match: str) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            try:
                if match in " ".join(child.cmdline()) or match in child.name():
                    found.append(child)
            except psutil.Error:
                continue
    return found


class Chaos:
    """Injects faults into a running rollout; ``made`` counts them by kind."""

    def __init__(self, cluster: PostgresCluster, pool: Any, seed: int) -> None:
        self.cluster, self.pool = cluster, pool
        self.random = random.Random(seed)
        self.made: Counter[str] = Counter()

    async def fault(self, kind: str) -> bool:
        if kind == "database restart":
            await asyncio.to_thread(self.cluster.stop)
            await asyncio.sleep(2)
            await asyncio.to_thread(self.cluster.start_server)
            return True
        actors = _actor_pids(self.pool)
        if kind == "actor kill":
            alive = [pid for pid in actors if psutil.pid_exists(pid)]
            if not alive:
                return False
            os.kill(self.random.choice(alive), signal.SIGKILL)
            return True
        match = "chrom" if kind == "chromium kill" else "http.server"
        victims = _descendants(actors, match)
        if kind == "chromium kill":
            # The browser's main process: the one whose parent is not a Chromium process itself.
            victims = [p for p in victims if "chrom" not in (p.parent().name() if p.parent() else "")]
        if not victims:
            return False
        try:
            self.random.choice(victims).kill()
        except psutil.Error:
            return False
        return True

    async def run(self, until: asyncio.Task[Any]) -> None:
        kinds = list(KINDS)
        while not until.done() and sum(self.made.values()) < FAULTS:
            await asyncio.sleep(self.random.uniform(1.0, 4.0))
            if until.done():
                return
            # Every kind in turn at first (each is made at least once), then at random.
            kind = kinds.pop(0) if kinds else self.random.choice(KINDS)
            if await self.fault(kind):
                self.made[kind] += 1
                print(f"  fault {sum(self.made.values())}: {kind}", flush=True)
            elif kind not in self.made:
                kinds.append(kind)  # nothing of that kind running now: try again later


async def one_rollout(
    label: str,
    *,
    specs: list[TrajectorySpec],
    cluster: PostgresCluster,
    server: ScriptedServer,
    base: Path,
    chaos_seed: int | None,
) -> dict[str, Any]:
    db = cluster.new_database(label)
    context = rollout_context(scripted_context(server.base_url, gui_max_actions=3), max_steps=3)
    settings = RaySettings(actors=2, runs_per_actor=2, cpus_per_run=(os.cpu_count() or 2) / 4)
    asked_before = len(server.requests)
    pool = rollout_pool(settings, context=context, db=db, out_dir=base / label)
    made: Counter[str] = Counter()
    async with pool:
        await pool.start()
        started = time.monotonic()
        work = asyncio.create_task(rollout_on_pool(pool, specs))
        if chaos_seed is not None:
            chaos = Chaos(cluster, pool, chaos_seed)
            await asyncio.gather(work, chaos.run(work))
            made = chaos.made
        outcomes = await work
        wall = time.monotonic() - started
        if chaos_seed is not None and sum(made.values()) < FAULTS:
            print(f"  the rollout ended after {sum(made.values())} faults (fewer than {FAULTS})")
    coder_calls = [r.status for r in server.requests[asked_before:] if r.model == "scripted-coder"]
    # Steps as checkpointed (a failed run's row in the runs table says 0).
    steps = {r.run_id: len((await final_state(db, r.run_id)).get("steps") or []) for r in RunIndex(db).list()}
    export = base / f"{label}.jsonl"
    await export_trajectories("rewards", export, db_path=db)
    exported = Counter(json.loads(line)["trajectory_id"] for line in export.read_text().splitlines())
    return {
        "wall": wall,
        "finished": sum(o.status == "finished" for o in outcomes),
        "failed": sum(o.status == "failed" for o in outcomes),
        "steps": steps,
        "coder_replies": coder_calls.count(200),
        "cut_off": coder_calls.count(499),
        "duplicates": sum(n - 1 for n in exported.values()),
        "exported": len(exported),
        "faults": made,
        "errors": [f"{o.run_id}: {o.error}" for o in outcomes if o.status == "failed"],
    }


async def main() -> dict[str, float]:
    print_header(f"chaos: {TRAJECTORIES} trajectories on Ray + PostgreSQL, >= {FAULTS} faults vs a clean run")
    import ray

    records = [BenchRecord.model_validate({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []})]
    base = Path(tempfile.mkdtemp(prefix="webgen-bench-chaos-"))
    os.environ["WEBGEN_STATE_DIR"] = str(base / "state")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with (
        throwaway_cluster() as cluster,
        ScriptedServer(
            Scenario.load(scenario_path("landing")).with_delay(CODER_DELAY_S, model="scripted-coder")
        ) as server,
    ):
        ray.init(address="local", include_dashboard=False, configure_logging=False, log_to_driver=False)
        try:
            results = {}
            for label, seed in (("clean", None), ("chaos", 35)):
                specs = plan_rollout(records, samples=TRAJECTORIES, name=label)
                results[label] = await one_rollout(
                    label, specs=specs, cluster=cluster, server=server, base=base, chaos_seed=seed
                )
                found = results[label]
                print(
                    f"{label}: {found['finished']} finished, {found['failed']} failed, "
                    f"{sum(found['steps'].values())} steps, {found['coder_replies']} coder replies "
                    f"({found['cut_off']} calls cut off) in {found['wall']:.1f} s",
                    flush=True,
                )
                for error in found["errors"]:
                    print(f"  failed {error[:300]}")
        finally:
            ray.shutdown()
    clean, chaos = results["clean"], results["chaos"]
    clean_steps = {run_id.removeprefix("clean-"): n for run_id, n in clean["steps"].items()}
    chaos_steps = {run_id.removeprefix("chaos-"): n for run_id, n in chaos["steps"].items()}
    lost = sum(max(0, n - chaos_steps.get(key, 0)) for key, n in clean_steps.items())
    repeated = chaos["coder_replies"] - sum(chaos_steps.values())
    faults = sum(chaos["faults"].values())
    print(
        f"faults: {faults} ({', '.join(f'{n} {kind}' for kind, n in chaos['faults'].items())})\n"
        f"chaos vs clean: {chaos['finished']} finished, {chaos['failed']} failed, {repeated} steps repeated, "
        f"{chaos['cut_off']} coder calls cut off and asked again, {lost} steps lost, {chaos['duplicates']} duplicates in the export; wall {chaos['wall']:.1f} s vs "
        f"{clean['wall']:.1f} s = {chaos['wall'] / clean['wall']:.2f}x; load average {os.getloadavg()[0]:.1f}"
    )
    return {
        "trajectories": float(TRAJECTORIES),
        "faults": float(faults),
        "finished": float(chaos["finished"]),
        "failed": float(chaos["failed"]),
        "steps_repeated": float(repeated),
        "coder_calls_cut_off": float(chaos["cut_off"]),
        "steps_lost": float(lost),
        "export_duplicates": float(chaos["duplicates"]),
        "clean_wall_s": clean["wall"],
        "chaos_wall_s": chaos["wall"],
        "wall_ratio": chaos["wall"] / clean["wall"],
    }


if __name__ == "__main__":
    run_main(main)
