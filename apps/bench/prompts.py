"""Evaluation prompts, as data. Each constant has a one-line purpose; builders are pure functions.

Written for this project from the benchmark's protocol (WebGen-Bench ``src/ui_test_bolt`` and
``webvoyager/run.py``: task + expected result, a YES / PARTIAL / NO answer, at most 15 interactions
with the answer forced at the last; ``src/grade_appearance_bolt_diy``: a 1-5 rubric on four
criteria, answered in free text ending with "Grade: N").
"""

from __future__ import annotations

import re
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

# Purpose: the GUI agent's last iteration, where it must answer (WebGen-Bench's limit prompt, webvoyager/run.py).
CASE_LIMIT = """You have used up the interactions you were allowed with the website.

Judge how your attempts went against the expected result:

Expected result: {expected_result}

Answer with one of:
- YES: the expected result was fully achieved while you interacted with the site.
- NO: the expected result was not achieved at all.
- PARTIAL: the expected result was only partly achieved.

Base your final answer on what you experienced while testing."""

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

# Purpose: system prompt of the VLM grading a landing page's appearance (WebGen-Bench sends a generic one).
APPEARANCE_SYSTEM = "You are a helpful assistant."

# Purpose: the appearance grader's request (WebGen-Bench's rubric): free-text analysis, then "Grade: N".
APPEARANCE_USER = """You evaluate the design of a webpage that was built from this instruction:

{requirement}

Grade the webpage's appearance from 1 to 5 (5 is best) on four criteria:
- Rendering: does the page render without visual errors, with colours, fonts and components as
  the instruction specifies?
- Content relevance: does the design serve the website's purpose and the user's requirements,
  with its elements (search bars, report formats, ...) placed logically and working?
- Layout harmony: are text, images and buttons arranged in a balanced, intuitive, uncluttered way?
- Modernness and beauty: does the design follow current trends (minimalism, responsive layout),
  with pleasing colours, typography and visual hierarchy?

Scale:
1 poor: major rendering problems (broken layout, wrong colours), irrelevant or missing content,
  chaotic layout, a dated or unappealing design;
2 below average: partly rendered with visible errors, partly relevant but badly organised,
  inconsistent layout, a basic design;
3 average: mostly rendered with small flaws, relevant but unpolished, a functional but plain
  layout, clean but without modern flair;
4 good: renders well without major errors, relevant and logically organised, harmonious and easy
  to use, modern and appealing;
5 excellent: flawless rendering, highly relevant and tailored to the user, a polished and
  innovative layout, a cutting-edge, memorable design.

Review the screenshot(s) of the webpage attached. Write a detailed analysis first (two to four
paragraphs covering every criterion, with reference to the instruction: strengths, weaknesses,
how closely the design follows the specification), then the grade.

Answer in this form:

Analysis: <your analysis>

Grade: <1-5>"""

# The grade in the grader's answer, read as WebGen-Bench reads it (grade_appearance_bolt_diy/
# compute_grade.py first_grade_int): the first digit after "Grade", any case, across lines; none: 0.
_GRADE = re.compile(r"Grade.*?(\d)", re.IGNORECASE | re.DOTALL)


def appearance_grade(answer: str) -> int:
    """The first digit after the word "Grade" in the grader's answer; 0 when there is none."""
    match = _GRADE.search(answer)
    return int(match.group(1)) if match else 0


def case_task(url: str, task: str, expected_result: str, max_actions: int) -> str:
    return CASE_TASK.format(
        url=url, task=task.strip(), expected_result=expected_result.strip(), max_actions=max_actions
    )


def case_limit(expected_result: str) -> str:
    return CASE_LIMIT.format(expected_result=expected_result.strip())


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
