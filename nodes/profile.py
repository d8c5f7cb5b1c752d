"""The rules of a run, by profile: one graph, and the profile picks its prompts and rules.

``upstream`` reproduces WebGen-Agent step for step (its loop, prompts' information content,
grading, feedback and Step-GRPO reward pools); ``default`` is this project's, whose every
difference is deliberate (docs/fidelity.md lists each rule, both profiles and why).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from webgen_agent.core.context import Profile
from webgen_agent.nodes import prompts
from webgen_agent.tools.bolt import ReplyRules

# A step whose screenshot grade is at or below this is errored (WebGen-Agent's save_history; the
# default profile uses the same threshold on its 1-5 scale).
UPSTREAM_ERRORED_SCORE = 2


@dataclass(frozen=True)
class ProfileRules:
    """Everything that differs between the profiles; nodes and routers read these, never the name."""

    name: Profile
    coder_system: str  # the coder's system prompt
    first_user: Callable[[str], str]  # the requirement -> the coder's first user turn
    replies: ReplyRules  # how a coder reply is classified (tools.bolt.parse_reply)
    gui_on_threshold: bool  # also run the GUI test when the screenshot grade reaches appearance_threshold
    finish_on_gui_pass: bool  # finish when the GUI test passes on a good-looking page
    # "upstream": two screenshot-only calls (description + 0-5 grade), every capture graded, errors read
    # from the word "error" in the install and server output; "default": one call with the requirement
    # and the page's text, 1-5, real error signals (exit codes, page errors, blank page).
    judging: Literal["default", "upstream"]
    # "upstream": the install/start lines, description and suggestions or the GUI summary, the request to
    # signal, the instruction, the whole-files reminder, and no grades; "default": results with grades.
    feedback: Literal["default", "upstream"]
    test_instruction_user: Callable[[str], str]  # the requirement -> the request for the GUI test
    test_suffix: str  # appended to the GUI test instruction the feedback model wrote
    # "upstream": best step among every step (control steps carry their GUI grade), a backtrack goes on
    # from that step's own feedback; "default": among code edits, with a note on the rollback.
    selection: Literal["default", "upstream"]
    # What the page under test says is untrusted (prompt injection). "marked": the GUI agent is told
    # (task and system prompt) that page text is data, the verdict model gets the agent's report
    # delimited and labelled as such, and verdicts are read strictly (the answer is the JSON object
    # alone); "upstream": WebGen-Agent's task, unmarked report and lenient reading. (The default
    # judge's page text is always delimited: only the default profile's judge reads page text.)
    page_content: Literal["marked", "upstream"]
    gui_task: Callable[[str, str, Iterable[str]], str]  # (url, instruction, page paths) -> the GUI agent's task

    @property
    def strict_verdicts(self) -> bool:
        """Judge and GUI verdicts must be the JSON object alone, never one found inside prose."""
        return self.page_content == "marked"

    @property
    def gui_page_rule(self) -> str:
        """Added to the GUI agent's system prompt: page text is data (empty: browser-use's own prompt)."""
        return prompts.GUI_PAGE_RULE if self.page_content == "marked" else ""


DEFAULT = ProfileRules(
    name="default",
    coder_system=prompts.CODER_SYSTEM,
    first_user=prompts.generator_user,
    replies="default",
    gui_on_threshold=True,
    finish_on_gui_pass=True,
    judging="default",
    feedback="default",
    test_instruction_user=prompts.test_instruction_user,
    test_suffix="",
    selection="default",
    page_content="marked",
    gui_task=prompts.gui_task,
)

UPSTREAM = ProfileRules(
    name="upstream",
    coder_system=prompts.UPSTREAM_CODER_SYSTEM,
    first_user=str.strip,
    replies="upstream",
    gui_on_threshold=False,
    finish_on_gui_pass=False,
    judging="upstream",
    feedback="upstream",
    test_instruction_user=prompts.upstream_test_instruction_user,
    test_suffix=prompts.UPSTREAM_TEST_SUFFIX,
    selection="upstream",
    page_content="upstream",
    gui_task=prompts.upstream_gui_task,
)

_RULES: dict[str, ProfileRules] = {"default": DEFAULT, "upstream": UPSTREAM}


def rules_for(profile: str) -> ProfileRules:
    """The rules of ``profile``; an unknown name is a clear error."""
    try:
        return _RULES[profile]
    except KeyError:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(_RULES)}") from None
