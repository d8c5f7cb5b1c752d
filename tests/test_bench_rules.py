"""The benchmark's rules without a run: reading an answer, the rates, the results file that
survives a kill, and which models evaluate."""

from __future__ import annotations

from pathlib import Path

from webgen_agent.apps.bench.config import EvalSettings
from webgen_agent.apps.bench.evaluate import Evaluator, parse_answer
from webgen_agent.apps.bench.results import JsonlStore
from webgen_agent.apps.bench.score import rates
from webgen_agent.apps.bench.views import CaseResult
from webgen_agent.core.context import ModelSettings
from webgen_agent.tools.gui_agent.views import GuiRun
from webgen_agent.tools.webgen_bench import UITestCase


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


def compute_acc_verdict(interact_messages: list[dict[str, str]]) -> str:
    """WebGen-Bench's ``compute_acc.py`` on one case: its last assistant message, read whole."""
    text = next((m["content"] for m in reversed(interact_messages) if m["role"] == "assistant"), "")
    return "YES" if "YES" in text else "PARTIAL" if "PARTIAL" in text else "NO"


async def test_the_webgen_bench_verdict_reads_the_agents_whole_last_message(tmp_path: Path) -> None:
    """WebVoyager's last assistant message holds its thought and its answer; WebGen-Bench looks for YES
    in all of it. So does the evaluation: a YES in the agent's reasoning counts, as there."""
    model = ModelSettings(model="vlm", base_url="http://127.0.0.1:9/v1")
    evaluator = Evaluator(EvalSettings(agent=model, appearance=model, feedback=model), tmp_path)
    case = UITestCase.model_validate(
        {"task": "Look at the scores.", "expected_result": "A table of scores.", "task_category": {}}
    )
    answer = "PARTIAL - a table, but empty"
    last = f'Memory: The table is there: YES, a scores table.\nAction: {{"done": {{"text": "{answer}"}}}}'
    for messages, final_answer, expected in [
        (["Next goal: look", last], answer, "YES"),
        (["Next goal: look", "Action: " + answer], answer, "PARTIAL"),
        ([], "YES - all shown", "YES"),  # no message kept: the done text
        (["Memory: yes it is there\nAction: done"], None, "NO"),  # case-sensitive
    ]:
        run = GuiRun(messages=messages, final_answer=final_answer, stopped_reason="done")
        decision = await evaluator._decide(case, run)
        assistant = [{"role": "assistant", "content": m} for m in messages or [final_answer or ""]]
        assert decision.verdict == compute_acc_verdict(assistant) == expected
