"""``--prompts-from``: the upstream profile's prompts read from the user's own WebGen-Agent checkout,
parsed as data (never imported or run); a checkout missing a prompt the profile needs is refused
in one line. The tree is tests/prompt_tree.py's (upstream's shape, this project's words)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.prompt_tree import DESCRIBE, FUNCTION_TEST, GRADE, REMINDERS, SUMMARY, SYSTEM, write_prompt_tree
from webgen_agent.apps.cli.main import app
from webgen_agent.apps.demo import scripted_context
from webgen_agent.core.profiles import environment_rules
from webgen_agent.core.prompt_checkout import read_checkout
from webgen_agent.core.state import Step
from webgen_agent.nodes.feedback import upstream_feedback
from webgen_agent.nodes.profile import context_prompts


def test_the_checkouts_texts_become_the_runs_prompts(tmp_path: Path):
    root = write_prompt_tree(tmp_path / "WebGen-Agent")
    context = scripted_context("http://127.0.0.1:9/v1", profile="upstream", prompts_from=str(root))
    asked = context_prompts(context)
    assert asked.coder_system == SYSTEM
    assert asked.test_instruction_user("A shop.") == FUNCTION_TEST.format(instruction="A shop.")
    assert (asked.describe_user, asked.grade_user) == (DESCRIBE, GRADE)  # the grade request as it is, never formatted
    assert asked.gui_summary_user("Click Buy.", ["[webpage screenshot]", "Clicked."]) == SUMMARY.format(
        gui_instruction="Click Buy.", result="[webpage screenshot]\n\nClicked."
    )
    step: Step = {"index": 0, "action": "edit", "screenshot": "x", "screenshot_score": 4}  # type: ignore[typeddict-item]
    text = upstream_feedback("A shop.", step, None, {}, environment_rules("upstream", "inference"), asked.feedback)
    assert text.endswith(REMINDERS)
    assert read_checkout(root / "src") == read_checkout(root)  # the checkout or its src/ folder
    assert not (root / "ran").exists()  # parsed, never run or imported


@pytest.mark.parametrize(
    ("leave_out", "named"),
    [("reminders_prompt", "prompts/reminders.py"), ("summary_prompt", "utils/get_webvoyager_feedback.py")],
)
def test_a_checkout_without_a_needed_prompt_is_refused_in_one_line(tmp_path: Path, leave_out: str, named: str):
    root = write_prompt_tree(tmp_path / "WebGen-Agent", leave_out=leave_out)
    with pytest.raises(ValueError, match=f"{named} has no string `{leave_out}`"):
        scripted_context("http://127.0.0.1:9/v1", profile="upstream", prompts_from=str(root))
    result = CliRunner().invoke(
        app,
        ["run", "A shop.", "--profile", "upstream", "--prompts-from", str(root), "--base-url", "http://127.0.0.1:9/v1"]
        + ["--coder-model", "c", "--vlm-model", "v", "--feedback-model", "f", "--db", str(tmp_path / "w.db")],
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and leave_out in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "w.db").exists()  # nothing recorded


def test_prompts_from_needs_the_upstream_profile(tmp_path: Path):
    root = write_prompt_tree(tmp_path / "WebGen-Agent")
    with pytest.raises(ValueError, match="--profile upstream"):
        scripted_context("http://127.0.0.1:9/v1", profile="default", prompts_from=str(root))
    with pytest.raises(ValueError, match="no such folder"):
        scripted_context("http://127.0.0.1:9/v1", profile="upstream", prompts_from=str(tmp_path / "nowhere"))
