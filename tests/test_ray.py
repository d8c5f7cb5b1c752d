"""Rollouts and the benchmark on Ray with a PostgreSQL store, end to end, against the scripted model.

One real local Ray instance (started here, shared by the tests) is joined with ``--ray HOST:PORT``;
``--ray`` alone starts one of its own. The rollout (2 actors x 2 runs) and the benchmark (2 actors)
each lose an actor to SIGKILL mid-way: its unfinished work continues on a replacement actor (runs
from their checkpoints, test cases not yet recorded), nothing it started is left running, and the
outputs are those of an in-process run (``export`` reads every trajectory from the shared store).
(tests/test_ray_actor_kills.py kills an actor at chosen moments.)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import RAY_CPUS
from tests.helpers import checkpoint_count, group_alive, kept_coder_replies, owned_groups, scripted_models
from webgen_agent.apps.cluster.settings import RaySettings, check_store_reaches_nodes
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.errors import ConfigError

RECORDS = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
CLI = str(Path(sys.executable).parent / "webgen-agent")
# The scenario makes one habits trajectory (whichever asks first) meet HTTP 500s beyond the retries;
# recipes trajectories always finish, so the actor killed is one running a recipes trajectory.
VICTIM_GROUP = "r-recipes-"


def test_several_machines_need_a_postgres_store():
    nodes = [{"Alive": True, "NodeManagerAddress": "10.0.0.1"}, {"Alive": True, "NodeManagerAddress": "10.0.0.2"}]
    with pytest.raises(ConfigError, match="2 machines .* SQLite .* postgresql://"):
        check_store_reaches_nodes(Database.of("runs/webgen.db"), nodes)
    check_store_reaches_nodes(Database.of("postgresql://h/db"), nodes)
    check_store_reaches_nodes(Database.of("runs/webgen.db"), nodes[:1] + [{**nodes[1], "Alive": False}])


def test_actor_count_follows_the_cluster_cpus_unless_given():
    assert RaySettings(runs_per_actor=2).actor_count(8.0) == 4
    assert RaySettings(runs_per_actor=2, cpus_per_run=0.5).actor_count(2.0) == 2
    assert RaySettings(runs_per_actor=4).actor_count(2.0) == 1  # at least one
    with pytest.raises(ConfigError, match="need 4 CPUs; the cluster has 2"):
        RaySettings(actors=2, runs_per_actor=2).actor_count(2.0)


def cli_env(chromium: str = "", **extra: str) -> dict[str, str]:
    return {**os.environ, "WEBGEN_CHROMIUM": chromium, "COLUMNS": "200", "RAY_AUTH_MODE": "disabled", **extra}


def rollout_args(tmp_path: Path, base_url: str, *extra: str) -> list[str]:
    # The rollout scenario scripts the default profile's judge (as docs/exports.md runs it).
    base = [
        CLI,
        "rollout",
        "--data",
        str(RECORDS),
        "--profile",
        "default",
        "--base-url",
        base_url,
        "--coder-model",
        "c",
    ]
    return base + ["--vlm-model", "v", "--feedback-model", "f", "--db", str(tmp_path / "x.db"), *extra]


@pytest.fixture(scope="module")
def idle_endpoint() -> Iterator[str]:
    """A model endpoint that answers (the checks before a rollout pass) and is never asked anything here."""
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario

    with ScriptedServer(Scenario.model_validate({"name": "idle", "rules": [{"content": "unused"}]})) as server:
        yield server.base_url


@pytest.mark.e2e
def test_ray_alone_starts_a_local_instance_and_an_address_joins_a_cluster(tmp_path, ray_address, idle_endpoint):
    # --ray with no value (followed by another option): a Ray instance of this machine's own CPUs.
    alone = subprocess.run(
        rollout_args(tmp_path, idle_endpoint, "--ray", "--actors", "64", "--runs-per-actor", "4"),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert alone.returncode == 2, alone.stdout + alone.stderr
    assert "on Ray (local)" in alone.stdout
    found = re.search(r"need 256 CPUs; the cluster has (\d+)", alone.stderr.replace("\n", " "))
    assert found is not None, alone.stderr
    assert int(found.group(1)) != RAY_CPUS or os.cpu_count() == RAY_CPUS, "it joined the running instance"
    # --ray auto (the cluster RAY_ADDRESS names) and --ray HOST:PORT join the running instance.
    for address, env in (("auto", cli_env(RAY_ADDRESS=ray_address)), (ray_address, cli_env())):
        joined = subprocess.run(
            rollout_args(tmp_path, idle_endpoint, "--actors", "64", "--ray", address),
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert joined.returncode == 2, joined.stdout + joined.stderr
        assert f"on Ray ({address})" in joined.stdout
        assert f"the cluster has {RAY_CPUS}:" in joined.stderr.replace("\n", " ")


@pytest.mark.e2e
def test_ray_flag_without_ray_installed_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from webgen_agent.apps.cli.main import app\n"
        f"app(['rollout', '--data', {str(RECORDS)!r}, '--base-url', 'http://127.0.0.1:1/v1',"
        " '--coder-model', 'c', '--vlm-model', 'v', '--feedback-model', 'f', '--db', "
        f"{str(tmp_path / 'x.db')!r}, '--ray'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install 'webgen-agent[ray]'" in result.stdout + result.stderr


@pytest.mark.e2e
def test_rollout_on_ray_survives_a_killed_actor(tmp_path, postgres_cluster, chromium_path, state_dir, ray_address):
    db = postgres_cluster.new_database()
    env = cli_env(chromium_path)
    command = [
        CLI,
        "rollout",
        "--data",
        str(RECORDS),
        "--samples",
        "2",
        "--max-steps",
        "4",
        "--gui-max-actions",
        "3",
        "--name",
        "r",
        "--out",
        str(tmp_path / "runs"),
        "--db",
        db,
        "--ray",
        ray_address,
        "--actors",
        "2",
        "--runs-per-actor",
        "2",
        "--cpus-per-run",
        "0.5",
        "--profile",
        "default",  # the rollout scenario scripts the default profile's judge
    ]
    with ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
        command += [
            *scripted_models(server.base_url),
        ]
        log = (tmp_path / "rollout.log").open("w")
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        victim, steps_before = None, []
        deadline = time.monotonic() + 400
        try:
            while victim is None:  # a trajectory (not the failing one) that has steps and runs on
                assert proc.poll() is None, (tmp_path / "rollout.log").read_text()
                assert time.monotonic() < deadline, "no trajectory got far enough to kill its actor"
                for record in RunIndex(db).list():
                    running = record.status == "running" and record.run_id.startswith(VICTIM_GROUP)
                    if running and checkpoint_count(db, record.run_id) >= 6:
                        steps_before = asyncio.run(final_state(db, record.run_id)).get("steps", [])
                        if steps_before:
                            victim = record
                            break
                time.sleep(0.2)
            os.kill(victim.pid, signal.SIGKILL)  # the Ray actor process running it
            proc.wait(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    output = (tmp_path / "rollout.log").read_text()
    records = {r.run_id: r for r in RunIndex(db).list()}
    assert set(records) == {f"r-{g}-s{k}" for g in ("recipes", "habits") for k in range(2)}, output
    finished = [run_id for run_id, r in records.items() if r.status == "finished"]
    # Only the habits trajectory the scenario makes fail is failed; the killed actor's runs finished elsewhere.
    unfinished = set(records) - set(finished)
    assert len(unfinished) <= 1 and all(run_id.startswith("r-habits-") for run_id in unfinished), output
    assert victim.run_id in finished
    assert records[victim.run_id].pid != victim.pid, "it was continued by another actor"
    steps_after = asyncio.run(final_state(db, victim.run_id))["steps"]
    # The coder turns recorded before the kill were kept, not asked again (a step still in progress
    # at the kill gains its execution and grades afterwards, so only the coder's part is compared).
    coder_part = [(s["index"], s["prompt"], s["completion"]) for s in steps_before]
    assert [(s["index"], s["prompt"], s["completion"]) for s in steps_after[: len(steps_before)]] == coder_part
    # Every output folder written as in-process; nothing the dead actor started is left running.
    for run_id in finished:
        assert json.loads((tmp_path / "runs" / run_id / "run.json").read_text())["status"] == "finished"
    assert not [g for g in owned_groups(db, victim.pid) if group_alive(g)]
    exported = subprocess.run(
        [CLI, "export", "--format", "rewards", "--out", str(tmp_path / "rewards.jsonl"), "--db", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    lines = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert sorted(line["trajectory_id"] for line in lines) == sorted(finished)


def _owner_serving(db: str, folder: Path) -> int | None:
    """The agent process (actor) whose recorded dev server runs in ``folder``."""
    registry = Database.of(db).local_dir / "processes.jsonl"
    entries = [json.loads(line) for line in registry.read_text().splitlines() if line.strip()]
    for entry in entries:
        try:
            cwd = psutil.Process(entry["pid"]).cwd()
        except psutil.Error:
            cwd = ""
        if str(folder) in cwd or any(str(folder) in arg for arg in entry["argv"]):
            return int(entry["owner_pid"])
    return None


@pytest.mark.e2e
def test_bench_on_ray_survives_a_killed_actor(tmp_path, postgres_cluster, chromium_path, state_dir, ray_address):
    from tests.test_bench import KEPT, MAPPING, RULES, TRIVIA, bench_args, rule, write_data

    db = postgres_cluster.new_database()
    data = write_data(tmp_path / "test.jsonl", KEPT)
    out = tmp_path / "out"
    results = out / "results.jsonl"
    ray_args = ["--db", db, "--ray", ray_address, "--actors", "2", "--runs-per-actor", "1", "--cpus-per-run", "0.5"]
    scenario = Scenario.model_validate({"name": "bench", "rules": list(RULES.values())})
    with ScriptedServer(scenario) as server:
        command = [CLI, *bench_args(server.base_url, data, out, *ray_args)]
        log = (tmp_path / "bench.log").open("w")
        proc = subprocess.Popen(command, env=cli_env(chromium_path), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 400
        try:
            # Once the trivia site's first test case is recorded, kill the actor evaluating the rest.
            while not (results.exists() and TRIVIA in results.read_text()):
                assert proc.poll() is None, (tmp_path / "bench.log").read_text()
                assert time.monotonic() < deadline, "the trivia site was never evaluated"
                time.sleep(0.1)
            victim = _owner_serving(db, out / "eval" / TRIVIA)
            assert victim is not None and victim != proc.pid
            recorded = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
            assert len([r for r in recorded if r["record_id"] == TRIVIA]) < 4, "killed with trivia cases left"
            groups = owned_groups(db, victim)
            seen = len(server.requests)
            os.kill(victim, signal.SIGKILL)
            proc.wait(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
        after_kill = server.requests[seen:]
        output = (tmp_path / "bench.log").read_text()
        assert proc.returncode == 0, output

        # The outputs of an in-process run: every test case once, with the verdicts the pages give.
        lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        verdicts = {(r["record_id"], r["case_index"]): r["verdict"] for r in lines}
        assert len(lines) == 6 and verdicts == {
            (TRIVIA, 0): "YES",
            (TRIVIA, 1): "PARTIAL",
            (TRIVIA, 2): "NO",
            (TRIVIA, 3): "YES",
            (MAPPING, 0): "START_FAILED",
            (MAPPING, 1): "START_FAILED",
        }
        assert json.loads((out / "summary.json").read_text())["overall"]["accuracy"] == round(100 * 2.5 / 6, 2)
        assert "41.7%" in output and f"{TRIVIA}: appearance 4/5" in output
        # Cases recorded before the kill were kept as they were and not run again.
        for before in recorded:
            assert before in lines
        case_rules = {0: ("enroll-click", "enroll-yes"), 1: ("question-click", "question-partial")}
        case_rules |= {2: ("leaderboard-no",), 3: ("colours-scroll", "colours-verdict")}
        asked_again = {r.rule_index for r in after_kill}
        for before in recorded:
            if before["record_id"] == TRIVIA:
                assert not asked_again & {rule(name) for name in case_rules[before["case_index"]]}, before
        # The runs ran on actors, not in the command's process; the dead actor left nothing running.
        runs = RunIndex(db).list()
        assert {r.run_id for r in runs} == {f"bench-out-{TRIVIA}", f"bench-out-{MAPPING}"}
        assert all(r.pid not in (proc.pid, None) for r in runs)
        assert groups and not [g for g in groups if group_alive(g)]

        # The same command again finds everything done: no model is asked anything.
        seen = len(server.requests)
        again = subprocess.run(command, env=cli_env(chromium_path), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert server.requests[seen:] == [] and "generated earlier, skipped" in again.stdout
        assert [json.loads(line) for line in results.read_text().splitlines() if line.strip()] == lines


@pytest.mark.e2e
def test_bench_evaluate_only_on_ray_scores_sites_made_elsewhere(tmp_path, chromium_path, ray_address):
    from tests.test_bench import DASHBOARD, HOMEPAGE_SERVER, MAPPING, RULES, TRIVIA, TRIVIA_PAGE, bench_args, write_data

    data = write_data(tmp_path / "test.jsonl", {TRIVIA: [0], MAPPING: [0], DASHBOARD: [0]})
    sites = tmp_path / "sites"
    (sites / TRIVIA).mkdir(parents=True)
    (sites / TRIVIA / "index.html").write_text(TRIVIA_PAGE)
    (sites / MAPPING).mkdir()
    (sites / MAPPING / "package.json").write_text(json.dumps({"name": "maps", "scripts": {"start": "node server.js"}}))
    (sites / MAPPING / "server.js").write_text(HOMEPAGE_SERVER)
    out = tmp_path / "scored"
    scenario = Scenario.model_validate({"name": "bench", "rules": list(RULES.values())})
    with ScriptedServer(scenario) as server:
        args = bench_args(server.base_url, data, out, "--evaluate-only", str(sites), "--ray", ray_address)
        result = subprocess.run(
            [CLI, *args, "--actors", "1", "--cpus-per-run", "0.5"],
            env=cli_env(chromium_path),
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert not {r.model for r in server.requests} & {"scripted-coder", "scripted-vlm", "scripted-feedback"}
    # The same figures as the in-process evaluation of these sites (tests/test_bench.py).
    verdicts = {
        line["record_id"]: line["verdict"] for line in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    assert verdicts == {TRIVIA: "YES", MAPPING: "YES", DASHBOARD: "START_FAILED"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["appearance"] == round(8 / 3, 3) and summary["generation"] is None
    assert f"{TRIVIA}: appearance 4/5" in result.stdout


@pytest.mark.e2e
def test_rollout_on_ray_keeps_a_whole_budget_and_a_rerun_continues(tmp_path, chromium_path, ray_address):
    from tests.test_costs import REQUIREMENT, model_flags, tokens_of

    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []}) + "\n")
    db = tmp_path / "webgen.db"
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        command = [
            CLI,
            "rollout",
            *("--data", str(records), "--samples", "2", "--max-steps", "3", "--name", "w", "--profile", "default"),
            *("--out", str(tmp_path / "runs"), "--ray", ray_address, "--actors", "1", "--runs-per-actor", "1"),
            *("--cpus-per-run", "0.5", *model_flags(server.base_url, db)),
        ]
        env = cli_env(chromium_path)
        # One slot: the first trajectory's events, sent back by the actor, spend the budget before the second's turn.
        first = subprocess.run(
            [*command, "--budget-tokens", "1000"], env=env, capture_output=True, text=True, timeout=400
        )
        assert first.returncode == 4, first.stdout + first.stderr
        spent = tokens_of(server.requests)
        assert "1 of 2 trajectories taken up, 1 not started" in first.stderr.replace("\n", " ")
        assert f"{spent:,} tokens spent" in first.stdout  # counted by the driver from the actor's events
        assert [(r.run_id, r.status) for r in RunIndex(db).list()] == [("w-cafe-s0", "finished")]
        before = RunIndex(db).get("w-cafe-s0")
        asked_first = [r for r in server.requests if r.model == "scripted-coder"]
        assert len(asked_first) == before.steps

        # The same command with room for the rest starts the second and asks nothing of the first again.
        seen = len(server.requests)
        second = subprocess.run(
            [*command, "--budget-tokens", str(10 * spent)], env=env, capture_output=True, text=True, timeout=400
        )
        assert second.returncode == 0, second.stdout + second.stderr
        asked_again = [r for r in server.requests[seen:] if r.model == "scripted-coder"]
    runs = {r.run_id: r for r in RunIndex(db).list()}
    assert sorted(runs) == ["w-cafe-s0", "w-cafe-s1"] and all(r.status == "finished" for r in runs.values())
    assert runs["w-cafe-s0"].steps == before.steps and runs["w-cafe-s0"].tokens == before.tokens
    assert len(asked_again) == runs["w-cafe-s1"].steps  # only the new trajectory's coder steps
    assert "1 finished now, 1 finished before" in second.stdout


@pytest.mark.e2e
async def test_bench_generation_on_ray_keeps_a_whole_budget(tmp_path, chromium_path, ray_address):
    from tests.test_costs import REQUIREMENT, charged, priced_context, tokens_of
    from webgen_agent.apps.bench.config import BenchSetup, EvalSettings
    from webgen_agent.apps.bench.service import Generator
    from webgen_agent.apps.cluster.bench import bench_on_ray
    from webgen_agent.core.costs import Budget, Spending
    from webgen_agent.tools.webgen_bench import load_records

    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps({"id": i, "instruction": REQUIREMENT}) + "\n" for i in ("one", "two")))
    out, db, said = tmp_path / "bench", Database.of(tmp_path / "webgen.db"), []
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        context = priced_context(server.base_url, chromium=chromium_path)
        spending = Spending(Budget(budget_usd=0.001))
        generator = Generator(context, out, db_path=db, name="b", workers=1, notify=said.append, spending=spending)
        judge = context.vlm  # evaluation is not run here; its settings only travel with the setup
        evaluation = EvalSettings(agent=judge, appearance=judge, feedback=context.feedback, chromium=chromium_path)
        setup = BenchSetup(out_dir=str(out), name="b", eval_settings=evaluation, context=context)
        cluster = RaySettings(address=ray_address, actors=1, runs_per_actor=1, cpus_per_run=0.5)
        async with bench_on_ray(cluster, setup=setup, db=db, notify=said.append, spending=spending) as remote:
            generated = await generator.generate(load_records(data), remote=remote.generate)
        answered = server.requests
    # The actor's run events reached the driver's count: the second record was never sent.
    assert list(generated) == ["one"] and generated["one"].status == "finished"
    assert generator.not_started == ["two"]
    assert [(r.run_id, r.pid != os.getpid()) for r in RunIndex(db).list()] == [("bench-b-one", True)]  # on the actor
    assert spending.usd == pytest.approx(charged(answered)) and spending.tokens == tokens_of(answered)
    assert "two: not started, the benchmark's budget is spent" in said
    assert said[-1].startswith("budget spent ($") and "1 of 2 instruction(s) generated, 1 not started" in said[-1]


@pytest.mark.e2e
def test_a_rollout_whose_driver_was_killed_continues_when_run_again(
    tmp_path, postgres_cluster, chromium_path, state_dir, ray_address
):
    from tests.test_costs import REQUIREMENT

    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []}) + "\n")
    db = postgres_cluster.new_database()
    env = cli_env(chromium_path)
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        command = [
            CLI,
            "rollout",
            *("--data", str(records), "--samples", "3", "--max-steps", "3", "--name", "k", "--profile", "default"),
            *("--out", str(tmp_path / "runs"), "--db", db, "--ray", ray_address, "--actors", "1"),
            *("--runs-per-actor", "2", "--cpus-per-run", "0.5", *scripted_models(server.base_url)),
        ]
        log = (tmp_path / "first.log").open("w")
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        try:
            # Killed once a trajectory has a checkpointed step (its actors go with the driver's job).
            while not any(asyncio.run(final_state(db, r.run_id)).get("steps") for r in RunIndex(db).list()):
                assert proc.poll() is None, (tmp_path / "first.log").read_text()
                assert time.monotonic() < deadline, "no trajectory got a step"
                time.sleep(0.2)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            # Ray ends the dead driver's actors: their runs are then no longer running.
            while any(r.status == "running" for r in RunIndex(db).list()):
                assert time.monotonic() < deadline + 60, "the dead driver's actors ran on"
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
        kept = {r.run_id: asyncio.run(final_state(db, r.run_id)).get("steps", []) for r in RunIndex(db).list()}
        assert any(kept.values()) and not all(r.status == "finished" for r in RunIndex(db).list())
        # A coder reply that arrived before the kill, its step not yet checkpointed, was kept too.
        replies_kept = sum(kept_coder_replies(db, run_id) for run_id in kept)
        seen = len(server.requests)
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
        assert again.returncode == 0, again.stdout + again.stderr
        asked_again = [r for r in server.requests[seen:] if r.model == "scripted-coder"]
    runs = {r.run_id: r for r in RunIndex(db).list()}
    assert sorted(runs) == [f"k-cafe-s{k}" for k in range(3)] and all(r.status == "finished" for r in runs.values())
    # The steps checkpointed before the kill were kept; the re-run asked the coder only for the rest.
    for run_id, steps in kept.items():
        after = asyncio.run(final_state(db, run_id))["steps"]
        assert [s["completion"] for s in after[: len(steps)]] == [s["completion"] for s in steps]
    assert len(asked_again) == sum(r.steps for r in runs.values()) - sum(len(s) for s in kept.values()) - replies_kept
