"""The benchmark's rules without a run: reading an answer, the rates, the results file that
survives a kill, and which models evaluate."""

from __future__ import annotations

from pathlib import Path

from webgen_agent.apps.bench.evaluate import parse_answer
from webgen_agent.apps.bench.results import JsonlStore
from webgen_agent.apps.bench.score import rates
from webgen_agent.apps.bench.views import CaseResult


def test_parse_answer() -> None:
    assert parse_answer("YES - listed") == "YES"
    assert parse_answer("**Partial**: only the title") == "PARTIAL"
    assert parse_answer("Partially achieved") == "PARTIAL"
    assert parse_answer("no, nothing happened") == "NO"
    assert parse_answer("Nothing happened") is None and parse_answer("Not sure") is None
    assert parse_answer(None) is None and parse_answer("The result: YES") is None


def test_rates_count_missing_as_zero() -> None:
    figures = rates(["YES", "PARTIAL", "NO", "START_FAILED", None])
    assert (figures.test_cases, figures.missing) == (5, 1)
    assert figures.accuracy == 30.0 and figures.yes_rate == 20.0 and figures.start_failed_rate == 20.0


def test_jsonl_store_skips_a_torn_line_and_keeps_the_last_per_key(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "r.jsonl", CaseResult)
    line = dict(
        record_id="1",
        case_index=0,
        task="t",
        expected_result="e",
        instruction_category="a",
        case_category="b",
        verdict="NO",
        source="agent",
    )
    store.append(CaseResult(**line))
    with store.path.open("a") as handle:
        handle.write('{"record_id": "1", "case_ind')  # killed mid-write
    store.append(CaseResult(**{**line, "verdict": "YES"}))
    assert [r.verdict for r in store.load().values()] == ["YES"]
    assert len(store.compact()) == 1 and len(store.path.read_text().splitlines()) == 1


def test_evaluation_models_default_to_the_agents_and_flags_override_them(monkeypatch) -> None:
    from webgen_agent.apps.bench.config import EvalModelFlags, eval_settings
    from webgen_agent.core.context import Settings

    monkeypatch.delenv("WEBGEN_VLM_MODEL", raising=False)
    settings = Settings(base_url="http://agent/v1", model="m", vlm_model="vl", feedback_model="fb")
    same = eval_settings(settings, EvalModelFlags())
    assert (same.agent.model, same.appearance.model, same.feedback.model) == ("vl", "vl", "fb")
    assert {same.agent.base_url, same.feedback.base_url} == {"http://agent/v1"}
    own = eval_settings(
        settings,
        EvalModelFlags(
            vlm_model="qwen-vl",
            appearance_model="gpt-4o",
            base_url="http://eval/v1",
            appearance_base_url="https://oa/v1",
            api_key="k",
        ),
        max_actions=7,
    )
    assert (own.agent.model, own.agent.base_url, own.agent.api_key.get_secret_value()) == (
        "qwen-vl",
        "http://eval/v1",
        "k",
    )
    assert (own.appearance.model, own.appearance.base_url) == ("gpt-4o", "https://oa/v1")
    assert (own.feedback.model, own.feedback.base_url, own.max_actions) == ("fb", "http://eval/v1", 7)
    assert settings.vlm_model == "vl"  # the agent's own settings are untouched
