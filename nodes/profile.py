"""The coder prompts each profile's rules name (``ProfileRules.prompts``), and the lookup nodes use.

A profile's rules are one module under core/profiles/; what differs in its prompts lives here,
beside the other prompts, so the rules stay plain data every layer can read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from webgen_agent.core.context import AgentContext
from webgen_agent.core.profiles import profile_rules
from webgen_agent.core.profiles.rules import PromptSetName
from webgen_agent.core.prompt_checkout import CheckoutPrompts, read_checkout
from webgen_agent.nodes import prompts


@dataclass(frozen=True)
class PromptSet:
    """The prompts that differ between the profiles."""

    coder_system: str  # the coder's system prompt
    first_user: Callable[[str], str]  # the requirement -> the coder's first user turn
    test_instruction_user: Callable[[str], str]  # the requirement -> the request for the GUI test
    test_suffix: str  # appended to the GUI test instruction the feedback model wrote
    gui_task: Callable[[str, str, Iterable[str]], str]  # (url, instruction, page paths) -> the GUI agent's task
    # Added to the GUI agent's system prompt: page text is data (empty: browser-use's own prompt).
    gui_page_rule: str
    # The test instruction -> what the GUI agent's last step (its forced answer) is told (empty: nothing).
    gui_limit: Callable[[str], str]
    # The screenshot-only judge's two requests and the GUI-run summary request (profiles whose rules use them).
    describe_user: str = prompts.UPSTREAM_DESCRIBE_USER
    grade_user: str = prompts.UPSTREAM_GRADE_USER
    gui_summary_user: Callable[[str, Iterable[str]], str] = prompts.upstream_gui_summary_user
    # The sentences of WebGen-Agent's feedback (nodes/feedback.py ``upstream_feedback``).
    feedback: Mapping[str, str] = field(default_factory=lambda: prompts.UPSTREAM_FEEDBACK)


PROMPT_SETS: dict[PromptSetName, PromptSet] = {
    "project": PromptSet(
        coder_system=prompts.CODER_SYSTEM,
        first_user=prompts.generator_user,
        test_instruction_user=prompts.test_instruction_user,
        test_suffix="",
        gui_task=prompts.gui_task,
        gui_page_rule=prompts.GUI_PAGE_RULE,
        gui_limit=prompts.no_limit_prompt,
    ),
    "webgen-agent": PromptSet(
        coder_system=prompts.UPSTREAM_CODER_SYSTEM,
        first_user=str.strip,
        test_instruction_user=prompts.upstream_test_instruction_user,
        test_suffix=prompts.UPSTREAM_TEST_SUFFIX,
        gui_task=prompts.upstream_gui_task,
        gui_page_rule="",
        gui_limit=prompts.upstream_gui_limit,
    ),
}


def prompts_for(profile: str, prompts_from: str | None = None) -> PromptSet:
    """The prompts the rules of ``profile`` name; ``prompts_from``: WebGen-Agent's own texts read from
    that checkout replace the upstream set's words (core/prompt_checkout.py)."""
    prompt_set = PROMPT_SETS[profile_rules(profile).prompts]
    if not prompts_from:
        return prompt_set
    return checkout_set(prompt_set, read_checkout(prompts_from))


def checkout_set(base: PromptSet, texts: CheckoutPrompts) -> PromptSet:
    """``base`` with every prompt the checkout holds, each used as upstream uses it."""
    return replace(
        base,
        coder_system=texts.coder_system,
        test_instruction_user=lambda requirement: texts.test_instruction.format(instruction=requirement),
        describe_user=texts.describe,
        grade_user=texts.grade,  # upstream sends it as it is, never formatted
        gui_summary_user=lambda instruction, trajectory: texts.gui_summary.format(
            gui_instruction=instruction, result="\n\n".join(trajectory)
        ),
        feedback={**base.feedback, "reminder": texts.reminder},
    )


def context_prompts(context: AgentContext) -> PromptSet:
    """The prompts of a run: its profile's, from its ``prompts_from`` checkout if it names one."""
    return prompts_for(context.profile, context.prompts_from)
