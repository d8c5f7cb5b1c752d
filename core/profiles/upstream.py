"""The upstream profile: WebGen-Agent step for step (its loop, prompts' information content,
grading, feedback and Step-GRPO reward pools); rollouts observe as WebGen-RL's environment does.

Paths: A = WebGen-Agent ``src/``, RL = ``WebGen-RL/verl/workers/agentic/webgen_agent/``.
"""

from __future__ import annotations

from webgen_agent.core.profiles.rules import EnvironmentRules, ProfileRules

# The agent loop (A agent/webgen_agent.py): finish checked first in `step`; the server log kept
# whole up to 50,000 characters (A utils/execute_for_feedback.py, the start output); an exception
# in a step restarts it, up to `restart_limit = 5` times (`run`).
AGENT_LOOP = EnvironmentRules(
    name="inference",
    replies="webgen-agent",
    grade_error_at=None,
    start_log_chars=50_000,
    observation_tokens=None,
    restart_limit=5,
)

# The Step-GRPO rollout environment: screenshot_validated checked first and every assistant turn's
# files written, a control reply's artifact included (RL feedback/file_management.py
# `create_workspace`); a grade <= 1 is an error (RL feedback/execute_for_feedback.py
# `get_feedback_single`); the log kept whole up to 10,000 characters (the same file's start
# output); observations cut at max_obs_length = 5,000 tokens (RL generation.py `_process_next_obs`,
# WebGen-RL/src/runs/run_qwen2_5-coder-7b-instruct_step-grpo.sh). An exception there fails the
# trainer's batch: here the answer grades 0 and the trajectory goes on.
ROLLOUT_ENVIRONMENT = EnvironmentRules(
    name="rollout",
    replies="webgen-rl",
    grade_error_at=1,
    start_log_chars=10_000,
    observation_tokens=5_000,
    restart_limit=None,
    gui_notes_by_vlm=True,  # RL generation.py (instruction) and execute_for_feedback.py (summary): the VLM
)

RULES = ProfileRules(
    name="upstream",
    prompts="webgen-agent",
    checkout_prompts=True,  # its prompts are WebGen-Agent's: a checkout holds the exact texts
    replies="webgen-agent",
    premature_control_is_malformed=False,
    control_steps_carry_grades=True,
    gui_on_threshold=False,
    finish_on_gui_pass=False,
    gui_test_restarts_site=True,
    fresh_run_each_step=True,  # A agent/webgen_agent.py get_cmds, utils/execute_for_feedback.py: every step
    screenshot_only_judge=True,
    grade_every_capture=True,
    error_words_in_logs=True,
    gui_grade_on_signal_step=True,
    feedback_with_grades=False,
    selection="every-step",
    backtrack_note=False,
    reward_pool="every-step",
    pool_context_tokens=23_767,  # WebGen-RL/src/runs/run_qwen2_5-coder-7b-instruct_step-grpo.sh l.48-52
    pool_response_tokens=9_000,
    strict_verdicts=False,
    viewport=(1024, 768),  # WebGen-Agent's capture and GUI-agent window
    capture_wait_s=3.0,  # A utils/execute_for_feedback.py `take_screenshot`: driver.get, then sleep(3)
    install_retries=(),  # the agent runs `npm install` once; the retries are WebGen-Bench's
    quiet_install=False,  # A utils/execute_for_feedback.py `run_commands`: a plain `npm install`
    default_vite_config=True,  # A utils/file_management.py `extract_and_write_files`
    static_sites=False,  # `npm install` and `npm run dev` need a package.json
    judge_attempts=1,  # A utils/get_screenshot_description.py: one call, parsed once
    inference=AGENT_LOOP,
    rollout=ROLLOUT_ENVIRONMENT,
    gui_actions_per_step=1,  # WebVoyager: one action per iteration, the last 3 screenshots kept
    gui_screenshots_kept=3,
    # WebVoyager notes a format error or a failed action and goes on to its 15th iteration
    # (A webvoyager/run.py 615-619: `continue`; the action's exception becomes the next observation).
    gui_failures_before_giving_up=None,
    # A webvoyager/run.py 545-595: the page, a format error or an action's error each iteration, and
    # at `it == max_iter` the limit prompt as the whole new message; no other nudge.
    gui_webvoyager_messages=True,
    # A webvoyager/run.py: 5 s after the page loads (l.510); after a click 3 s (l.380), after typing
    # 10 s (l.418), after a scroll 3 s (l.451), after going back or to Google 2 s (l.700, 704), and
    # 2 s after an action that failed (l.719).
    gui_settle_after_load_s=5.0,
    gui_settle_after_action_s=(
        ("click", 3.0),
        ("input", 10.0),
        ("scroll", 3.0),
        ("go_back", 2.0),
        ("navigate", 2.0),
        ("failed", 2.0),
    ),
    # A webvoyager/run.py 408-417: a click on the field, a 1 s pause, the text, a 2 s pause, then
    # Enter (its system prompt: "After typing, the system automatically hits `ENTER` key").
    gui_click_before_typing_s=1.0,
    gui_enter_after_typing_s=2.0,
    # A webvoyager/run.py 502-510: once the page has loaded, a click on its body (a failed one passed
    # over), then the guard against the space key on window.onkeydown, then the 5 s wait; the typing
    # guard (text, textarea and search boxes spared) before each typing, l.410-415.
    gui_webvoyager_start=True,
    # A webvoyager/run.py 377-451, 631-708: Click (target set to _self first), Type, Scroll (the window
    # by window_height * 2 // 3, or Alt+ArrowDown / Alt+ArrowUp on a focused element), Wait (5 s),
    # GoBack, Google and ANSWER; Google leaves the site, which the agent may not, so it is not offered.
    gui_webvoyager_actions=True,
    loop_governor=False,  # WebGen-Agent runs until finish or max_steps
    replay_tests=False,
)
