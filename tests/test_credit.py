"""Per-role credit and the cascaded reward, as pure functions (definitions in docs/rewards.md)."""

from __future__ import annotations

import pytest

from webgen_agent.checkpoints.credit import (
    STRUCTURE_CREDIT,
    cascaded_reward,
    check_score,
    critic_reward,
    discriminability,
    helpfulness,
    replay_function,
    replay_score,
)


def test_check_score_is_the_mean_benchmark_credit():
    assert check_score(["YES", "PARTIAL", "NO", "NO"]) == pytest.approx(0.375)
    assert check_score([]) == 0.0


def test_discriminability_counts_exact_agreements_and_skipped_requirements_disagree():
    checks = ["YES", "NO", "PARTIAL"]
    assert discriminability({0: "met", 1: "unmet", 2: "partly"}, checks) == 1.0
    assert discriminability({0: "unmet", 1: "met", 2: "partly"}, checks) == pytest.approx(1 / 3)
    assert discriminability({0: "met"}, checks) == pytest.approx(1 / 3)  # 1 and 2 skipped
    assert discriminability({0: "met", 5: "met"}, ["YES"]) == 1.0  # an id beyond the list is ignored


def test_helpfulness_is_the_change_of_the_check_score_and_the_critic_reward_chooses():
    assert helpfulness(0.5, 0.0) == -0.5
    assert helpfulness(0.5, 1.0) == 0.5
    assert critic_reward(0.25, -0.5, "d") == 0.25
    assert critic_reward(0.25, -0.5, "h") == -0.5
    assert critic_reward(0.25, -0.5, "dh") == -0.25


def _edit(**fields):
    return {"index": 0, "action": "edit", "format_ok": True, **fields}


def test_cascaded_reward_gates_stage_by_stage():
    malformed = {"index": 0, "action": "malformed", "format_ok": False}
    assert cascaded_reward(False, malformed) == 0.0
    structure = _edit(
        execution={"ok": False, "stage": "structure", "error": "missing page"},
        structure_ok=False,
        screenshot_score=5,
        check_score=1.0,
        checks="x",
    )
    assert cascaded_reward(True, structure) == 0.0  # nothing from later stages
    crashed = _edit(execution={"ok": False, "stage": "render", "error": "boom"}, screenshot_score=4, gui_score=5)
    assert cascaded_reward(True, crashed) == STRUCTURE_CREDIT
    checked = _edit(execution={"ok": True}, screenshot_score=4, checks="h", check_score=0.5)
    assert cascaded_reward(True, checked) == pytest.approx(0.1 + 4 + 2.5)
    gui_only = _edit(execution={"ok": True}, screenshot_score=3, gui_score=2)
    assert cascaded_reward(True, gui_only) == pytest.approx(0.1 + 3 + 2)
    assert cascaded_reward(False, checked) == 0.0  # a badly formatted reply credited with a good page


def _replayed(passed: int, failed: int = 0, flaky: int = 0, unmatched: int = 0) -> dict:
    counts = {"passed": passed, "failed": failed, "flaky": flaky, "unmatched": unmatched}
    return {**counts, "verdicts": "v", "seconds": 1.0, "regressions": []}


def test_the_replay_term_counts_flaky_as_not_passed_and_leaves_redesigns_out():
    assert replay_score(_edit()) is None
    assert replay_score(_edit(replay=_replayed(3, flaky=1, unmatched=5))) == pytest.approx(0.75)
    assert replay_score(_edit(replay=_replayed(0, unmatched=1))) is None
    # No GUI test on the step: 5 x the share; a GUI test ran: capped by its grade; no replay: the grade.
    assert replay_function(_edit(gui_passed=None, replay=_replayed(1, failed=1)), 0) == pytest.approx(2.5)
    assert replay_function(_edit(gui_passed=False, replay=_replayed(1)), 2) == 2
    assert replay_function(_edit(gui_passed=True), 4) == 4
    page = _edit(
        execution={"ok": True}, screenshot_score=3, gui_score=0, gui_passed=None, replay=_replayed(1, failed=1)
    )
    assert cascaded_reward(True, page) == pytest.approx(0.1 + 3)
    assert cascaded_reward(True, page, replay=True) == pytest.approx(0.1 + 3 + 2.5)
