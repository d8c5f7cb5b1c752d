"""The feedback text the coder reads: what its last step did, what to fix first, the requirement again.

Shared by the Critic (every step), Backtrack (the restored step) and fork (a note on a step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webgen_agent.core.context import ModelSettings
from webgen_agent.core.profiles import EnvironmentRules
from webgen_agent.core.rules import RunRules
from webgen_agent.core.state import AgentState, Step
from webgen_agent.core.views import Critique
from webgen_agent.nodes import prompts
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.endpoint_tokenizer import TokenizerUnusable, detokenize, tokenize
from webgen_agent.tools.endpoints import EndpointEvent, ModelCallError, report


def results_text(step: Step, tested: Step | None) -> tuple[str, str]:
    """(what happened, what to fix first) for a coder step and the edit step it concerns."""
    sections: list[str] = []
    problems = step["problems"] or []
    if step["action"] == "malformed":
        sections.append("Your last reply could not be used:\n" + prompts.bullet_list(problems))
        return "\n\n".join(sections), "Reply in the required format."
    if problems:
        sections.append("Notes on your last reply:\n" + prompts.bullet_list(problems))
    target = tested or step
    execution: dict[str, Any] = dict(target.get("execution") or {})
    focus = "Improve the website."
    if execution and not execution.get("ok", False):
        stage = execution.get("stage", "?")
        sections.append(f"Running the project failed at the {stage} stage:\n{execution.get('error') or '(no details)'}")
        return "\n\n".join(sections), f"Fix the {stage} error first."
    if execution:
        install = "dependencies installed" if execution.get("install_ran") else "dependencies unchanged"
        sections.append(f"The project ran: {install}, the dev server answered and the page rendered.")
    if target.get("description") or target["screenshot_score"]:
        sections.append(
            f"Screenshot of the landing page, graded {target.get('screenshot_score', 0)}/5:\n"
            f"{target.get('description', '')}\nSuggestions:\n{prompts.bullet_list(target.get('suggestions') or [])}"
        )
        focus = "Improve the appearance following the screenshot suggestions."
    replay = target.get("replay")
    if replay and replay["regressions"]:
        sections.append(
            "Regressions: recorded tests of functions that worked at an earlier step fail now:\n"
            + prompts.bullet_list(replay["regressions"])
        )
        focus = "Fix the regressions first: functions that worked before are broken now."
    if target["gui_passed"] is not None and not (replay and replay["regressions"] and target.get("gui_run") is None):
        verdict = "passed" if target["gui_passed"] else "failed"
        sections.append(
            f"GUI test {verdict}, graded {target.get('gui_score', 0)}/5. Suggestions:\n"
            f"{prompts.bullet_list(target.get('gui_suggestions') or [])}"
        )
        if not target["gui_passed"]:
            focus = "Fix the functions the GUI test found broken."
    return "\n\n".join(sections), focus


def template_feedback(requirement: str, results: str, focus: str) -> str:
    return (
        f"{results}\n\nWhat to do next: {focus}\n\n"
        f"The requirement, for reference:\n{requirement.strip()}\n\n{prompts.WHOLE_FILES_REMINDER}"
    )


def format_critique(critique: Critique) -> str:
    checks = "\n".join(f"- [{c.status}] {c.requirement}: {c.evidence}" for c in critique.checks)
    plan = "\n".join(f"{n}. {item}" for n, item in enumerate(critique.plan, 1))
    return f"Requirement check:\n{checks}\n\nDiagnosis: {critique.diagnosis}\n\nRepair plan:\n{plan}"


def clipped_log(text: str, *, whole_up_to: int, lines: int = 50, chars: int = 5000) -> str:
    """A long log cut the way WebGen-Agent cuts it: over 500 lines, its first and last 50; then over
    ``whole_up_to`` characters (agent loop 50,000, rollout environment 10,000), its first and last 5,000."""
    rows = text.replace("\x00", "").split("\n")
    if len(rows) > 10 * lines:
        rows = [*rows[:lines], "......\n[Truncated]\n......", *rows[-lines:]]
    text = "\n".join(rows)
    if len(text) > whole_up_to:
        return (
            f"{text[:chars]}\n......\n[Truncated]\n......\n{text[-chars:]}".strip()
            + "\n\n...... [Output Too Long, Truncated]"
        )
    return text.strip()


# WebGen-RL's rollout tokenizes each observation as this string, its turn's wrapping included, and
# keeps its first max_obs_length tokens (RL generation.py l.428, ``_process_next_obs`` l.93-106).
UPSTREAM_OBSERVATION = "\n<|im_start|>user\n{}<|im_end|>"
_OBSERVATION_OPENING = UPSTREAM_OBSERVATION.split("{}")[0]

# Where the coder's endpoint offers no tokenizer, a token is counted as this many characters (code
# and English text with Qwen2.5's tokenizer run at about 3 to 4), so the cut keeps at least what
# upstream's cut keeps (docs/fidelity.md).
CHARS_PER_TOKEN = 4
TOKENIZER_PROBE_S = 10.0  # a run's start asks the coder's endpoint for its tokenizer once, this long at most


async def cut_observation(text: str, tokens: int | None, coder: ModelSettings | None) -> str:
    """The feedback as WebGen-RL's rollout cuts an observation: the first ``tokens`` tokens of its turn
    (``UPSTREAM_OBSERVATION``), counted by the coder endpoint's own tokenizer (vLLM's /tokenize); the
    turn's opening is not part of the feedback. Where the endpoint offers no tokenizer (or ``coder``
    is None): the first ``tokens`` x ``CHARS_PER_TOKEN`` characters of the feedback; the same, and an
    endpoint event that says why, where its tokenizer cannot be used for this text."""
    if tokens is None:
        return text
    observed = UPSTREAM_OBSERVATION.format(text)
    if len(observed.encode()) <= tokens:  # a byte-level tokenizer (Qwen's) gives no more tokens than bytes
        return text
    by_characters = text[: tokens * CHARS_PER_TOKEN]
    if coder is None:
        return by_characters
    try:
        ids = await tokenize(coder, "coder", observed)
        if ids is None:
            return by_characters
        if len(ids) <= tokens:
            return text
        kept = await detokenize(coder, "coder", ids[:tokens])
        if kept is not None and not kept.startswith(_OBSERVATION_OPENING):
            raise TokenizerUnusable(f"/detokenize did not give back the turn's opening ({kept[:40]!r})")
    except ModelCallError as exc:  # refused, not vLLM's answer, or trouble that outlasted the patience
        reason = f"{exc}; the feedback was cut at {CHARS_PER_TOKEN} characters a token"
        report(EndpointEvent(kind="tokenizer_unusable", role="coder", model=coder.model, reason=reason))
        return by_characters
    return by_characters if kept is None else kept.removeprefix(_OBSERVATION_OPENING)


async def observation_cut_warning(coder: ModelSettings, environment: EnvironmentRules) -> str | None:
    """One line for the run's warnings when observations are cut at a token budget (WebGen-RL's
    rollout) and ``coder``'s endpoint offers no tokenizer to count them, or one that does not answer
    as vLLM's does. An endpoint that cannot be asked now says nothing here: the run's first model
    call reports it."""
    budget = environment.observation_tokens
    if budget is None:
        return None
    once = coder.model_copy(update={"patience_s": 0.0, "timeout_s": TOKENIZER_PROBE_S})  # asked once, not waited for
    fallback = f"observations over {budget:,} tokens are cut at {CHARS_PER_TOKEN} characters a token, not where the coder's tokenizer cuts them"
    try:
        offered = await tokenize(once, "coder", UPSTREAM_OBSERVATION.format("a probe")) is not None
    except TokenizerUnusable as exc:
        return f"the coder endpoint's tokenizer cannot be used ({exc}): {fallback}"
    except ModelCallError:
        return None
    if offered:
        return None
    return f"the coder endpoint {coder.base_url} offers no tokenizer (vLLM's /tokenize): {fallback}"


def upstream_feedback(
    requirement: str,
    step: Step,
    tested: Step | None,
    logs: dict[str, str],
    environment: EnvironmentRules,
    say: Mapping[str, str] = prompts.UPSTREAM_FEEDBACK,
) -> str:
    """WebGen-Agent's feedback after a code edit or a GUI test, in this project's words.

    In order: the install line, the start line, then the screenshot's error, description and
    suggestions (after an edit) or the GUI test's outcome (after screenshot_validated); then what
    failed and the request to fix it, or the request to send the next signal; then the
    instruction and the whole-files reminder. No grade is ever shown. ``environment``: the agent
    loop's or the rollout environment's (a grade <= 1 is an error there, the log is cut shorter and
    the whole observation is cut at 5,000 tokens).
    """
    gui = step["action"] == "screenshot_validated"
    # The run the install and start lines describe: the step's own (an edit's, or a GUI test that
    # installed and started anew), else the tested edit's.
    source = tested if gui and not step.get("execution") else step
    execution = source.get("execution") if source is not None else None
    parts: list[str] = []
    closing: list[str] = []
    stages: list[str] = []
    if execution is not None and execution.get("install_error"):
        parts.append(f"{say['install_failed']}\n\n> npm install\n{logs.get('install', '')}")
        closing.append(say["command_failed"].format(command="npm install"))
        stages.append("dependency installation")
    else:
        parts.append(say["install_ok"])
    if execution is not None and execution.get("start_error"):
        server_log = clipped_log(logs.get("server", ""), whole_up_to=environment.start_log_chars)
        parts.append(f"{say['start_failed']}\n\n{server_log}")
        closing.append(say["service_failed"])
        stages.append("service starting")
    else:
        parts.append(say["start_ok"])
    if gui:
        error = step.get("gui_error") or ("" if tested is not None else "there is no website to test yet")
        if error:
            parts.append(f"{say['gui_error']}\n\nError: {error}")
            stages.append("GUI agent navigation")
        elif step["gui_passed"] is None:
            parts.append(say["no_gui_summary"])
            stages.append("GUI agent trajectory collection")
        elif step.get("gui_suggestions"):
            parts.append(f"{say['gui_suggestions']}\n\n" + "\n".join(step.get("gui_suggestions") or []))
        else:
            parts.append(say["gui_ok"])
    elif not step.get("screenshot"):
        why = (execution["error"] if execution is not None else None) or "the website never answered"
        parts.append(f"{say['no_screenshot']}\n\nError: {why}")
        stages.append("screenshot collection")
    else:
        visible_error, description = step.get("visible_error", ""), step.get("description", "")
        suggestions = "\n".join(step.get("suggestions") or [])
        if visible_error:
            parts.append(f"{say['visible_error']}\n\n{visible_error}")
            stages.append("screenshot")
        if description:
            parts.append(f"{say['description']}\n\n{description}")
        if suggestions:
            parts.append(f"{say['suggestions']}\n\n{suggestions}")
        if not (visible_error or description or suggestions):
            parts.append(say["no_description"])
            stages.append("screenshot description")
    # WebGen-RL: a graded screenshot this low is an error with no stage named (the list stays empty).
    low = environment.grade_error_at
    low_grade = not gui and bool(step.get("screenshot")) and low is not None and step["screenshot_score"] <= low
    if stages or low_grade:
        closing.append(say["fix"].format(stages=", ".join(stages)))
    else:
        closing.append(say["ask_finish"] if gui else say["ask_validated"])
    text = (
        "\n\n".join(parts)
        + "\n\n"
        + "\n".join(closing)
        + f"\n\n{say['instruction']}\n\n{requirement.strip()}\n\n{say['reminder']}"
    )
    return text


async def upstream_step_feedback(
    state: AgentState,
    step: Step,
    environment: EnvironmentRules,
    say: Mapping[str, str] = prompts.UPSTREAM_FEEDBACK,
    coder: ModelSettings | None = None,
) -> str:
    """``upstream_feedback`` for a step of the run, its logs read from the store, cut as the
    environment cuts an observation (by ``coder``'s tokenizer: ``cut_observation``)."""
    tests_step = step["tests_step"]
    tested = state["steps"][tests_step] if tests_step is not None else None
    source = tested if step["action"] == "screenshot_validated" and not step.get("execution") else step
    execution = source.get("execution") if source is not None else None
    logs_hash = execution.get("logs") if execution is not None else None
    logs = await get_resources().store.aget_json(logs_hash) if logs_hash else {}
    text = upstream_feedback(state["requirement"], step, tested, logs, environment, say)
    return await cut_observation(text, environment.observation_tokens, coder)


async def step_feedback(
    state: AgentState,
    step: Step,
    tested: Step | None,
    rules: RunRules,
    say: Mapping[str, str],
    critique: Critique | None = None,
    coder: ModelSettings | None = None,
) -> str:
    """The coder's feedback on ``step`` (and the edit step ``tested`` it concerns), as the run's rules
    word it: WebGen-Agent's, without grades, under a profile whose feedback shows none (upstream);
    else this project's results with their grades. An llm ``critique`` is appended (its repair plan
    then comes first); ``say``: the run's upstream feedback wording (``context_prompts(context).feedback``);
    ``coder``: the endpoint whose tokenizer counts an observation's tokens (``cut_observation``).
    The critic node and a fork (graph/api.py) both build feedback here."""
    if not rules.profile.feedback_with_grades:
        # A step that ended the run (a finish) is described by the edit it concerns, as after that edit.
        ended = tested is not None and step["action"] not in ("edit", "screenshot_validated")
        text = await upstream_step_feedback(state, tested if ended and tested else step, rules.environment, say, coder)
        return f"{text}\n\n{format_critique(critique)}" if critique is not None else text
    results, focus = results_text(step, tested)
    if critique is not None:
        results, focus = f"{results}\n\n{format_critique(critique)}", "Follow the repair plan."
    return template_feedback(state["requirement"], results, focus)
