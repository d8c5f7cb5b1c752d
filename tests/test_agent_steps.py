"""A scripted agent step from browser-use's page listing: elements and targets resolved, the step
read from the prompt, and the reply valid for browser-use's own action schema."""

from __future__ import annotations

import json

import pytest

from tests.scripted_agent import LISTING, agent_state_message, browser_use_output_model
from webgen_agent.apps.scripted.agent_steps import (
    AgentPrompt,
    AgentStepError,
    OutputSchema,
    build_agent_output,
    parse_agent_prompt,
    parse_elements,
    resolve_target,
)
from webgen_agent.apps.scripted.views import AgentStep


def test_listing_parsing_and_target_resolution() -> None:
    elements = {e.index: e for e in parse_elements(LISTING)}
    assert elements[4].attributes == {"id": "new-item", "placeholder": "What needs doing?"}
    assert elements[6].text == "Add item"
    assert elements[7].attributes["aria-label"] == "Remove Buy milk"
    assert resolve_target("What needs doing?", list(elements.values())) == 4
    assert resolve_target("ADD ITEM", list(elements.values())) == 6  # case-insensitive
    assert resolve_target("new-item", list(elements.values())) == 4  # by id
    assert resolve_target("done-all", list(elements.values())) == 9  # by name
    assert resolve_target("milk", list(elements.values())) == 7  # substring of aria-label
    with pytest.raises(AgentStepError, match=r"matches no interactive element.*\[6\]<button> Add item"):
        resolve_target("Delete everything", list(elements.values()))


def test_agent_prompt_step_is_zero_based() -> None:
    prompt = parse_agent_prompt(["<user_request>x</user_request>", agent_state_message(step=2)])
    assert prompt is not None and prompt.step == 2 and prompt.max_steps == 15
    assert "Todo: Buy milk" in prompt.page_text
    assert parse_agent_prompt(["plain question"]) is None


def test_agent_output_is_valid_for_the_real_browser_use_schema() -> None:
    from browser_use.llm.schema import SchemaOptimizer

    output_model = browser_use_output_model()
    schema = OutputSchema(SchemaOptimizer.create_optimized_json_schema(output_model), "response_format")
    prompt = parse_agent_prompt([agent_state_message(step=0)])
    assert prompt is not None
    step = AgentStep.model_validate(
        {
            "actions": [
                {"input": {"target": "What needs doing?", "text": "Buy milk"}},
                {"click": {"target": "Add item"}},
                {"scroll": {"direction": "up", "pages": 0.5}},
                {"wait": {"seconds": 1}},
                {"go_back": {}},
                {"navigate": {"url": "http://127.0.0.1:1/"}},
            ],
            "next_goal": "check the list",
        }
    )
    output = build_agent_output(step, prompt, schema)
    parsed = output_model.model_validate_json(json.dumps(output))
    dumped = [a.model_dump(exclude_unset=True) for a in parsed.action]
    assert dumped[0] == {"input": {"index": 4, "text": "Buy milk", "clear": True}}
    assert dumped[1] == {"click": {"index": 6}}
    assert dumped[2]["scroll"]["down"] is False
    assert [next(iter(a)) for a in dumped] == ["input", "click", "scroll", "wait", "go_back", "navigate"]
    assert parsed.next_goal == "check the list"

    done_model = browser_use_output_model(done_only=True)
    done_schema = OutputSchema(SchemaOptimizer.create_optimized_json_schema(done_model), "response_format")
    with pytest.raises(AgentStepError, match=r"not offered.*done"):
        build_agent_output(
            AgentStep.model_validate({"actions": [{"click": {"target": "Add item"}}]}), prompt, done_schema
        )
    with pytest.raises(AgentStepError, match="no params"):
        build_agent_output(
            AgentStep.model_validate({"actions": [{"click": {"target": "Add item", "x": 1}}]}), prompt, schema
        )


def test_agent_output_without_schema_uses_browser_use_shape() -> None:
    output = build_agent_output(
        AgentStep.model_validate({"actions": [{"done": {"text": "YES"}}]}),
        AgentPrompt(),
        OutputSchema(None, "none"),
    )
    assert output["action"] == [{"done": {"success": True, "text": "YES"}}]
    assert {"evaluation_previous_goal", "memory", "next_goal"} <= output.keys()
