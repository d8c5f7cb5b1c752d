"""The coder prompts each profile's rules name (``ProfileRules.prompts``), and the lookup nodes use.

A profile's rules are one module under core/profiles/; what differs in its prompts lives here,
beside the other prompts, so the rules stay plain data every layer can read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from webgen_agent.core.profiles import profile_rules
from webgen_agent.core.profiles.rules import PromptSetName
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


def prompts_for(profile: str) -> PromptSet:
    """The prompts the rules of ``profile`` name."""
    return PROMPT_SETS[profile_rules(profile).prompts]
