"""The default profile: this project's rules, each difference from WebGen-Agent deliberate
(docs/fidelity.md says why)."""

from __future__ import annotations

from webgen_agent.core.profiles.rules import EnvironmentRules, ProfileRules

# One set of observation rules for runs and rollouts alike: a rollout trains the model on the
# observations it will see when it runs.
OBSERVATIONS = EnvironmentRules(
    name="inference",
    replies="project",
    grade_error_at=None,
    start_log_chars=50_000,
    observation_tokens=None,
    restart_limit=None,
)

RULES = ProfileRules(
    name="default",
    prompts="project",
    checkout_prompts=False,
    replies="project",
    premature_control_is_malformed=True,
    control_steps_carry_grades=False,
    gui_on_threshold=True,
    finish_on_gui_pass=True,
    gui_test_restarts_site=False,
    fresh_run_each_step=False,
    screenshot_only_judge=False,
    grade_every_capture=False,
    error_words_in_logs=False,
    gui_grade_on_signal_step=False,
    feedback_with_grades=True,
    selection="code-edits",
    backtrack_note=True,
    reward_pool="code-edits",
    pool_context_tokens=None,
    pool_response_tokens=None,
    strict_verdicts=True,
    viewport=None,
    capture_wait_s=None,
    install_retries=("--force", "--legacy-peer-deps"),
    quiet_install=True,
    default_vite_config=False,
    static_sites=True,
    judge_attempts=3,
    inference=OBSERVATIONS,
    rollout=OBSERVATIONS,
    gui_actions_per_step=3,  # browser-use's own: several actions per answer, one screenshot
    gui_screenshots_kept=1,
    gui_failures_before_giving_up=3,  # a model that fails 3 answers in a row will not recover in this run
    gui_webvoyager_messages=False,
    gui_settle_after_load_s=0.0,  # browser-use reads the page once its requests are done
    gui_settle_after_action_s=(),
    gui_click_before_typing_s=None,  # browser-use's typing: the field is focused, not clicked
    gui_enter_after_typing_s=None,  # browser-use's typing: Enter is an action the agent chooses
    gui_webvoyager_start=False,  # the page as it loaded: nothing clicked, its key handlers its own
    gui_webvoyager_actions=False,  # browser-use's actions, with their own parameters (scroll by pages, ...)
    loop_governor=True,
    replay_tests=True,
)
