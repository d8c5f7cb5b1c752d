"""Step-GRPO rewards and advantages against hand-computed values."""

import math

import pytest

from webgen_agent.checkpoints.rewards import advantages, group_stats, reward_pool


def test_advantages_match_hand_computed_values():
    # rewards 2, 4, 6, 8: mean 5, sample std sqrt(20/3) = 2.5819889
    result = advantages([2, 4, 6, 8])
    std = math.sqrt(20 / 3)
    assert result == pytest.approx([-3 / (std + 1e-6), -1 / (std + 1e-6), 1 / (std + 1e-6), 3 / (std + 1e-6)])
    assert result[0] == pytest.approx(-1.161895, abs=1e-6)


def test_single_step_group_uses_mean_zero_std_one():
    assert group_stats([7]) == (0.0, 1.0)
    assert advantages([7]) == pytest.approx([7 / (1 + 1e-6)])
    assert advantages([-1]) == pytest.approx([-1 / (1 + 1e-6)])


def test_all_equal_rewards_give_zero_advantage():
    assert advantages([5, 5, 5]) == [0.0, 0.0, 0.0]


def test_step_rewards_credit_control_words_and_penalise_malformed():
    steps = [
        {"index": 0, "action": "edit", "format_ok": True, "screenshot_score": 4, "gui_score": 3},
        {"index": 1, "action": "screenshot_validated", "format_ok": True, "tests_step": 0},
        {"index": 2, "action": "malformed", "format_ok": False, "screenshot_score": 0, "gui_score": 0},
        {"index": 3, "action": "edit", "format_ok": False, "screenshot_score": 5, "gui_score": 5},
        {"index": 4, "action": "finish", "format_ok": True, "tests_step": 0},
    ]
    pool = reward_pool(steps, "default")  # the code the exports run
    assert [entry.steps for entry in pool] == [[0], [1], [2], [3], [4]]
    assert [entry.reward for entry in pool] == [7.0, 7.0, -1.0, -1.0, 7.0]
