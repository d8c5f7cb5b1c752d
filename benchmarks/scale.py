"""Scaling out: the same scripted rollout in-process and on Ray, and the run database on SQLite and PostgreSQL.

8 trajectories (the rollout scenario's 2 instructions x 4 samples, at most 4 steps each):
1. in-process, 4 workers, SQLite;  2. in-process, 4 workers, PostgreSQL;
3. Ray, 2 actors x 2 runs, PostgreSQL: a local instance and the actors (processes started, the
   agent's modules imported, resources made) are started before the clock, as the in-process side
   has its modules imported before it; closing the actors (their browsers) is on the clock, as
   closing the in-process resources is. The actors' start is printed apart.
2 and 3 run ROUNDS (3) times, alternately (the machine is shared: the best of each is compared).
Figures: wall time and trajectories per minute; for 1 and 2 the time spent writing checkpoints
(saver aput + aput_writes, blob writes included) per coder step and the bytes stored per step.
PostgreSQL is a throwaway cluster (tests/postgres.py); Ray needs the [ray] extra.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import median, print_header, run_main, sized
from tests.postgres import throwaway_cluster
from webgen_agent.apps.cluster.rollout import rollout_on_pool, rollout_pool
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import plan_rollout, rollout_context, run_rollout
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.postgres import ContentPostgresSaver
from webgen_agent.checkpoints.saver import AtomicWritesSaver
from webgen_agent.tools.webgen_bench import load_records

RECORDS = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
SAMPLES = sized(4, 1)
ROUNDS = sized(3, 1)


class CheckpointClock:
    """Seconds spent in the savers' writes (a checkpoint and a task's writes, blobs included)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._originals: list[tuple[type, str, Callable[..., Any]]] = []

    def __enter__(self) -> CheckpointClock:
        for cls in (AtomicWritesSaver, ContentPostgresSaver):
            for name in ("aput", "aput_writes"):
                original = getattr(cls, name)
                self._originals.append((cls, name, original))
                setattr(cls, name, self._timed(original))
        return self

    def _timed(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in self._originals:
            setattr(cls, name, original)


def sqlite_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if not p.name.endswith(".lock"))


def postgres_bytes(url: str) -> int:
    import psycopg

    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations", "blobs", "runs")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
            [list(tables)],
        ).fetchone()
    return int(row[0]) if row and row[0] else 0


async def main() -> dict[str, float]:
    print_header("scale: in-process vs Ray, SQLite vs PostgreSQL (8 scripted trajectories)")
    figures: dict[str, float] = {}
    records = load_records(RECORDS)
    with throwaway_cluster() as cluster, ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
        context = rollout_context(scripted_context(server.base_url, gui_max_actions=3), max_steps=4)
        base = Path(tempfile.mkdtemp(prefix="webgen-bench-scale-"))
        os.environ["WEBGEN_STATE_DIR"] = str(base / "state")

        async def in_process(label: str, db: str) -> tuple[float, float, int]:
            specs = plan_rollout(records, samples=SAMPLES, name=label)
            with CheckpointClock() as clock:
                started = time.monotonic()
                outcomes = await run_rollout(specs, context=context, db_path=db, out_dir=base / label, workers=4)
                wall = time.monotonic() - started
            steps = sum(o.steps for o in outcomes)
            print(
                f"{label}: {len(outcomes)} trajectories, {steps} steps in {wall:.1f} s; "
                f"checkpoint writes {clock.seconds / max(steps, 1) * 1000:.0f} ms per step"
            )
            return wall, clock.seconds, steps

        sqlite_db = base / "sqlite" / "webgen.db"
        wall, spent, steps = await in_process("sqlite", str(sqlite_db))
        figures.update(
            sqlite_wall_s=wall,
            sqlite_checkpoint_ms_per_step=spent / steps * 1000,
            sqlite_bytes_per_step=sqlite_bytes(sqlite_db) / steps,
        )
        import ray

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        started = time.monotonic()
        ray.init(
            address="local",
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
        )
        print(f"ray: local instance started in {time.monotonic() - started:.1f} s (off the clock)")
        settings = RaySettings(actors=2, runs_per_actor=2, cpus_per_run=(os.cpu_count() or 2) / 4)
        postgres_walls, ray_walls, actor_starts = [], [], []
        try:
            for round_ in range(ROUNDS):
                postgres_db = cluster.new_database(f"bench{round_}")
                wall, spent, steps = await in_process(f"postgres{round_}", postgres_db)
                postgres_walls.append(wall)
                if round_ == 0:
                    figures.update(
                        postgres_checkpoint_ms_per_step=spent / steps * 1000,
                        postgres_bytes_per_step=postgres_bytes(postgres_db) / steps,
                    )
                label = f"ray{round_}"
                specs = plan_rollout(records, samples=SAMPLES, name=label)
                pool = rollout_pool(settings, context=context, db=cluster.new_database(label), out_dir=base / label)
                started = time.monotonic()
                async with pool:
                    await pool.start()
                    actor_starts.append(time.monotonic() - started)
                    started = time.monotonic()
                    outcomes = await rollout_on_pool(pool, specs)
                ray_walls.append(time.monotonic() - started)
                print(
                    f"{label} (2 actors x 2 runs, PostgreSQL): {len(outcomes)} trajectories, "
                    f"{sum(o.steps for o in outcomes)} steps in {ray_walls[-1]:.1f} s "
                    f"(+ {actor_starts[-1]:.1f} s starting the actors, off the clock)"
                )
        finally:
            ray.shutdown()
        figures.update(
            postgres_wall_s=min(postgres_walls),
            ray_wall_s=min(ray_walls),
            ray_actor_start_s=min(actor_starts),
            ray_vs_in_process=min(postgres_walls) / min(ray_walls),
            ray_cold_vs_in_process=min(postgres_walls) / min(w + a for w, a in zip(ray_walls, actor_starts)),
            # Each round's pair ran back to back, under about the same load from the machine's other work.
            ray_vs_in_process_paired=median(p / r for p, r in zip(postgres_walls, ray_walls)),
        )
        ray_wall = figures["ray_wall_s"]
    n = len(records) * SAMPLES
    print(
        f"throughput: in-process {n / figures['postgres_wall_s'] * 60:.1f} /min, "
        f"Ray {n / ray_wall * 60:.1f} /min (Ray / in-process = {figures['ray_vs_in_process']:.2f}; "
        f"with the actors' start on the clock {figures['ray_cold_vs_in_process']:.2f}; "
        f"median of the rounds' pairs {figures['ray_vs_in_process_paired']:.2f}); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"per step: SQLite {figures['sqlite_checkpoint_ms_per_step']:.0f} ms, "
        f"{figures['sqlite_bytes_per_step'] / 1024:.0f} KiB; PostgreSQL "
        f"{figures['postgres_checkpoint_ms_per_step']:.0f} ms, {figures['postgres_bytes_per_step'] / 1024:.0f} KiB"
    )
    return figures


if __name__ == "__main__":
    run_main(main)
