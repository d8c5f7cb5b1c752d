"""Cost and budgets as a user meets them: prices from flags and environment, cost in run.json,
``runs``, ``history`` and the report, a run that stops at its budget and is resumed with a larger one,
a rollout whose whole budget stops it from starting runs.

The agent runs as a real CLI process against the scripted model server (landing scenario: a static
site over two coder steps); what each answer cost is recomputed here from the server's own request
log (the usage it reported) and the prices the test gave.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import scripted_models
from webgen_agent.apps.bench.service import Generator
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import TrajectoryDriver, TrajectorySpec
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import RequestRecord, Rule, Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.export import load_trajectories
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.recording import row_fields
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.context import AgentContext, Settings
from webgen_agent.core.costs import Budget, Spending, spent
from webgen_agent.core.errors import ConfigError
from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.routers import route_after_critic
from webgen_agent.tools.models import ModelCallError
from webgen_agent.tools.webgen_bench import load_records

REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."
ROLE_OF = {"scripted-coder": "coder", "scripted-vlm": "vlm", "scripted-feedback": "feedback"}
# USD per million tokens (input, output), different for every role so a mix-up shows.
PRICES = {"coder": (3.0, 15.0), "vlm": (1.25, 5.0), "feedback": (0.5, 1.5)}
CLI = [sys.executable, "-m", "webgen_agent"]


def cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WEBGEN_"))}
    return {**env, **extra}


def model_flags(base_url: str, db: Path) -> list[str]:
    return [
        *scripted_models(base_url),
        "--db",
        str(db),
    ]


def charged(requests: list[RequestRecord]) -> float:
    """What the answers the server sent cost at PRICES (from the usage each one reported)."""
    total = 0.0
    for request in requests:
        if request.status == 200:
            price_in, price_out = PRICES[ROLE_OF[request.model]]
            total += (request.prompt_tokens * price_in + request.completion_tokens * price_out) / 1_000_000
    return total


def tokens_of(requests: list[RequestRecord]) -> int:
    return sum(r.prompt_tokens + r.completion_tokens for r in requests if r.status == 200)


# ---- settings and routing (no run) -----------------------------------------------------------


def test_prices_come_from_flags_and_environment_and_stay_unknown_when_not_given(monkeypatch) -> None:
    monkeypatch.setenv("WEBGEN_PRICE_IN", "2")
    monkeypatch.setenv("WEBGEN_VLM_PRICE_OUT", "8")
    prices = Settings(coder_price_in=5.0).prices()  # an explicit value (a flag) beats the environment
    assert prices.coder.input_usd_per_mtok == 5.0 and prices.coder.output_usd_per_mtok is None
    assert prices.vlm.input_usd_per_mtok == 2.0 and prices.vlm.output_usd_per_mtok == 8.0
    assert prices.feedback.input_usd_per_mtok == 2.0 and prices.feedback.output_usd_per_mtok is None
    assert prices.unknown() == ["coder output", "feedback output"]


def test_a_usd_budget_with_an_unknown_price_is_refused_up_front(monkeypatch) -> None:
    settings = Settings(model="m", base_url="http://localhost:1/v1", price_in=1.0, coder_price_out=2.0)
    with pytest.raises(
        ConfigError, match=r"^--budget-usd needs every model's price, unknown: vlm output, feedback output"
    ):
        settings.to_context(budget_usd=1.0)
    # The same rule holds for a context made anywhere else (Studio's form, an embedding host).
    with pytest.raises(ValueError, match="unknown: coder input"):
        AgentContext.model_validate({**settings.to_context().model_dump(), "prices": {}, "budget_usd": 1.0})
    assert settings.to_context(budget_tokens=10).budget_tokens == 10  # tokens need no price


def test_the_budget_is_checked_before_the_next_coder_step() -> None:
    context = Settings(model="m", base_url="http://localhost:1/v1", price_in=1.0, price_out=1.0).to_context()
    step = {"index": 0, "role": "generator", "tokens": {"generator": {"input": 600, "output": 400, "calls": 1}}}
    state = {"steps": [{**step, "cost": {"generator": 0.001}}], "messages": [{"role": "user", "hash": "h"}]}
    assert route_after_critic(state, context) == "refiner"  # no budget
    assert route_after_critic(state, context.model_copy(update={"budget_tokens": 1000})) == "budget"
    assert route_after_critic(state, context.model_copy(update={"budget_tokens": 1001})) == "refiner"
    assert route_after_critic(state, context.model_copy(update={"budget_usd": 0.001})) == "budget"
    assert route_after_critic(state, context.model_copy(update={"budget_usd": 0.0011})) == "refiner"
    unpriced = {**state, "steps": [{**step, "cost": {"generator": None}}]}  # a price was unknown then
    assert route_after_critic(unpriced, context.model_copy(update={"budget_usd": 5.0})) == "budget"
    older = {**state, "steps": [step]}  # recorded before costs were: tokens without a cost are unknown
    assert spent(older["steps"]) == (None, 1000)
    assert route_after_critic(older, context.model_copy(update={"budget_usd": 5.0})) == "budget"
    assert route_after_critic(older, context.model_copy(update={"budget_tokens": 5000})) == "refiner"


def test_spending_counts_progress_events_against_a_whole_budget() -> None:
    spending = Spending(Budget(budget_usd=0.01, budget_tokens=None))
    spending.add({"node": "generator", "input_tokens": 100, "output_tokens": 50, "cost_usd": 0.004})
    assert spending.reached() is None and spending.tokens == 150
    spending.add({"node": "screenshot_judge", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.006})
    assert spending.reached() == "$0.0100 spent of a $0.0100 budget"
    assert spending.line() == "$0.0100 and 165 tokens spent"


def test_calls_without_token_counts_keep_no_budget() -> None:
    """An endpoint that sends no token counts: its calls count no tokens and no cost, so neither a
    token budget nor a USD budget can be kept over them (never guessed, as an unknown price)."""
    context = Settings(model="m", base_url="http://localhost:1/v1", price_in=1.0, price_out=1.0).to_context()
    step = {
        "index": 0,
        "role": "generator",
        "tokens": {"generator": {"input": 0, "output": 0, "calls": 1, "uncounted": 1}},
        "cost": {"generator": None},
    }
    state = {"steps": [step], "messages": [{"role": "user", "hash": "h"}]}
    assert route_after_critic(state, context) == "refiner"  # no budget: the run goes on
    assert route_after_critic(state, context.model_copy(update={"budget_tokens": 10**9})) == "budget"
    assert route_after_critic(state, context.model_copy(update={"budget_usd": 100.0})) == "budget"
    spending = Spending(Budget(budget_tokens=10**9))
    spending.add({"node": "generator", "input_tokens": 0, "output_tokens": 0, "uncounted_calls": 1, "priced": False})
    assert "without token counts" in (spending.reached() or "")


@pytest.mark.e2e
def test_a_budget_stops_a_run_whose_endpoint_sends_no_token_counts_and_resume_goes_on_without_it(
    tmp_path, chromium_path
) -> None:
    """The budget is not skipped in silence: the run stops at the first step boundary saying why, and
    `resume --no-budget` finishes it; no step is asked again."""
    db, out = tmp_path / "webgen.db", tmp_path / "out"
    env = clean_env(WEBGEN_CHROMIUM=chromium_path)
    landing = Scenario.load(scenario_path("landing"))
    uncounted = landing.model_copy(update={"rules": [r.model_copy(update={"usage": False}) for r in landing.rules]})
    with ScriptedServer(uncounted) as server:
        flags = model_flags(server.base_url, db)
        first = cli(
            "run", REQUIREMENT, "--run-id", "n", "--out", str(out), "--budget-tokens", "1000000", *flags, env=env
        )
        assert first.returncode == 4, first.stdout + first.stderr
        assert "without token counts" in first.stderr and "--no-budget" in first.stderr, first.stderr
        assert [r.turn for r in server.requests if r.model == "scripted-coder"] == [0]
        step = json.loads((out / "run.json").read_text())["steps"][0]
        assert step["tokens"]["generator"]["uncounted"] == 1
        contradicting = cli("resume", "n", "--no-budget", "--budget-tokens", "5", *flags, env=env)
        assert contradicting.returncode == 2 and "contradict" in contradicting.stderr
        resumed = cli("resume", "n", "--no-budget", *flags, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert [r.turn for r in server.requests if r.model == "scripted-coder"] == [0, 1]
    assert json.loads((out / "run.json").read_text())["status"] == "finished"


@pytest.mark.e2e
def test_cli_refuses_a_usd_budget_without_prices_before_anything_runs(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    flags = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db)]
    result = cli("run", "A blog", "--budget-usd", "1", "--out", str(tmp_path / "out"), *flags, env=clean_env())
    assert result.returncode == 2, result.stderr
    assert "--budget-usd needs every model's price, unknown: coder input" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not RunIndex(db).list()
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "a", "instruction": "A blog", "ui_instruct": []}) + "\n")
    result = cli("rollout", "--data", str(records), "--budget-usd", "1", *flags, env=clean_env())
    assert result.returncode == 2 and "unknown: coder input" in result.stderr, result.stderr
    result = cli(
        "bench", "--data", str(records), "--out", str(tmp_path / "b"), "--budget-usd", "1", *flags, env=clean_env()
    )
    assert result.returncode == 2 and "unknown: coder input" in result.stderr, result.stderr


# ---- real runs ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_run_stops_at_its_budget_and_a_larger_budget_finishes_it(tmp_path, chromium_path) -> None:
    db = tmp_path / "webgen.db"
    out = tmp_path / "out"
    # Coder and vision prices by flag, the feedback model's by environment variable.
    env = clean_env(
        WEBGEN_CHROMIUM=chromium_path,
        WEBGEN_FEEDBACK_PRICE_IN=str(PRICES["feedback"][0]),
        WEBGEN_FEEDBACK_PRICE_OUT=str(PRICES["feedback"][1]),
    )
    prices = [
        *("--coder-price-in", str(PRICES["coder"][0]), "--coder-price-out", str(PRICES["coder"][1])),
        *("--vlm-price-in", str(PRICES["vlm"][0]), "--vlm-price-out", str(PRICES["vlm"][1])),
    ]
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = model_flags(server.base_url, db)
        first = cli(
            "run", REQUIREMENT, "--run-id", "b", "--out", str(out), "--budget-usd", "0.0001", *prices, *flags, env=env
        )
        assert first.returncode == 4, first.stdout + first.stderr
        assert "budget spent" in first.stderr and "webgen-agent resume b --budget-usd" in first.stderr
        assert "run b (budget $0.0001)" in first.stdout  # the progress view's title
        before = server.requests
        assert [r.turn for r in before if r.model == "scripted-coder"] == [0], "stopped before the second coder step"

        record = RunIndex(db).get("b")
        assert record is not None and record.status == "budget"
        summary = json.loads((out / "run.json").read_text())
        assert summary["status"] == "budget" and len(summary["steps"]) == 1
        assert summary["cost_usd"] == pytest.approx(charged(before), rel=1e-9)
        assert summary["input_tokens"] + summary["output_tokens"] == tokens_of(before)
        assert record.cost_usd == pytest.approx(charged(before)) and record.tokens == tokens_of(before)
        # Per node, each at its role's prices: the coder's turn, the test instruction the feedback
        # model wrote beside it, the judge's vision call.
        step = summary["steps"][0]
        assert set(step["cost"]) == set(step["tokens"]) == {"generator", "test_instruction", "screenshot_judge"}
        for node, model in [("generator", "coder"), ("test_instruction", "feedback"), ("screenshot_judge", "vlm")]:
            calls = [r for r in before if r.model == f"scripted-{model}"]
            assert step["cost"][node] == pytest.approx(charged(calls)), node
            assert step["tokens"][node]["input"] + step["tokens"][node]["output"] == tokens_of(calls), node
        assert step["cost_usd"] == pytest.approx(sum(step["cost"].values()))

        # Every reader of statuses: a rollout or bench re-run continues it, exports leave it out unless asked.
        driver = TrajectoryDriver(
            context=scripted_context(server.base_url), db_path=Database.of(db), out_dir=tmp_path, listener=None
        )
        spec = TrajectorySpec(run_id="b", group_id="", sample=0, requirement=REQUIREMENT)
        assert asyncio.run(driver.plan_action(spec)) == "resume"
        assert asyncio.run(load_trajectories(db)) == []
        assert [t.run.run_id for t in asyncio.run(load_trajectories(db, include_unfinished=True))] == ["b"]

        # A thread LangGraph's server runs is recorded by its checkpointer, from the saved values.
        fields = row_fields(asyncio.run(final_state(db, "b")))
        assert fields["status"] == "budget" and fields["cost_usd"] == pytest.approx(charged(before))

        listed = cli("runs", "--json", "--db", str(db), env=env)
        row = json.loads(listed.stdout.strip().splitlines()[0])
        assert row["status"] == "budget" and row["cost_usd"] == pytest.approx(charged(before))

        # Resumed with the same budget: still over it, said in one line; nothing is asked of the models.
        again = cli("resume", "b", *flags, env=env)
        assert again.returncode == 1 and "still over it" in again.stderr, again.stderr
        assert len(server.requests) == len(before)

        # A larger budget (the recorded prices are kept) finishes the run; no step is asked again.
        resumed = cli("resume", "b", "--budget-usd", "5", *flags, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        everything = server.requests
    assert [r.turn for r in everything if r.model == "scripted-coder"] == [0, 1]
    record = RunIndex(db).get("b")
    assert record is not None and record.status == "finished"
    summary = json.loads((out / "run.json").read_text())
    assert summary["status"] == "finished" and len(summary["steps"]) == 2
    assert summary["cost_usd"] == pytest.approx(charged(everything), rel=1e-9)
    assert sum(s["cost_usd"] for s in summary["steps"]) == pytest.approx(charged(everything))
    assert record.cost_usd == pytest.approx(charged(everything)) and record.tokens == tokens_of(everything)
    gui = summary["steps"][1]["cost"][
        "gui_tester"
    ]  # the GUI agent's calls at the vision price, the verdict's at feedback's
    tested = [r for r in everything[len(before) :] if r.agent_step or r.model == "scripted-feedback"]
    assert gui == pytest.approx(charged(tested))

    history = cli("history", "b", "--db", str(db), env=env)
    assert history.returncode == 0, history.stderr
    assert f"${charged(everything):.4f}" in history.stdout
    report = cli("report", "b", "--db", str(db), env=env)
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()
    assert f"${charged(everything):.4f}" in page and "Time, tokens and cost per node" in page


@pytest.mark.e2e
def test_a_rollout_with_a_whole_budget_stops_starting_runs(tmp_path, chromium_path) -> None:
    db = tmp_path / "webgen.db"
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"id": "cafe", "instruction": REQUIREMENT, "ui_instruct": []}) + "\n")
    env = clean_env(WEBGEN_CHROMIUM=chromium_path)
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        command = [
            "rollout",
            *("--data", str(records), "--samples", "3", "--workers", "1", "--max-steps", "3", "--name", "w"),
            *("--profile", "default", "--out", str(tmp_path / "runs")),
            *model_flags(server.base_url, db),
        ]
        first = cli(*command, "--budget-tokens", "1000", env=env)
        assert first.returncode == 4, first.stdout + first.stderr
        spent = tokens_of(server.requests)
        assert "1 of 3 trajectories taken up, 2 not started" in first.stderr
        assert f"{spent:,} tokens spent" in first.stdout
        assert [r.run_id for r in RunIndex(db).list()] == ["w-cafe-s0"]
        assert RunIndex(db).get("w-cafe-s0").status == "finished"

        # The same command with room for the rest continues where it stopped.
        second = cli(*command, "--budget-tokens", str(10 * spent), env=env)
        assert second.returncode == 0, second.stdout + second.stderr
    assert sorted(r.run_id for r in RunIndex(db).list()) == ["w-cafe-s0", "w-cafe-s1", "w-cafe-s2"]
    assert all(r.status == "finished" for r in RunIndex(db).list())


def priced_context(base_url: str, **overrides: object) -> AgentContext:
    prices = {role: {"input_usd_per_mtok": i, "output_usd_per_mtok": o} for role, (i, o) in PRICES.items()}
    return scripted_context(base_url, max_steps=3, prices=prices, **overrides)


@pytest.mark.e2e
async def test_a_failed_run_still_shows_what_it_spent(tmp_path, chromium_path) -> None:
    landing = Scenario.load(scenario_path("landing"))
    refused = Rule.model_validate({"model": "scripted-coder", "turn": 1, "fault": {"status": 400, "message": "no"}})
    with ScriptedServer(Scenario(name="refused", rules=[refused, *landing.rules])) as server:
        with pytest.raises(ModelCallError):
            await run_requirement(
                REQUIREMENT,
                context=priced_context(server.base_url),
                run_id="f",
                out_dir=tmp_path / "out",
                db_path=tmp_path / "webgen.db",
            )
        answered = server.requests
    record = RunIndex(tmp_path / "webgen.db").get("f")
    assert record is not None and record.status == "failed"
    assert record.tokens == tokens_of(answered) > 0
    assert record.cost_usd == pytest.approx(charged(answered))


@pytest.mark.e2e
async def test_bench_generation_stops_starting_runs_once_its_budget_is_spent(tmp_path, chromium_path) -> None:
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps({"id": i, "instruction": REQUIREMENT}) + "\n" for i in ("one", "two", "three")))
    said: list[str] = []
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        spending = Spending(Budget(budget_usd=0.001))
        generator = Generator(
            priced_context(server.base_url),
            tmp_path / "bench",
            db_path=tmp_path / "webgen.db",
            name="b",
            workers=1,
            notify=said.append,
            spending=spending,
        )
        generated = await generator.generate(load_records(data))
        answered = server.requests
    assert list(generated) == ["one"] and generated["one"].status == "finished"
    assert generator.not_started == ["two", "three"]
    assert [r.run_id for r in RunIndex(tmp_path / "webgen.db").list()] == ["bench-b-one"]
    assert spending.usd == pytest.approx(charged(answered)) and spending.tokens == tokens_of(answered)
    assert "two: not started, the benchmark's budget is spent" in said
    assert said[-1].startswith("budget spent ($") and "1 of 3 instruction(s) generated, 2 not started" in said[-1]
