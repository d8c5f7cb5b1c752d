"""Profiles and loops are modules of rules: nothing outside them compares a profile's or a loop's name.

The guard reads the source (``ast``) so that CI fails on the first ``if profile == ...`` written
anywhere else; the other tests check that every name a rule can take has its implementation.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path
from typing import get_args

import pytest

from webgen_agent.checkpoints.rewards import reward_pool
from webgen_agent.core import loops, profiles
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.core.loops import LOOPS, LoopName, loop_rules
from webgen_agent.core.profiles import PROFILES, Profile, profile_rules
from webgen_agent.core.profiles.rules import PromptSetName, ReplyFormat
from webgen_agent.nodes.profile import PROMPT_SETS
from webgen_agent.tools.bolt import parse_reply

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("apps", "benchmarks", "checkpoints", "core", "graph", "nodes", "tools", "webgen_agent")
RULE_MODULES = (ROOT / "core" / "profiles", ROOT / "core" / "loops")
# Names that only ever mean a profile or a loop ("default" and "webloop" also name other things).
RULE_ONLY_NAMES = {"upstream", "webgen-agent"}
RULE_KEYS = {"profile", "loop"}
EQUALITY = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
ROLE = ModelSettings(model="m", base_url="http://localhost:9/v1")


def _names_a_rule(node: ast.expr) -> bool:
    """``profile``, ``x.loop``, ``d["profile"]``, ``d.get("loop")`` or a name only a rule has."""
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name):
            return name in RULE_KEYS
        case ast.Subscript(slice=ast.Constant(value=key)):
            return key in RULE_KEYS
        case ast.Call(func=ast.Attribute(attr="get"), args=[ast.Constant(value=key), *_]):
            return key in RULE_KEYS
        case ast.Constant(value=str(text)):
            return text in RULE_ONLY_NAMES
    return False


def _rule_comparisons(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if (
            isinstance(node, ast.Compare)
            and any(isinstance(op, EQUALITY) for op in node.ops)
            and any(_names_a_rule(side) for side in [node.left, *node.comparators])
        ):
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_profile_or_loop_name_is_compared_outside_the_rule_modules():
    sources = [
        path
        for folder in SOURCE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not any(path.is_relative_to(rules) for rules in RULE_MODULES)
    ]
    assert len(sources) > 50  # the scan found the source
    found = [
        line
        for path in sources
        for line in _rule_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "decide by a rule of core/profiles or core/loops, not by the name:\n" + "\n".join(found)


SAMPLE = """
if context.profile == "upstream": pass
if loop != "single": pass
if data.get("profile") == "upstream": pass
if values["loop"] in ("webloop", "single"): pass
if rules.grading == "webgen-agent": pass
if export_format == "webloop" or data.get("profile") is None: pass
"""


def test_the_guard_sees_each_kind_of_comparison():
    lines = [line.split(": ", 1)[1] for line in _rule_comparisons(SAMPLE, "sample.py")]
    assert lines == [
        "context.profile == 'upstream'",
        "loop != 'single'",
        "data.get('profile') == 'upstream'",
        "values['loop'] in ('webloop', 'single')",
        "rules.grading == 'webgen-agent'",
    ]


@pytest.mark.parametrize(
    ("package", "registry", "names"),
    [(profiles, PROFILES, get_args(Profile)), (loops, LOOPS, get_args(LoopName))],
)
def test_every_rule_module_is_registered_under_its_name(package, registry, names):
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)} - {"rules"}
    assert {registry[name].name for name in names} == set(names) == set(registry)
    assert len(modules) == len(names), f"a module of {package.__name__} is not registered: {sorted(modules)}"


def test_every_rule_value_has_its_implementation():
    assert set(PROMPT_SETS) == set(get_args(PromptSetName))
    for reply_format in get_args(ReplyFormat):
        assert parse_reply("finish", reply_format).kind in ("finish", "edit", "malformed")
    for name in PROFILES:
        assert reward_pool([], name) == []


def test_unknown_names_are_clear_errors():
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        profile_rules("nope")
    with pytest.raises(ValueError, match="unknown loop 'nope'"):
        loop_rules("nope")


def test_a_profile_with_its_own_viewport_sets_the_run_window_unless_the_run_does():
    assert profile_rules("upstream").viewport == (1024, 768)
    roles = {"coder": ROLE, "vlm": ROLE, "feedback": ROLE}
    upstream = AgentContext.model_validate({**roles, "profile": "upstream"})
    assert (upstream.viewport_width, upstream.viewport_height) == (1024, 768)
    given = AgentContext.model_validate({**roles, "profile": "upstream", "viewport_width": 800})
    assert (given.viewport_width, given.viewport_height) == (800, 768)
    default = AgentContext.model_validate({**roles, "profile": "default"})
    assert (default.viewport_width, default.viewport_height) == (1280, 800)


def test_the_benchmark_evaluates_at_the_viewport_rule_of_the_run_context():
    from webgen_agent.apps.bench.config import EvalModelFlags, eval_settings
    from webgen_agent.core.context import Settings

    settings = Settings(model="m", base_url="http://127.0.0.1:9/v1")
    upstream = eval_settings(settings, EvalModelFlags(), profile="upstream")
    assert (upstream.viewport_width, upstream.viewport_height) == (1024, 768)
    default = eval_settings(settings, EvalModelFlags(), profile="default")
    assert (default.viewport_width, default.viewport_height) == (1280, 800)


@pytest.mark.parametrize(
    ("settings", "replay", "checks"),
    [
        ({"profile": "default"}, True, False),
        ({"profile": "upstream"}, False, False),
        ({"profile": "upstream", "replay_tests": True}, True, False),
        ({"profile": "default", "replay_tests": False}, False, False),
        ({"loop": "webloop"}, True, True),
        ({"loop": "webloop", "requirement_checks": False}, True, False),
        ({"loop": "webgen-agent", "requirement_checks": True}, True, True),
    ],
)
def test_a_runs_rules_are_resolved_once_on_its_context(settings, replay, checks):
    """``context.rules``: the profile's, environment's and loop's rules, and the tri-state settings
    decided (the run's own value, else the rule's): what every node and router reads."""
    roles = {"coder": ROLE, "vlm": ROLE, "feedback": ROLE}
    context = AgentContext.model_validate({**roles, **settings})
    rules = context.rules
    assert rules.profile is PROFILES[context.profile] and rules.loop is LOOPS[context.loop]
    assert rules.environment is PROFILES[context.profile].environment(context.environment)
    assert (rules.replay_tests, rules.requirement_checks) == (replay, checks)
    assert context.rules is rules  # decided once per settings
    changed = context.model_copy(update={"profile": "upstream" if context.profile == "default" else "default"})
    assert changed.rules.profile is not rules.profile  # a copy with other settings is not handed stale rules
