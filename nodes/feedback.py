"""The feedback text the coder reads: what its last step did, what to fix first, the requirement again.

Shared by the Critic (every step), Backtrack (the restored step) and fork (a note on a step).
"""

from __future__ import annotations

from typing import Any

from webgen_agent.core.state import Step
from webgen_agent.core.views import Critique
from webgen_agent.nodes import prompts


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
    if target["gui_passed"] is not None:
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
