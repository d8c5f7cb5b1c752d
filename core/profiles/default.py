"""The default profile: this project's rules, each difference from WebGen-Agent deliberate
(docs/fidelity.md says why)."""

from __future__ import annotations

from webgen_agent.core.profiles.rules import ProfileRules

RULES = ProfileRules(
    name="default",
    prompts="project",
    replies="project",
    premature_control_is_malformed=True,
    control_steps_carry_grades=False,
    gui_on_threshold=True,
    finish_on_gui_pass=True,
    gui_test_restarts_site=False,
    screenshot_only_judge=False,
    grade_every_capture=False,
    error_words_in_logs=False,
    gui_grade_on_signal_step=False,
    feedback_with_grades=True,
    selection="code-edits",
    backtrack_note=True,
    reward_pool="code-edits",
    strict_verdicts=True,
    viewport=None,
    gui_actions_per_step=3,  # browser-use's own: several actions per answer, one screenshot
    gui_screenshots_kept=1,
)
