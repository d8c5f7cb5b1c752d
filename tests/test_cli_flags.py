"""One set of agent flags across ``run``, ``resume``, ``fork``, ``rollout`` and ``bench``.

docs/cli.md's table says which command takes which flag. These tests read it and check, through
the real command line: each ``yes`` is an option of that command with the one shared help text,
each ``no`` is not an option there, and each flag given reaches the run's context (the command
runs up to its checks before the run, where the context is taken and the command ends). Cheap: no
model, browser or run; about 3 s in all.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from webgen_agent.apps.cli import bench, export, history, run
from webgen_agent.apps.cli.main import app

COMMANDS = ("run", "resume", "fork", "rollout", "bench")
CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
_ROW = re.compile(r"^\| `(--[a-z-]+)` \|((?: [a-z]+ \|){5})")


def _table() -> dict[str, dict[str, str]]:
    """docs/cli.md's flag table: flag -> command -> yes, no or own."""
    rows: dict[str, dict[str, str]] = {}
    for line in CLI_DOC.read_text().splitlines():
        found = _ROW.match(line)
        if found:
            cells = [cell.strip() for cell in found.group(2).split("|") if cell.strip()]
            rows[found.group(1)] = dict(zip(COMMANDS, cells, strict=True))
    return rows


TABLE = _table()


@functools.cache
def _commands() -> dict[str, Any]:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _option(command: str, flag: str) -> Any:
    """The click option of ``command`` named ``flag`` (None if it has none)."""
    params = _commands()[command].params
    return next((p for p in params if p.param_type_name == "option" and flag in p.opts), None)


def test_the_table_lists_the_agent_flags() -> None:
    assert {"--stall-steps", "--temperature", "--replay-tests", "--no-sandbox", "--allow-host"} <= set(TABLE)
    assert all(set(cells.values()) <= {"yes", "no", "own"} for cells in TABLE.values()), TABLE


@pytest.mark.parametrize("flag", sorted(TABLE))
def test_each_command_takes_the_flags_the_table_says_with_one_help_text(flag: str) -> None:
    cells = TABLE[flag]
    for command, cell in cells.items():
        option = _option(command, flag)
        assert (option is not None) == (cell != "no"), f"{command} {flag}: docs/cli.md says {cell}"
    shared = {command: _option(command, flag) for command, cell in cells.items() if cell == "yes"}
    helps = {
        command: (option.help, tuple(option.opts), tuple(option.secondary_opts)) for command, option in shared.items()
    }
    assert len(set(helps.values())) == 1, f"{flag} differs between commands: {helps}"


# A value for each flag, and what the run's context then holds. Budgets are left out: rollout and
# bench spend them for the whole command, not per run (tests/test_costs.py covers them).
Check = Callable[[Any], bool]
SETTINGS: dict[str, tuple[list[str], Check]] = {
    "--max-steps": (["--max-steps", "7"], lambda c: c.max_steps == 7),
    "--error-limit": (["--error-limit", "4"], lambda c: c.error_limit == 4),
    "--stall-steps": (["--stall-steps", "2"], lambda c: c.stall_steps == 2),
    "--critic": (["--critic", "llm"], lambda c: c.critic == "llm"),
    "--allow-shell": (["--allow-shell"], lambda c: c.allow_shell is True),
    "--gui-max-actions": (["--gui-max-actions", "3"], lambda c: c.gui_max_actions == 3),
    "--temperature": (["--temperature", "0.25"], lambda c: c.coder.temperature == 0.25),
    "--top-p": (["--top-p", "0.5"], lambda c: c.coder.top_p == 0.5),
    "--replay-tests": (["--no-replay-tests"], lambda c: c.replay_tests is False),
    "--loop": (["--loop", "webloop"], lambda c: c.loop == "webloop"),
    "--critique-rounds": (["--critique-rounds", "3"], lambda c: c.critique_rounds == 3),
    "--shared-policy": (["--shared-policy"], lambda c: c.shared_policy is True),
    "--scaffold": (["--scaffold", "static-pages"], lambda c: c.scaffold == "static-pages"),
    "--max-pages": (["--max-pages", "2"], lambda c: c.max_pages == 2),
    "--offline-pages": (["--offline-pages"], lambda c: c.offline_pages is True),
    "--no-sandbox": (["--no-sandbox"], lambda c: c.sandbox.enabled is False),
    "--allow-host": (
        ["--allow-host", "registry.example.org"],
        lambda c: "registry.example.org" in c.sandbox.allow_hosts,
    ),
    "--review": (["--review", "plan"], lambda c: c.review == ["plan"]),
}
# Each command's default profile is the other one's value.
PROFILE = {"run": "upstream", "bench": "upstream", "rollout": "default"}


@pytest.fixture
def contexts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The contexts the commands take to their checks before the run; the command ends there."""
    taken: list[Any] = []

    def take(context: Any, database: Any) -> None:
        taken.append(context)
        raise typer.Exit(0)

    for module in (run, history, export, bench):
        monkeypatch.setattr(module, "check_before_run", take)
    return taken


def _recorded_run(db: Path, status: str) -> None:
    """A run in ``db`` as `run` records one, with the settings a fork or resume starts from."""
    from webgen_agent.checkpoints.runs import RunIndex, RunRecord

    index = RunIndex(db)
    settings = {"max_steps": 20, "error_limit": 5, "stall_steps": 5, "critic": "template", "profile": "default"}
    index.start(RunRecord(run_id="base", requirement="A page", out_dir=str(db.parent), settings=json.dumps(settings)))
    index.update("base", status=status)
    asyncio.run(_checkpoint_at_step(db, 1))  # fork --step 1 needs the step's checkpoint


async def _checkpoint_at_step(db: Path, step: int) -> None:
    from tests.helpers import checkpoint_of
    from webgen_agent.checkpoints.saver import open_checkpointer

    config = {"configurable": {"thread_id": "base", "checkpoint_ns": ""}}
    async with open_checkpointer(db, record_runs=False) as saver:
        await saver.aput(config, checkpoint_of({"current": step}), {"source": "loop", "step": step, "parents": {}}, {})


def _invoke(command: str, tmp_path: Path, flags: list[str]) -> Any:
    db = tmp_path / "runs.db"
    data = tmp_path / "records.jsonl"
    data.write_text(json.dumps({"id": "one", "instruction": "A page with a button.", "ui_instruct": []}) + "\n")
    models = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db)]
    head = {
        "run": ["run", "A page with a button."],
        "resume": ["resume", "base"],
        "fork": ["fork", "base", "--step", "1"],
        "rollout": ["rollout", "--data", str(data), "--out", str(tmp_path / "out")],
        "bench": ["bench", "--data", str(data), "--out", str(tmp_path / "out")],
    }[command]
    if command in ("resume", "fork"):
        _recorded_run(db, "failed")
    return CliRunner().invoke(app, [*head, *models, *flags])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_a_command_takes_reaches_the_run_context(command: str, tmp_path: Path, contexts: list[Any]) -> None:
    taken = [flag for flag, cells in TABLE.items() if cells[command] != "no" and flag in SETTINGS]
    flags = [arg for flag in taken for arg in SETTINGS[flag][0]]
    if command in PROFILE:
        flags += ["--profile", PROFILE[command]]
    result = _invoke(command, tmp_path, flags)
    assert result.exit_code == 0 and len(contexts) == 1, (result.output, result.exception)
    context = contexts[0]
    missed = [flag for flag in taken if not SETTINGS[flag][1](context)]
    assert not missed, f"{command}: {missed} did not reach the context"
    if command in PROFILE:
        assert context.profile == PROFILE[command]


def test_a_fork_keeps_the_recorded_settings_the_flags_do_not_change(tmp_path: Path, contexts: list[Any]) -> None:
    result = _invoke("fork", tmp_path, ["--stall-steps", "0", "--no-sandbox"])
    assert result.exit_code == 0, result.output
    context = contexts[0]
    assert (context.stall_steps, context.error_limit, context.critic) == (0, 5, "template")


def test_rollout_records_the_gui_tests_its_replay_reward_scores(tmp_path: Path, contexts: list[Any]) -> None:
    result = _invoke("rollout", tmp_path, ["--reward", "step-replay", "--no-sandbox"])
    assert result.exit_code == 0, result.output
    assert contexts[0].replay_tests is True and contexts[0].profile == "upstream"
    refused = _invoke("rollout", tmp_path, ["--reward", "step-replay", "--no-replay-tests", "--no-sandbox"])
    assert refused.exit_code == 2 and "--no-replay-tests" in refused.output


def test_bench_evaluates_in_the_sandbox_its_flags_ask_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-sandbox and --allow-host reach the evaluation too (it installs and starts every site)."""
    from webgen_agent.apps.bench import service

    evaluations: list[Any] = []

    async def take(records: Any, **kwargs: Any) -> None:
        evaluations.append(kwargs["eval_settings"])
        raise typer.Exit(0)

    monkeypatch.setattr(service, "run_bench", take)
    sites = tmp_path / "sites"
    sites.mkdir()
    result = _invoke("bench", tmp_path, ["--evaluate-only", str(sites), "--no-sandbox", "--allow-host", "cdn.test"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert evaluations[0].sandbox.enabled is False and "cdn.test" in evaluations[0].sandbox.allow_hosts
    assert "The sandbox is off (--no-sandbox)" in result.output  # said once, before anything runs


def test_help_shows_the_defaults_the_run_takes() -> None:
    """The help's defaults are the run context's (and the coder sampling's): the context model takes
    them from the same place the help reads (core/names.py), so the two cannot drift apart."""
    from webgen_agent.core.context import AgentContext, Settings
    from webgen_agent.core.names import RUN_DEFAULTS

    fields = AgentContext.model_fields
    for flag, name in [
        ("--max-steps", "max_steps"),
        ("--error-limit", "error_limit"),
        ("--stall-steps", "stall_steps"),
        ("--critic", "critic"),
        ("--gui-max-actions", "gui_max_actions"),
        ("--loop", "loop"),
        ("--critique-rounds", "critique_rounds"),
        ("--max-pages", "max_pages"),
    ]:
        assert fields[name].default == getattr(RUN_DEFAULTS, name)
        assert f"default {fields[name].default}" in _option("run", flag).help, flag
    assert f"default {Settings.model_fields['coder_temperature'].default}" in _option("run", "--temperature").help
    assert "default: on, upstream: off" in _option("run", "--replay-tests").help  # the profiles' rules


@pytest.mark.parametrize("command", ["run", "rollout", "bench"])
def test_prompts_from_reaches_the_run_context(command: str, tmp_path: Path, contexts: list[Any]) -> None:
    from tests.prompt_tree import write_prompt_tree

    checkout = write_prompt_tree(tmp_path / "WebGen-Agent")
    result = _invoke(command, tmp_path, ["--profile", "upstream", "--prompts-from", str(checkout), "--no-sandbox"])
    assert result.exit_code == 0 and len(contexts) == 1, (result.output, result.exception)
    assert contexts[0].prompts_from == str(checkout)
