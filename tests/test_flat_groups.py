"""Training data is never silently empty: a group whose rewards are all equal (every advantage 0) is
named with its cause by ``export`` (and can be left out), ``train`` refuses data with no signal
unless told, and a judge's failure keeps its reason in the step (``history`` shows it).

The database is written the way runs store it (checkpointer, blob store, runs table): group
``flat`` is two trajectories whose screenshot judge never gave a usable answer (every grade 0),
group ``live`` two trajectories with different grades.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers import save_finished_run
from webgen_agent.apps.cli.main import app
from webgen_agent.checkpoints.flat_groups import flat_groups
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import load_trajectories
from webgen_agent.nodes.screenshot_judge import judge_failure

JUDGE_FAILED = "unusable answer after 3 attempt(s): no JSON object in the reply"
SITE = '<boltArtifact id="s"><boltAction type="file" filePath="index.html"><h1>x</h1></boltAction></boltArtifact>'


def step(store: BlobStore, index: int, score: int, judge_error: str = "") -> dict[str, Any]:
    return {
        "index": index,
        "role": "generator" if index == 0 else "refiner",
        "action": "edit",
        "parent": None if index == 0 else index - 1,
        "tests_step": None,
        "prompt_len": 2,
        "prompt": store.put_json(
            [{"role": "system", "hash": store.put_text("Build sites.")}, {"role": "user", "hash": store.put_text("A")}]
        ),
        "completion": store.put_text(SITE),
        "summary": "wrote index.html",
        "format_ok": True,
        "problems": [],
        "screenshot_score": score,
        "gui_score": 0,
        "gui_passed": None,
        "errored": score <= 1,
        "judge_error": judge_error,
        "execution": {"ok": True, "stage": None, "error": "", "url": "http://127.0.0.1:1/"},
        "timings": {},
        "tokens": {},
        "model": "m",
    }


async def write_runs(db: Path) -> None:
    store, runs = BlobStore(db), RunIndex(db)
    plan = {"flat": [[0, 0], [0, 0]], "live": [[2, 4], [3, 3]]}
    async with open_checkpointer(db) as saver:
        for group, trajectories in plan.items():
            for sample, scores in enumerate(trajectories):
                run_id = f"{group}-s{sample}"
                failed = JUDGE_FAILED if group == "flat" else ""
                values = {
                    "run_id": run_id,
                    "group_id": group,
                    "requirement": "A",
                    "profile": "default",
                    "steps": [step(store, i, score, failed) for i, score in enumerate(scores)],
                    "status": "finished",
                }
                await save_finished_run(saver, runs, values)
    store.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("flat") / "runs.db"
    asyncio.run(write_runs(path))
    return path


def cli(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def flat(output: str) -> str:
    return " ".join(output.split())


def test_flat_groups_are_found_with_their_cause(db: Path) -> None:
    found = flat_groups(asyncio.run(load_trajectories(db)))
    assert [g.group_id for g in found] == ["flat"]
    group = found[0]
    assert (group.reward, group.entries, group.trajectories, group.judge_failures) == (0.0, 4, 2, 4)
    assert group.reasons == [JUDGE_FAILED]
    assert "4 judge failures (unusable answer after 3 attempt(s)" in group.line()


def test_export_warns_and_can_drop_flat_groups(db: Path, tmp_path: Path) -> None:
    kept = cli("export", "--format", "step-grpo", "--out", tmp_path / "all.jsonl", "--db", db)
    assert kept.exit_code == 0, kept.output
    said = flat(kept.output)
    assert "1 of 2 groups have zero reward variance" in said and "--drop-flat-groups leaves them out" in said
    assert "flat: all 4 rewards of 2 trajectories are 0: 4 judge failures" in said
    groups = {json.loads(line)["group_id"] for line in (tmp_path / "all.jsonl").read_text().splitlines()}
    assert groups == {"flat", "live"}

    dropped = cli("export", "--format", "step-grpo", "--drop-flat-groups", "--out", tmp_path / "some.jsonl", "--db", db)
    assert dropped.exit_code == 0, dropped.output
    assert "left out (--drop-flat-groups)" in flat(dropped.output)
    records = [json.loads(line) for line in (tmp_path / "some.jsonl").read_text().splitlines()]
    assert {r["group_id"] for r in records} == {"live"} and any(r["advantage"] for r in records)


def test_train_refuses_data_without_signal_unless_told(db: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the [train] extra (torch, transformers, peft) is not installed")
    data = tmp_path / "flat.jsonl"
    assert cli("export", "--format", "step-grpo", "--groups", "flat", "--out", data, "--db", db).exit_code == 0
    # The model directory is checked before anything loads; an empty one lets the data's check be reached.
    empty_model = tmp_path / "empty-model"
    empty_model.mkdir()
    refused = cli("train", "--data", data, "--model", empty_model, "--out", tmp_path / "never")
    assert refused.exit_code == 2
    assert "every advantage of the 4 records in 1 groups is 0" in flat(refused.output)
    assert "--allow-no-signal" in flat(refused.output)
    # Told to: the data passes the signal check; a missing model directory is still refused.
    told = cli(
        "train", "--data", data, "--model", tmp_path / "no-model", "--out", tmp_path / "never", "--allow-no-signal"
    )
    assert told.exit_code == 2 and "no-model: no such directory" in flat(told.output), told.output


def test_a_failed_judge_keeps_its_reason_and_history_shows_it(db: Path) -> None:
    assert judge_failure(None, None) == ""
    assert judge_failure("description: HTTP 500", None, "grade: no JSON") == "description: HTTP 500; grade: no JSON"
    shown = cli("history", "flat-s0", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert f"step 1: the screenshot judge failed: {JUDGE_FAILED}" in flat(shown.output)


def test_the_report_says_the_judge_failed_and_why() -> None:
    from webgen_agent.apps.report.html import render_report
    from webgen_agent.apps.report.model import RunReport, StepReport, Totals

    failed = StepReport(index=0, role="generator", action="edit", execution_ok=True, judge_error=JUDGE_FAILED)
    report = RunReport(
        run_id="r",
        requirement="x",
        status="finished",
        chosen_step=None,
        steps=[failed],
        totals=Totals(steps=1, seconds=0, input_tokens=0, output_tokens=0, model_calls=0),
    )
    assert 'Screenshot judge</b> 0/5: <span class="why">the judge failed: unusable answer' in render_report(report)


@pytest.mark.e2e
def test_a_rollout_of_static_sites_under_the_upstream_profile_says_why_it_scored_nothing(tmp_path: Path) -> None:
    """Rollouts default to the upstream profile, which runs npm projects only: a coder that writes
    static sites scores 0 on every step, and the rollout's summary names the cause and the flag."""
    from tests.helpers import scripted_models
    from tests.test_cli import cli
    from webgen_agent.apps.demo import scenario_path
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario

    records = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
    with ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
        result = cli(
            "rollout",
            *("--data", str(records), "--ids", "recipes", "--samples", "2", "--max-steps", "2"),
            *("--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"), "--no-sandbox"),
            *scripted_models(server.base_url),
            timeout=600,
        )
    assert result.returncode == 0, result.stderr
    assert "1 of 1 groups with finished trajectories have zero reward variance" in result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.strip().startswith("recipes:")]
    assert "all 4 rewards of 2 trajectories are 0" in line and "4 edits that did not run" in line
    assert "4 of them had no package.json: this profile runs npm projects only" in line
    assert "`--profile default` also serves static sites" in line
