"""What a profile decides: every rule on which the profiles differ, named by what it does.

Nodes, routers, the exporter and the CLI read these fields, never a profile's name; a profile is
one module in this package holding one ``ProfileRules`` (docs/architecture.md, "Adding a profile").
The rules are plain data so that every layer may read them: the prompts a profile uses are named
here (``prompts``) and kept in nodes/profile.py, reply parsers in tools/bolt.py, reward pools in
checkpoints/rewards.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

# The profiles there are (core/profiles/__init__.py registers one module per name).
Profile = Literal["upstream", "default"]
# The coder prompts a profile uses (nodes/profile.py holds each set).
PromptSetName = Literal["project", "webgen-agent"]
# How a coder reply is classified (tools/bolt.py holds one parser per format): this project's,
# WebGen-Agent's agent loop, WebGen-RL's rollout environment.
ReplyFormat = Literal["project", "webgen-agent", "webgen-rl"]
# The problem a repetitive reply (``has_repetition``, WebGen-RL's rule) is recorded with in the
# upstream reply formats: tools/bolt.py writes it, the reward pool's budgets read it.
REPEATS_ITSELF = "The reply repeats itself."
# What a project without package.json is told where static sites are not served (WebGen-Agent runs
# `npm install` and `npm run dev`, and npm fails without one); the exports count the edits it stopped.
NO_PACKAGE_JSON = (
    "The project has no package.json: `npm install` and `npm run dev` end with an error without one, "
    "so nothing was installed or started. Write a package.json with a dev script."
)
# Where a run's observations come from: an agent run (inference) or a Step-GRPO rollout (training).
EnvironmentName = Literal["inference", "rollout"]
# Which steps the best-step choice (final answer, backtrack target) ranks.
Selection = Literal["code-edits", "every-step"]
# Which steps a Step-GRPO reward covers (checkpoints/rewards.py holds one pool function per name).
RewardPool = Literal["code-edits", "every-step"]

# A step whose screenshot grade is at or below this is errored (WebGen-Agent's save_history; the
# default profile uses the same threshold on its 1-5 scale).
ERRORED_SCORE = 2


class GuiAgentRules(TypedDict):
    """The GUI agent's settings a profile decides, named as ``GuiAgentSettings`` names them."""

    max_actions_per_step: int
    screenshots_kept: int
    max_failures: int | None
    webvoyager_messages: bool
    settle_after_load_s: float
    settle_after_action_s: dict[str, float]
    click_before_typing_s: float | None
    enter_after_typing_s: float | None
    webvoyager_start: bool
    webvoyager_actions: bool


@dataclass(frozen=True)
class EnvironmentRules:
    """How a step is observed: the rules that differ between inference and rollouts within a profile.

    The upstream profile's two differ because WebGen-Agent's agent loop (``src/agent``) and WebGen-RL's
    rollout environment (``WebGen-RL/verl/workers/agentic/webgen_agent``) differ; the default
    profile uses one set for both (docs/fidelity.md).
    """

    name: EnvironmentName
    replies: ReplyFormat  # how a coder reply is classified
    # A graded screenshot at or below this grade marks the step errored with no error stage: the
    # coder is told to fix errors, not asked for the next signal. None: no such rule.
    grade_error_at: int | None
    # The dev server's log is shown whole up to this many characters, else its first and last 5,000.
    start_log_chars: int
    # The feedback the coder reads is cut at this many tokens (None: never cut).
    observation_tokens: int | None
    # An unusable judge answer (no JSON object in the reply) raises: the run restarts from its best
    # good step (or the requirement) at every later step, and ends at the exception after this many
    # restarts. None: the answer grades 0 and the run goes on.
    restart_limit: int | None
    # The GUI test's instruction and the summary of its run are written by the VLM (else by the
    # feedback model).
    gui_notes_by_vlm: bool = False


@dataclass(frozen=True)
class ProfileRules:
    """Everything that differs between the profiles (docs/fidelity.md lists each rule and why)."""

    name: Profile
    prompts: PromptSetName  # the coder's system prompt, first user turn and GUI test request
    # A run may read the prompts from the user's WebGen-Agent checkout instead (``prompts_from``).
    checkout_prompts: bool
    replies: ReplyFormat  # how a coder reply is classified
    # A control word ("screenshot validated", "finish") before any website exists is malformed
    # (else it is kept, and a premature signal counts as an errored step).
    premature_control_is_malformed: bool
    # Control steps carry the grades of the edit they refer to, and a finish on a page graded
    # ERRORED_SCORE or less is errored.
    control_steps_carry_grades: bool
    gui_on_threshold: bool  # also run the GUI test when the screenshot grade reaches appearance_threshold
    finish_on_gui_pass: bool  # finish when the GUI test passes on a good-looking page
    gui_test_restarts_site: bool  # a GUI test starts the site again (even after a failed start)
    # Every step (a GUI test's too) runs `npm install` and starts the site anew, and reads the error
    # words in that step's own install output and start log (the GUI test's log includes what the
    # server printed while the agent navigated); else dependencies install only when they changed
    # and a running server is kept.
    fresh_run_each_step: bool
    # Two screenshot-only calls (description, then a 0-5 grade) instead of one call that also sees
    # the requirement and the page's text and grades 1-5.
    screenshot_only_judge: bool
    # Capture, grade and GUI-test whatever the server serves at its URL: an error page (4xx/5xx),
    # or a page that does not answer by the start deadline (else such a step has no page).
    grade_every_capture: bool
    # Errors read from the word "error" in the install and server output (else from exit codes,
    # page errors and blank pages).
    error_words_in_logs: bool
    # The GUI test's grade is written on the signal step (and its edit), read from the agent's
    # summary (else a verdict model call gives pass/fail and a grade to the edit).
    gui_grade_on_signal_step: bool
    # Feedback lists results with their grades (else: install/start lines, the description and
    # suggestions or the GUI summary, the request to signal and the whole-files reminder, no grades).
    feedback_with_grades: bool
    selection: Selection
    # A backtrack tells the coder it was rolled back (else it goes on from the step's own feedback).
    backtrack_note: bool
    reward_pool: RewardPool
    # The trainer's token budgets the reward pool honours (WebGen-RL's run script: prompt 23,767,
    # response 9,000). A coder turn whose prompt and reply pass ``pool_context_tokens`` (where the
    # trainer's rolling context stops growing) and every later turn are left out of the records (their
    # entries still count in the group); a reply of ``pool_response_tokens`` or more drops its
    # trajectory, or ends it there when the reply is repetitive. None: no budget.
    pool_context_tokens: int | None
    pool_response_tokens: int | None
    # What the page under test says is untrusted (prompt injection): judge and GUI verdicts must be
    # the JSON object alone, never one found inside prose (else WebGen-Agent's lenient reading). The
    # prompt set marks page text as data to the GUI agent and the verdict model (nodes/profile.py).
    strict_verdicts: bool
    # The capture and GUI-agent window unless a run sets one; None: the settings' default.
    viewport: tuple[int, int] | None
    # A capture waits this many seconds after the page's load event, animations running; None: until
    # the network is idle and two frames were drawn, animations frozen for the screenshot.
    capture_wait_s: float | None
    # npm install: the flags it is retried with after a failure, in order (none: one attempt).
    install_retries: tuple[str, ...]
    # npm install prints errors only (``--loglevel=error``); else at npm's own default level, its
    # warnings in the output that ``error_words_in_logs`` reads.
    quiet_install: bool
    # A default vite.config.js (React plugin) is written when the project has none.
    default_vite_config: bool
    # A project with an index.html and no package.json is served as a static site (else it fails
    # to install and start, as `npm install` / `npm run dev` do without a package.json).
    static_sites: bool
    # How often the screenshot judge is asked for a usable answer before it counts as unusable.
    judge_attempts: int
    inference: EnvironmentRules  # an agent run's observations
    rollout: EnvironmentRules  # a Step-GRPO rollout's observations (`rollout`)
    # The GUI agent's browser actions per model answer (its action budget's last step offers only
    # the answer, so 1 gives budget - 1 actions and then a forced answer).
    gui_actions_per_step: int
    gui_screenshots_kept: int  # screenshots in each of the GUI agent's requests (the latest ones)
    # Failed steps in a row (an unreadable answer, an action that failed) after which the GUI agent
    # gives up and its run is a harness error; None: it goes on to its action budget.
    gui_failures_before_giving_up: int | None
    # WebVoyager's messages only: no warning as the iterations run out, no nudge after repeated
    # actions, and no page shown at the last iteration (the limit prompt and the screenshots before
    # it) or after a failed one; False: browser-use's own (a warning at 75 %, loop nudges, the page
    # at every step).
    gui_webvoyager_messages: bool
    # Seconds the GUI agent waits after the page loads before its first step, and after each action
    # (by browser-use's action name; "failed": after an action that failed) before it reads the page
    # again: what it sees of a page that updates late (timers, transitions, slow data) depends on it.
    gui_settle_after_load_s: float
    gui_settle_after_action_s: tuple[tuple[str, float], ...]
    # Typing starts with a click on the field and this many seconds' pause (a field that reacts to
    # clicks reacts); None: the field is focused without a click.
    gui_click_before_typing_s: float | None
    # Typing ends with Enter this many seconds after the text (a form that submits on Enter is
    # submitted by typing alone); None: the agent presses Enter only as an action of its own.
    gui_enter_after_typing_s: float | None
    # Once the page has loaded, the GUI agent clicks the page's body and replaces the page's own
    # window.onkeydown with WebVoyager's guard against the space key (again before each typing, when
    # it types as WebVoyager), before the wait after loading: a control at the viewport's centre is
    # clicked, and a page's own key handler set that way no longer runs. False: the page as it loaded.
    gui_webvoyager_start: bool
    # The GUI agent's actions are WebVoyager's, and only those: click (the element's target set to
    # _self first, so a link meant for a new tab opens in the agent's tab), type (as the typing rules
    # above say), scroll (the window by two thirds of its height, or Alt and an arrow key on a focused
    # element), wait (5 s), go back, and the answer. False: browser-use's actions (less those that
    # reach files, search engines or other pages' text), with their own parameters.
    gui_webvoyager_actions: bool

    # A run that revisits a file tree or whose score stalls for ``stall_steps`` steps goes back to its
    # best step once, then stops (core/governor.py); else it spends its step budget.
    loop_governor: bool
    # A passing GUI test is recorded as a Playwright test and replayed (no model) after each later
    # edit that renders; the GUI agent runs only for what the recorded tests do not cover (else it
    # runs on every GUI test, as upstream re-runs its agent).
    replay_tests: bool

    def gui_agent(self) -> GuiAgentRules:
        """The GUI agent's settings these rules decide, as ``GuiAgentSettings`` fields (the one place
        the agent loop's GUI tester and WebGen-Bench's evaluation read them)."""
        return {
            "max_actions_per_step": self.gui_actions_per_step,
            "screenshots_kept": self.gui_screenshots_kept,
            "max_failures": self.gui_failures_before_giving_up,
            "webvoyager_messages": self.gui_webvoyager_messages,
            "settle_after_load_s": self.gui_settle_after_load_s,
            "settle_after_action_s": dict(self.gui_settle_after_action_s),
            "click_before_typing_s": self.gui_click_before_typing_s,
            "enter_after_typing_s": self.gui_enter_after_typing_s,
            "webvoyager_start": self.gui_webvoyager_start,
            "webvoyager_actions": self.gui_webvoyager_actions,
        }

    def environment(self, name: EnvironmentName) -> EnvironmentRules:
        """The observation rules of ``name`` (a run's ``environment``)."""
        return {"inference": self.inference, "rollout": self.rollout}[name]
