"""Evaluation prompts, as data. Each constant has a one-line purpose; builders are pure functions.

Written for this project from the benchmark's published protocol (task + expected result, a
YES / PARTIAL / NO answer, at most 15 interactions; a 1-5 appearance rubric on four points).
"""

from __future__ import annotations

from collections.abc import Iterable

from webgen_agent.nodes.prompts import numbered_list

# Purpose: the task given to the GUI agent for one UI test case.
CASE_TASK = """You are testing a website at {url} as an ordinary user would. Stay on this site.

Task: {task}

Expected result: {expected_result}

Do the task with the page's own controls; try another way if the first one fails. You may use at
most {max_actions} browser actions in all, so when they run low, stop and answer.
Then compare what you saw with the expected result and give your final answer, starting with
exactly one of these words:
YES - the expected result was fully achieved;
PARTIAL - only some aspects of the expected result were achieved;
NO - the expected result could not be achieved at all.
After the word, say in one sentence what you observed."""

# Purpose: ask the feedback model for a verdict when the agent gave no clear answer (or always, in feedback mode).
CASE_VERDICT_USER = """A browser agent tested a website on one test case.

Task: {task}
Expected result: {expected_result}

Actions the agent took:
{actions}

Agent's final answer: {final_answer}
Run ended because: {stopped_reason}

The last screenshot of the page is attached when there is one. Decide whether the expected result
was achieved: YES (fully), PARTIAL (only some aspects) or NO (not at all). Judge only from the
evidence above: what the agent did not get to see counts as not achieved."""

# Purpose: system prompt of the VLM grading a landing page's appearance (the benchmark rubric).
APPEARANCE_SYSTEM = """You grade the appearance of a generated website from a screenshot of its landing page.
Judge four points:
1. Rendering: the page renders properly (no blank page, error screen, overlapping or broken elements).
2. Content: what is shown matches the website requirement.
3. Layout: the layout is harmonious (alignment, spacing, hierarchy, balanced use of space).
4. Look: the design looks modern and consistent (colours, typography, components).
Scores: 1 the page does not render, or shows nothing related to the requirement; 2 it renders but
is poor on most points; 3 acceptable, with clear flaws on some points; 4 good on all points with
small flaws; 5 excellent on all four points."""

# Purpose: the appearance grader's user turn: the requirement; the screenshot follows.
APPEARANCE_USER = """Website requirement:
{requirement}

Grade the landing page in the attached screenshot."""


def case_task(url: str, task: str, expected_result: str, max_actions: int) -> str:
    return CASE_TASK.format(
        url=url, task=task.strip(), expected_result=expected_result.strip(), max_actions=max_actions
    )


def case_verdict_user(
    task: str, expected_result: str, actions: Iterable[str], final_answer: str | None, stopped_reason: str
) -> str:
    return CASE_VERDICT_USER.format(
        task=task.strip(),
        expected_result=expected_result.strip(),
        actions=numbered_list(actions),
        final_answer=final_answer or "(none)",
        stopped_reason=stopped_reason,
    )


def appearance_user(requirement: str) -> str:
    return APPEARANCE_USER.format(requirement=requirement.strip())
