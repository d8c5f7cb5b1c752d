"""``webgen-agent bench`` end to end: scripted models over HTTP, real sites, real browser-use sessions.

Two real records of the shipped sample (000008 trivia contest, 000002 neighborhood mapping) with a
few of their real test cases each. The scripted coder writes a static trivia page for the first and,
for the second, a project whose dev script exits at once (Start Failed). The scripted evaluation
agent clicks through the trivia page and answers YES, PARTIAL or NO from what the page really shows;
in one case it runs out of actions and the feedback model decides.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import scripted_models
from tests.postgres import fresh_db
from webgen_agent.apps.cli.main import app
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex

SAMPLE = Path(__file__).parent / "data" / "webgen-bench-sample.jsonl"
TRIVIA, MAPPING, DASHBOARD = "000008", "000002", "000003"
# Real test cases of the sample kept per record (indices into its ui_instruct).
KEPT = {TRIVIA: [0, 1, 4, 5], MAPPING: [0, 1]}

TRIVIA_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Trivia Arena</title>
<style>body{background:beige;font-family:sans-serif} button{background:saddlebrown;color:#fff}</style></head>
<body>
<h1>Trivia Arena</h1>
<section><h2>Contests</h2>
  <div>General Knowledge Cup <button id="enroll" type="button">Enroll</button></div>
  <p id="status"></p>
  <button id="start" type="button">Start contest</button>
  <div id="question"></div>
</section>
<section><h2>Leaderboard</h2><p>No scores yet.</p></section>
<script>
// Only the page's script can produce these texts: the scripted agent's answers depend on them.
document.getElementById('enroll').onclick = () => {
  document.getElementById('status').textContent = 'Enrolled: ' + 'General Knowledge Cup';
};
document.getElementById('start').onclick = () => {
  document.getElementById('question').textContent = 'Question ' + 1 + ': What is the capital of France?';
};
</script>
<div style="height: 2000px"></div>
</body></html>
"""

NEVER_STARTS = json.dumps(
    {
        "name": "maps",
        "private": True,
        "scripts": {"dev": "node -e \"console.error('config missing'); process.exit(1)\""},
    }
)


def artifact(files: dict[str, str]) -> str:
    actions = "\n".join(f'<boltAction type="file" filePath="{p}">\n{text}\n</boltAction>' for p, text in files.items())
    return f'<boltArtifact id="site" title="Site">\n{actions}\n</boltArtifact>'


def done(text: str, success: bool = True) -> dict:
    return {"agent": {"actions": [{"done": {"text": text, "success": success}}]}}


ENROLL = "enroll in the first contest"
QUESTION = "view the first question"
LEADERBOARD = "Access the leaderboard"
COLOURS = "'beige' as the background color"
HOMEPAGE = "Navigate to the homepage of the neighborhood"
CHECKED_TASK = "Find the page's main heading"

# name -> rule; names let the tests find which rule answered a request.
RULES: dict[str, dict] = {
    # First: the grader's request holds the whole instruction, which other rules' phrases come from.
    # WebGen-Bench's form: free text, then "Grade: N" (the first digit after "Grade" is read).
    "appearance": {
        "model": "scripted-eval-vlm",
        "contains": ["Modernness and beauty"],
        "content": "Analysis: renders cleanly, on topic; tidy but plain (2 of 4 criteria excellent).\n\nGrade: 4",
    },
    # -- the agent (generation) --
    "coder-trivia": {
        "model": "scripted-coder",
        "turn": 0,
        "contains": ["trivia contest"],
        "content": "Here is the site.\n" + artifact({"index.html": TRIVIA_PAGE}),
    },
    "coder-mapping": {
        "model": "scripted-coder",
        "turn": 0,
        "contains": ["neighborhood mapping"],
        "content": artifact({"package.json": NEVER_STARTS}),
    },
    "coder-finish": {"model": "scripted-coder", "content": "finish"},
    "test-instruction": {
        "model": "scripted-feedback",
        "schema": "TestInstruction",
        "json": {"instruction": "Use every function of the site. Answer YES or NO."},
    },
    "judge": {
        "model": "scripted-vlm",
        "schema": "ScreenshotJudgement",
        "json": {"description": "A plain trivia page.", "score": 3, "suggestions": ["Add colour."]},
    },
    # -- the evaluation: GUI agent steps, by test case and by what the page shows --
    "enroll-yes": {
        "model": "scripted-eval-vlm",
        "contains": [ENROLL],
        "page_contains": ["Enrolled: General Knowledge Cup"],
        **done("YES - the confirmation 'Enrolled: General Knowledge Cup' appeared."),
    },
    "enroll-click": {
        "model": "scripted-eval-vlm",
        "turn": 0,
        "contains": [ENROLL],
        "agent": {"actions": [{"click": {"target": "Enroll"}}], "next_goal": "Check the confirmation."},
    },
    "enroll-no": {"model": "scripted-eval-vlm", "contains": [ENROLL], **done("NO - no confirmation appeared.", False)},
    "question-partial": {
        "model": "scripted-eval-vlm",
        "contains": [QUESTION],
        "page_contains": ["Question 1:"],
        **done("PARTIAL - the first question is shown, but without answer options."),
    },
    "question-click": {
        "model": "scripted-eval-vlm",
        "turn": 0,
        "contains": [QUESTION],
        "agent": {"actions": [{"click": {"target": "Start contest"}}]},
    },
    "question-no": {"model": "scripted-eval-vlm", "contains": [QUESTION], **done("NO - no question appeared.", False)},
    "leaderboard-no": {
        "model": "scripted-eval-vlm",
        "contains": [LEADERBOARD],
        **done("NO - the leaderboard lists no ranking and no scores.", False),
    },
    # Three scrolls use up the whole budget of 3 actions: no final answer, the feedback model decides.
    "colours-scroll": {
        "model": "scripted-eval-vlm",
        "contains": [COLOURS],
        "agent": {"actions": [{"scroll": "down"}, {"scroll": "up"}, {"scroll": "down"}]},
    },
    "colours-verdict": {
        "model": "scripted-eval-feedback",
        "schema": "CaseVerdict",
        "contains": [COLOURS],
        "json": {"verdict": "YES", "reason": "Beige background and saddle-brown buttons are visible."},
    },
    "homepage-yes": {
        "model": "scripted-eval-vlm",
        "contains": [HOMEPAGE],
        **done("YES - the homepage offers demographic, economic and crime comparisons."),
    },
    # -- the loops that check requirements (bench --loop single): written by the agent's feedback model --
    "requirements": {
        "model": "scripted-feedback",
        "schema": "RequirementList",
        "json": {"requirements": [{"task": CHECKED_TASK, "expected_result": "A heading reads 'Trivia Arena'."}]},
    },
    "check-yes": {"model": "scripted-vlm", "contains": [CHECKED_TASK], **done("YES - the heading reads Trivia Arena.")},
}
RULE_NAMES = list(RULES)


def rule(name: str) -> int:
    return RULE_NAMES.index(name)


def write_data(path: Path, kept: dict[str, list[int]]) -> Path:
    """A derived data file: the sample's records in ``kept``, with only the listed test cases."""
    with path.open("w") as handle:
        for line in SAMPLE.read_text().splitlines():
            record = json.loads(line)
            if record["id"] in kept:
                record["ui_instruct"] = [record["ui_instruct"][i] for i in kept[record["id"]]]
                handle.write(json.dumps(record) + "\n")
    return path


def bench_args(base_url: str, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "bench",
        "--data",
        str(data),
        "--out",
        str(out),
        "--workers",
        "2",
        *scripted_models(base_url),
        "--max-steps",
        "2",
        "--eval-vlm-model",
        "scripted-eval-vlm",
        "--eval-feedback-model",
        "scripted-eval-feedback",
        "--eval-max-actions",
        "3",
        # The stricter verdict rule, so that a run without a final answer is judged by the feedback model.
        "--eval-verdict",
        "strict",
        *extra,
    ]


def invoke(args: list[str]):
    # Each invocation runs its own event loop (asyncio.run), as separate `webgen-agent` processes would.
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def recompute(results: list[dict], sites: list[dict], records: int) -> dict:
    """The summary figures, computed here from the raw lines, independently of the package."""

    def figures(lines: list[dict]) -> dict:
        count = Counter(line["verdict"] for line in lines)
        n = len(lines)
        return {
            "test_cases": n,
            "accuracy": round(100 * (count["YES"] + 0.5 * count["PARTIAL"]) / n, 2),
            "yes_rate": round(100 * count["YES"] / n, 2),
            "partial_rate": round(100 * count["PARTIAL"] / n, 2),
            "no_rate": round(100 * count["NO"] / n, 2),
            "start_failed_rate": round(100 * count["START_FAILED"] / n, 2),
        }

    groups: dict[str, dict[str, list[dict]]] = {
        "by_instruction_category": defaultdict(list),
        "by_case_category": defaultdict(list),
    }
    for line in results:
        groups["by_instruction_category"][line["instruction_category"]].append(line)
        groups["by_case_category"][line["case_category"]].append(line)
    return {
        "overall": figures(results),
        **{name: {k: figures(v) for k, v in group.items()} for name, group in groups.items()},
        "appearance": round(sum(s["appearance"] if s["started"] else 0 for s in sites) / records, 3),
    }


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def bench_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, chromium_path: str):
    """The benchmark run once per store: its own folder's SQLite file, or --db on PostgreSQL."""
    os.environ["WEBGEN_CHROMIUM"] = chromium_path
    base = tmp_path_factory.mktemp("bench")
    db_args = [] if request.param == "sqlite" else ["--db", fresh_db(request, base)]
    data = write_data(base / "test.jsonl", KEPT)
    out = base / "out"
    scenario = Scenario.model_validate({"name": "bench", "rules": list(RULES.values())})
    with ScriptedServer(scenario) as server:
        first = invoke(bench_args(server.base_url, data, out, *db_args))
        requests = list(server.requests)
        yield {
            "out": out,
            "data": data,
            "server": server,
            "output": first.output,
            "requests": requests,
            "db_args": db_args,
        }


# ---- unit ----------------------------------------------------------------------------------------


# ---- end to end ------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_bench_generates_evaluates_and_scores(bench_run) -> None:
    out = bench_run["out"]
    results = read_lines(out / "results.jsonl")
    by_case = {(r["record_id"], r["case_index"]): r for r in results}
    assert len(results) == 6 and len(by_case) == 6

    # Real GUI sessions on the generated site: the answers depended on what the page's script showed.
    assert by_case[(TRIVIA, 0)]["verdict"] == "YES" and by_case[(TRIVIA, 0)]["source"] == "agent"
    assert "Enrolled" in by_case[(TRIVIA, 0)]["final_answer"]
    assert by_case[(TRIVIA, 1)]["verdict"] == "PARTIAL"
    assert by_case[(TRIVIA, 2)]["verdict"] == "NO"
    colours = by_case[(TRIVIA, 3)]
    assert (colours["verdict"], colours["source"], colours["final_answer"]) == ("YES", "feedback", None)
    assert colours["actions"] == 3 and colours["stopped_reason"] == "max_actions"
    assert all(by_case[(TRIVIA, i)]["actions"] <= 3 for i in range(4))
    for index in range(4):
        line = by_case[(TRIVIA, index)]
        assert line["seconds"] > 0 and line["input_tokens"] > 1000 and line["error"] is None
        assert line["task"] and line["instruction_category"] == "User Interaction"

    # The mapping project's dev script exits at once: Start Failed for all its cases, appearance 0.
    for index in range(2):
        line = by_case[(MAPPING, index)]
        assert line["verdict"] == "START_FAILED" and "exited with code 1" in line["reason"]
    sites = {s["record_id"]: s for s in read_lines(out / "sites.jsonl")}
    assert sites[MAPPING]["started"] is False and sites[MAPPING]["appearance"] == 0
    assert sites[TRIVIA]["started"] is True and sites[TRIVIA]["appearance"] == 4
    assert (out / sites[TRIVIA]["screenshot"]).read_bytes().startswith(b"\x89PNG")

    # The generated sites were kept per record id; the runs are named after the records.
    assert "Trivia Arena" in (out / "sites" / TRIVIA / "index.html").read_text()
    assert (out / "sites" / MAPPING / "package.json").is_file()
    generated = {g["record_id"]: g for g in read_lines(out / "generation.jsonl")}
    assert generated[TRIVIA]["run_id"] == f"bench-out-{TRIVIA}" and generated[TRIVIA]["status"] == "finished"
    assert generated[TRIVIA]["input_tokens"] > 0 and generated[MAPPING]["steps"] == 2


@pytest.mark.e2e
def test_summary_matches_an_independent_recount(bench_run) -> None:
    out = bench_run["out"]
    summary = json.loads((out / "summary.json").read_text())
    expected = recompute(read_lines(out / "results.jsonl"), read_lines(out / "sites.jsonl"), records=2)
    for key in ("overall", "by_instruction_category", "by_case_category"):
        got = summary[key] if key == "overall" else {k: v for k, v in summary[key].items()}
        want = expected[key]
        if key == "overall":
            assert {k: got[k] for k in want} == want
        else:
            assert set(got) == set(want)
            for name in want:
                assert {k: got[name][k] for k in want[name]} == want[name], name
    assert summary["appearance"] == expected["appearance"] == 2.0
    # 2 YES + 0.5 x 1 PARTIAL over 6 test cases
    assert summary["overall"]["accuracy"] == round(100 * 2.5 / 6, 2)
    assert summary["sites_started"] == 1 and summary["test_cases"] == 6 and summary["instructions"] == 2
    assert summary["models"] == {
        "agent": "scripted-eval-vlm",
        "appearance": "scripted-eval-vlm",
        "feedback": "scripted-eval-feedback",
    }
    assert summary["generation"]["units"] == 2 and summary["evaluation"]["units"] == 6
    assert "accuracy" in bench_run["output"] and "41.7%" in bench_run["output"]


@pytest.mark.e2e
def test_evaluation_uses_its_own_models(bench_run) -> None:
    requests = bench_run["requests"]
    by_rule = Counter(r.rule_index for r in requests)
    assert all(r.status == 200 for r in requests), [r for r in requests if r.status != 200]
    # The agent's roles generated; only the evaluation roles evaluated.
    for name in ("enroll-yes", "enroll-click", "question-partial", "leaderboard-no", "colours-scroll", "appearance"):
        assert {r.model for r in requests if r.rule_index == rule(name)} == {"scripted-eval-vlm"}, name
    assert by_rule[rule("colours-verdict")] == 1 and by_rule[rule("appearance")] == 1
    assert by_rule[rule("judge")] == 1 and by_rule[rule("enroll-no")] == 0 and by_rule[rule("question-no")] == 0
    assert {r.model for r in requests if r.agent_step} == {"scripted-eval-vlm"}


@pytest.mark.e2e
def test_rerun_redoes_nothing_and_an_interrupted_run_continues(bench_run) -> None:
    out, data, server = bench_run["out"], bench_run["data"], bench_run["server"]
    results_before = (out / "results.jsonl").read_text()

    # Same command again, even with the generation records and copied sites lost: nothing is redone.
    (out / "generation.jsonl").unlink()
    for site in (out / "sites").iterdir():
        for path in sorted(site.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        site.rmdir()
    seen = len(server.requests)
    rerun = invoke(bench_args(server.base_url, data, out, *bench_run["db_args"]))
    assert server.requests[seen:] == [], "no model was asked anything"
    assert (out / "results.jsonl").read_text() == results_before
    assert (out / "sites" / TRIVIA / "index.html").is_file() and "41.7%" in rerun.output, rerun.output

    # An evaluation stopped before its last result (here: the line is gone): only that case is redone.
    lines = results_before.splitlines()
    kept = [line for line in lines if json.loads(line)["case_index"] != 1 or json.loads(line)["record_id"] != TRIVIA]
    (out / "results.jsonl").write_text("\n".join(kept) + "\n")
    seen = len(server.requests)
    invoke(bench_args(server.base_url, data, out, *bench_run["db_args"]))
    new = server.requests[seen:]
    assert {r.rule_index for r in new} == {rule("question-click"), rule("question-partial")}
    after = {(r["record_id"], r["case_index"]): r for r in read_lines(out / "results.jsonl")}
    assert after[(TRIVIA, 1)]["verdict"] == "PARTIAL" and len(after) == 6
    before = {(r["record_id"], r["case_index"]): r for r in map(json.loads, lines)}
    assert all(after[k] == before[k] for k in before if k != (TRIVIA, 1))


HOMEPAGE_SERVER = """const http = require('http');
http.createServer((req, res) => {
  res.writeHead(200, {'Content-Type': 'text/html'});
  res.end('<h1>Neighborhood compare</h1><p>Compare demographic, economic and crime data.</p>');
}).listen(Number(process.env.PORT), '127.0.0.1');
"""


@pytest.mark.e2e
def test_evaluate_only_scores_hand_written_sites(bench_run, tmp_path: Path) -> None:
    server = bench_run["server"]
    data = write_data(tmp_path / "test.jsonl", {TRIVIA: [0], MAPPING: [0], DASHBOARD: [0]})
    sites = tmp_path / "sites"
    (sites / TRIVIA).mkdir(parents=True)
    (sites / TRIVIA / "index.html").write_text(TRIVIA_PAGE)
    (sites / MAPPING).mkdir()  # an npm project with no dependencies, served by `npm start`
    (sites / MAPPING / "package.json").write_text(json.dumps({"name": "maps", "scripts": {"start": "node server.js"}}))
    (sites / MAPPING / "server.js").write_text(HOMEPAGE_SERVER)
    # No folder for DASHBOARD: that system produced nothing for it.
    out = tmp_path / "scored"
    seen = len(server.requests)
    invoke(bench_args(server.base_url, data, out, "--evaluate-only", str(sites)))
    assert not {r.model for r in server.requests[seen:]} & {"scripted-coder", "scripted-vlm", "scripted-feedback"}
    results = {r["record_id"]: r for r in read_lines(out / "results.jsonl")}
    assert results[TRIVIA]["verdict"] == "YES" and results[MAPPING]["verdict"] == "YES"
    assert results[DASHBOARD]["verdict"] == "START_FAILED" and "no site folder" in results[DASHBOARD]["reason"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["accuracy"] == round(100 * 2 / 3, 2) and summary["generation"] is None
    assert summary["appearance"] == round(8 / 3, 3) and summary["sites_started"] == 2
    assert not (sites / MAPPING / "node_modules").exists() and not (out / "sites").exists()


@pytest.mark.e2e
def test_bench_generates_with_the_chosen_loop(tmp_path: Path, chromium_path: str) -> None:
    """``--loop single``: one coder turn, requirements written by the agent's own feedback model (the
    benchmark's test cases stay hidden from generation), then the same evaluation."""
    os.environ["WEBGEN_CHROMIUM"] = chromium_path
    data = write_data(tmp_path / "test.jsonl", {TRIVIA: [0]})
    out = tmp_path / "out"
    scenario = Scenario.model_validate({"name": "bench", "rules": list(RULES.values())})
    with ScriptedServer(scenario) as server:
        result = invoke(bench_args(server.base_url, data, out, "--loop", "single"))
        requests = list(server.requests)
    by_rule = Counter(r.rule_index for r in requests)
    assert [r.rule_index for r in requests if r.model == "scripted-coder"] == [rule("coder-trivia")]
    assert by_rule[rule("requirements")] == 1 and by_rule[rule("check-yes")] == 1
    assert by_rule[rule("test-instruction")] == 0  # WebGen-Agent's GUI tester is not part of this loop
    run_id = f"bench-out-{TRIVIA}"
    assert RunIndex(out / "webgen.db").settings(run_id)["loop"] == "single"
    results = read_lines(out / "results.jsonl")
    assert [(r["record_id"], r["verdict"]) for r in results] == [(TRIVIA, "YES")], result.output


@pytest.mark.e2e
def test_upstream_profile_evaluates_at_webgen_bench_viewport(bench_run, tmp_path: Path) -> None:
    """WebGen-Bench evaluates at 1024x768: ``--profile upstream`` does too (the default is 1280 wide)."""
    server = bench_run["server"]
    data = write_data(tmp_path / "test.jsonl", {TRIVIA: [0]})
    sites = tmp_path / "sites"
    (sites / TRIVIA).mkdir(parents=True)
    (sites / TRIVIA / "index.html").write_text(TRIVIA_PAGE)
    widths = {}
    for profile in ("upstream", "default"):
        out = tmp_path / profile
        invoke(bench_args(server.base_url, data, out, "--evaluate-only", str(sites), "--profile", profile))
        (site,) = read_lines(out / "sites.jsonl")
        png = (out / site["screenshot"]).read_bytes()
        widths[profile] = int.from_bytes(png[16:20], "big")  # the PNG header's IHDR width
    assert widths == {"upstream": 1024, "default": 1280}
