"""The upstream profile: WebGen-Agent step for step (its loop, prompts' information content,
grading, feedback and Step-GRPO reward pools)."""

from __future__ import annotations

from webgen_agent.core.profiles.rules import ProfileRules

RULES = ProfileRules(
    name="upstream",
    prompts="webgen-agent",
    replies="webgen-agent",
    premature_control_is_malformed=False,
    control_steps_carry_grades=True,
    gui_on_threshold=False,
    finish_on_gui_pass=False,
    gui_test_restarts_site=True,
    screenshot_only_judge=True,
    grade_every_capture=True,
    error_words_in_logs=True,
    gui_grade_on_signal_step=True,
    feedback_with_grades=False,
    selection="every-step",
    backtrack_note=False,
    reward_pool="every-step",
    strict_verdicts=False,
    viewport=(1024, 768),  # WebGen-Agent's capture and GUI-agent window
    gui_actions_per_step=1,  # WebVoyager: one action per iteration, the last 3 screenshots kept
    gui_screenshots_kept=3,
)
