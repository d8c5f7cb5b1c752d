"""Routing and best-step selection: pure functions over state, checked against the upstream rules."""

import pytest

from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.graph.builder import compile_graph
from webgen_agent.graph.routers import (
    RoutingError,
    route_after_coder,
    route_after_critic,
    route_after_executor,
    route_after_gui,
    route_after_judge,
)
from webgen_agent.nodes.selection import best_good_step, best_step


def ctx(**overrides):
    role = ModelSettings(model="m", base_url="http://x/v1")
    return AgentContext(coder=role, vlm=role, feedback=role, **overrides)


def step(index, *, shot=0, gui=0, errored=False, action="edit", files="f", ok=True):
    return {
        "index": index,
        "action": action,
        "files": files,
        "screenshot_score": shot,
        "gui_score": gui,
        "errored": errored,
        "execution": {"ok": ok},
    }


def test_best_step_ranks_gui_then_screenshot_then_latest():
    steps = [
        step(0, shot=5, gui=3),
        step(1, shot=3, gui=4),
        step(2, shot=4, gui=4),
        step(3, shot=4, gui=4),
        step(4, shot=2, gui=5, errored=True),
        step(5, action="finish", files=None, shot=5, gui=5),
    ]
    assert best_step(steps)["index"] == 3
    assert best_good_step(steps)["index"] == 3


def test_best_step_falls_back_to_all_code_steps_when_none_is_good():
    steps = [step(0, shot=0, errored=True), step(1, shot=2, gui=1, errored=True), step(2, shot=1, errored=True)]
    assert best_step(steps)["index"] == 1
    assert best_good_step(steps) is None


def test_executor_routes_errors_to_critic_then_backtrack_at_the_limit():
    state = {"current": 0, "steps": [step(0, ok=False)], "consecutive_errors": 4}
    assert route_after_executor(state, ctx()) == "critic"
    state["consecutive_errors"] = 5
    assert route_after_executor(state, ctx()) == "backtrack"
    assert route_after_executor(state, ctx(backtrack=False)) == "critic"
    state["steps"][0]["execution"]["ok"] = True
    assert route_after_executor(state, ctx()) == "screenshot_judge"


def test_judge_sends_good_appearance_to_the_gui_test():
    state = {"current": 0, "steps": [step(0, shot=4)], "consecutive_errors": 0}
    assert route_after_judge(state, ctx()) == "gui_tester"
    assert route_after_judge(state, ctx(appearance_threshold=5)) == "critic"


def test_coder_control_words():
    steps = [step(0, shot=3), {"index": 1, "action": "screenshot_validated", "tests_step": 0}]
    state = {"current": 1, "steps": steps, "edit_step": 0}
    assert route_after_coder(state, ctx()) == "gui_tester"
    steps[0]["execution"]["ok"] = False
    assert route_after_coder(state, ctx()) == "critic"
    steps[1]["action"] = "finish"
    assert route_after_coder(state, ctx()) == "finalize"
    steps[1]["action"] = "weird"
    with pytest.raises(RoutingError):
        route_after_coder(state, ctx())


def test_gui_pass_needs_good_appearance_and_budget_ends_the_run():
    steps = [step(0, shot=4) | {"gui_passed": True}]
    state = {"current": 0, "steps": steps, "edit_step": 0}
    assert route_after_gui(state, ctx()) == "finalize"
    steps[0]["screenshot_score"] = 3
    assert route_after_gui(state, ctx()) == "critic"
    assert route_after_critic({"steps": steps * 3}, ctx(max_steps=3)) == "finalize"
    assert route_after_critic({"steps": [*steps, step(1, files="g")]}, ctx(max_steps=3)) == "refiner"


def test_graph_draws_every_conditional_edge():
    graph = compile_graph().get_graph()
    edges = {(e.source, e.target) for e in graph.edges}
    for expected in [
        ("generator", "executor"),
        ("executor", "critic"),
        ("executor", "backtrack"),
        ("screenshot_judge", "gui_tester"),
        ("gui_tester", "finalize"),
        ("critic", "refiner"),
        ("refiner", "gui_tester"),
        ("backtrack", "refiner"),
        ("finalize", "__end__"),
    ]:
        assert expected in edges


def test_webloop_routes_generator_critic_refiner_rounds_then_finalizes():
    from webgen_agent.graph.routers import route_after_checker, route_after_code_critic

    loop = ctx(loop="webloop", critique_rounds=2, max_steps=10)
    generated = {**step(0, shot=4), "role": "generator"}
    state = {"current": 0, "edit_step": 0, "steps": [generated]}
    assert route_after_judge(state, loop) == "checker"  # every judged page is checked, whatever its grade
    assert route_after_executor({**state, "steps": [{**generated, "execution": {"ok": False}}]}, loop) == "checker"
    assert route_after_checker(state, loop) == "code_critic"
    assert route_after_code_critic(state, loop) == "refiner"
    refined = [generated, {**step(1), "role": "refiner"}]
    assert route_after_checker({**state, "current": 1, "steps": refined}, loop) == "code_critic"
    twice = [*refined, {**step(2), "role": "refiner"}]
    assert route_after_checker({**state, "current": 2, "steps": twice}, loop) == "finalize"  # rounds spent
    assert (
        route_after_checker({**state, "current": 1, "steps": refined}, ctx(loop="webloop", max_steps=2)) == "finalize"
    )
    malformed = [generated, {**step(1, action="malformed", files=None), "role": "refiner"}]
    assert route_after_coder({**state, "current": 1, "steps": malformed}, loop) == "code_critic"  # same code again


def test_single_pass_checks_the_page_once_and_webgen_agent_checks_only_on_request():
    from webgen_agent.graph.routers import route_after_checker

    state = {"current": 0, "edit_step": 0, "steps": [{**step(0, shot=2), "role": "generator"}]}
    assert route_after_judge(state, ctx(loop="single")) == "checker"
    assert route_after_checker(state, ctx(loop="single")) == "finalize"
    assert route_after_judge(state, ctx()) == "critic"  # WebGen-Agent as before
    checked = ctx(requirement_checks=True)
    assert route_after_judge(state, checked) == "checker"
    assert route_after_checker(state, checked) == "critic"  # then WebGen-Agent's own choice
    good = {**state, "steps": [{**step(0, shot=5), "role": "generator"}]}
    assert route_after_checker(good, checked) == "gui_tester"
