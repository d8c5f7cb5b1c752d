"""Training data from the CLI: ``rollout`` (group rollouts for Step-GRPO) and ``export`` (JSONL datasets)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from webgen_agent.apps.cli.agent_flags import (
    AGENT_PANEL,
    BUDGET_FLAGS,
    RUN_FLAGS,
    AgentFlags,
    with_agent_flags,
)
from webgen_agent.apps.cli.base import CommandApp, console, errors, fail, split_values
from webgen_agent.apps.cli.common import (
    BUDGET_EXIT_CODE,
    check_before_run,
    existing_db,
    make_context,
    resolve_db,
    warn_unconfined,
    whole_budget,
)
from webgen_agent.apps.cli.flags import Flag
from webgen_agent.apps.cli.library_logs import library_logs_kept
from webgen_agent.apps.cli.model_flags import db_option, with_model_flags
from webgen_agent.apps.cli.out_paths import check_out_file, check_out_folder
from webgen_agent.apps.cli.ray_flags import (
    RayCommand,
    with_ray_flags,
)
from webgen_agent.apps.rollout.settings import (
    ROLLOUT_MAX_STEPS,
    ROLLOUT_PROFILE,
    ROLLOUT_SAMPLES,
    ROLLOUT_TEMPERATURE,
    ROLLOUT_TOP_P,
    rollout_shared_policy,
)
from webgen_agent.checkpoints.credit import CriticReward, RewardKind
from webgen_agent.checkpoints.formats import FORMATS, ExportFormat, formats_help, text_formats_words

if TYPE_CHECKING:
    from webgen_agent.apps.cluster.settings import RaySettings
    from webgen_agent.checkpoints.flat_groups import FlatGroup
    from webgen_agent.core.context import Settings

app = CommandApp()


@app.command(cls=RayCommand)
@with_model_flags
@with_ray_flags
@with_agent_flags(
    *(name for name in RUN_FLAGS if name != "error_limit"),
    *BUDGET_FLAGS,
    defaults={"profile": ROLLOUT_PROFILE},
    own={
        "shared_policy": Flag(
            Annotated[
                bool | None,
                typer.Option(
                    "--shared-policy/--separate-critic",
                    help="webloop: the coder model answers as Critic too (the default with --loop webloop: every "
                    "turn comes from the trained policy), or the feedback model does.",
                    rich_help_panel=AGENT_PANEL,
                ),
            ]
        )
    },
)
def rollout(
    data: Annotated[
        Path, typer.Option(help="WebGen-Bench-style JSON-lines file of instructions.", exists=True, dir_okay=False)
    ],
    samples: Annotated[
        int, typer.Option(min=1, help="Trajectories per instruction (the group size).")
    ] = ROLLOUT_SAMPLES,
    workers: Annotated[int, typer.Option(min=1, help="Trajectories run at the same time.")] = 2,
    ids: Annotated[list[str] | None, typer.Option(help="Only these record ids (repeat or comma-separate).")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N records.")] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Rollout name: run ids are NAME-<record id>-s<k> (default: the data file's name)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder for the trajectories' outputs (default: ./webgen-runs/NAME).")
    ] = None,
    logprobs: Annotated[
        bool,
        typer.Option(
            help="Ask for token logprobs of the trained turns: the coder's and the Critic's (--critic llm, webloop)."
        ),
    ] = False,
    token_ids: Annotated[
        bool,
        typer.Option(help="Also ask for token ids (vLLM's return_token_ids; exported). Not for OpenAI's API."),
    ] = False,
    reward: Annotated[
        RewardKind,
        typer.Option(
            help="What the trajectories record for `export --reward`: step; cascaded: every judged page also gets "
            "its requirement checks; -replay: the GUI tests are recorded and replayed (docs/rewards.md)."
        ),
    ] = "step",
    *,
    settings: Settings,
    agent: AgentFlags,
    cluster: RaySettings | None,
) -> None:
    """Run SAMPLES trajectories per instruction for training; re-run the same command to continue.

    --budget-usd / --budget-tokens count the whole rollout: once spent, no trajectory is started.
    """

    from webgen_agent.apps.rollout.service import plan_rollout
    from webgen_agent.apps.rollout.view import RolloutView, outcome_table
    from webgen_agent.tools.webgen_bench import BenchDataError, load_records

    try:
        records = load_records(data, ids=split_values(ids) or None, limit=limit)
    except BenchDataError as exc:
        fail(str(exc))
    if not records:
        fail(f"{data}: no records selected")
    name = name or data.stem
    replayed = reward.endswith("-replay")
    if replayed and agent["replay_tests"] is False:
        fail(f"--reward {reward} scores the replays of the recorded GUI tests: leave out --no-replay-tests")
    context = _rollout_context(settings, agent, reward, logprobs=logprobs, token_ids=token_ids)
    spending = whole_budget(agent["budget_usd"], agent["budget_tokens"], context)
    specs = plan_rollout(records, samples=samples, name=name)
    out_dir = out or Path(context.runs_dir) / name
    database = resolve_db(settings.db)
    check_out_folder(out_dir)
    check_before_run(context, database)
    if agent["no_sandbox"]:
        warn_unconfined()
    where = f"{workers} at a time" if cluster is None else f"on Ray ({cluster.address or 'local'})"
    console.print(
        f"rollout [bold]{name}[/bold]: {len(records)} instructions x {samples} samples, {where}, database {database}"
    )
    view = RolloutView(console, f"rollout {name}", total=len(specs))
    outcomes = _run_rollout(
        specs, context, database, out_dir, workers=workers, cluster=cluster, view=view, spending=spending
    )
    console.print(outcome_table(outcomes))
    failed = [o for o in outcomes if o.status == "failed"]
    counts = view.counts()
    console.print(f"{counts['done']} finished now, {counts['skipped']} finished before, {len(failed)} failed.")
    report_signal(database, sorted({spec.group_id for spec in specs}))
    if spending is not None:
        console.print(f"spent: {spending.line()}")
    if failed:
        errors.print(f"[red]{len(failed)} trajectories failed[/red]; run the same command again to continue them.")
        raise typer.Exit(1)
    if len(outcomes) < len(specs):
        errors.print(
            f"[yellow]budget spent[/yellow] ({spending.reached() if spending else ''}): "
            f"{len(outcomes)} of {len(specs)} trajectories taken up, {len(specs) - len(outcomes)} not started; "
            "run the same command (with a larger budget) to continue.",
            soft_wrap=True,
        )
        raise typer.Exit(BUDGET_EXIT_CODE)


def _rollout_context(
    settings: Settings, agent: AgentFlags, reward: RewardKind, *, logprobs: bool, token_ids: bool
) -> Any:
    """The context every trajectory runs with: the agent flags, what ``reward`` needs recorded, and
    the rollout's own sampling and step defaults."""
    from webgen_agent.apps.rollout.service import rollout_context

    replayed = reward.endswith("-replay")
    fields = agent.context_fields()
    fields["shared_policy"] = rollout_shared_policy(agent["loop"], agent["shared_policy"])
    if replayed:
        fields["replay_tests"] = True
    if reward.startswith("cascaded"):
        fields["requirement_checks"] = True
    return rollout_context(
        make_context(settings, **agent.sandbox(), **fields),
        max_steps=agent["max_steps"] or ROLLOUT_MAX_STEPS,
        temperature=ROLLOUT_TEMPERATURE if agent["temperature"] is None else agent["temperature"],
        top_p=ROLLOUT_TOP_P if agent["top_p"] is None else agent["top_p"],
        logprobs=logprobs,
        token_ids=token_ids,
    )


def _run_rollout(
    specs: list[Any],
    context: Any,
    database: Any,
    out_dir: Path,
    *,
    workers: int,
    cluster: RaySettings | None,
    view: Any,
    spending: Any,
) -> list[Any]:
    """The trajectories, here (``workers`` at a time) or on Ray, shown in ``view``."""
    import asyncio

    from webgen_agent.apps.rollout.service import run_rollout
    from webgen_agent.core.errors import ConfigError, ResumableStop

    try:
        with view, library_logs_kept(out_dir):
            if cluster is None:
                work = run_rollout(
                    specs,
                    context=context,
                    db_path=database,
                    out_dir=out_dir,
                    workers=workers,
                    listener=view,
                    spending=spending,
                )
            else:
                from webgen_agent.apps.cluster.rollout import run_rollout_on_ray

                work = run_rollout_on_ray(
                    specs,
                    context=context,
                    db=database,
                    out_dir=out_dir,
                    settings=cluster,
                    listener=view,
                    spending=spending,
                )
            outcomes = asyncio.run(work)
    except ConfigError as exc:
        fail(str(exc))
    except ResumableStop as exc:
        fail(f"{exc} (run the same command again to continue)" if "same command" not in str(exc) else str(exc), code=1)
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted[/yellow]: servers stopped; run the same command again to continue.")
        raise typer.Exit(130) from None
    return outcomes


@app.command()
def export(
    export_format: Annotated[ExportFormat, typer.Option("--format", help=formats_help())],
    out: Annotated[Path, typer.Option(help="Output file (JSON lines, or parquet with --parquet).", dir_okay=False)],
    groups: Annotated[list[str] | None, typer.Option(help="Only these group ids (repeat or comma-separate).")] = None,
    min_score: Annotated[
        float | None, typer.Option(help="sft: keep trajectories whose chosen step's reward is at least this.")
    ] = None,
    include_unfinished: Annotated[
        bool, typer.Option(help="Also read failed, interrupted and budget-stopped runs.")
    ] = False,
    reward: Annotated[
        RewardKind,
        typer.Option(
            help="step-grpo and rewards: step (WebGen-Agent) or cascaded (WebGen-R1); "
            "-replay: the function term from the recorded GUI tests' replays."
        ),
    ] = "step",
    critic_reward: Annotated[
        CriticReward, typer.Option(help="webloop: the Critic's reward, d (discriminability), h (helpfulness) or dh.")
    ] = "dh",
    parquet: Annotated[bool, typer.Option(help="Write parquet instead of JSON lines.")] = False,
    text: Annotated[
        bool,
        typer.Option(help=f"{text_formats_words()}: prompt and completion as strings rendered by --chat-template."),
    ] = False,
    chat_template: Annotated[
        Path | None, typer.Option(help="--text: local tokenizer (Hugging Face directory) whose chat template renders.")
    ] = None,
    drop_flat_groups: Annotated[
        bool, typer.Option(help="Leave out groups whose rewards are all equal (their advantages are all 0).")
    ] = False,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """Write trajectories as training data (formats in docs/exports.md)."""
    import asyncio

    from webgen_agent.apps.train.chat import ChatTemplateError, ChatTemplateRender
    from webgen_agent.checkpoints.export import export_trajectories
    from webgen_agent.checkpoints.writers import ChatRender

    db_path = existing_db(db)
    check_out_file(out)
    if text != (chat_template is not None):
        fail("--text and --chat-template TOKENIZER go together")
    render: ChatRender | None = None
    if text:
        if not FORMATS[export_format].text:
            fail(f"--text is for the {text_formats_words()} formats, not {export_format}")
        try:
            render = ChatTemplateRender(chat_template or Path())
        except ChatTemplateError as exc:
            fail(str(exc))
    _require_runs(db_path, split_values(groups), include_unfinished)
    try:
        report = asyncio.run(
            export_trajectories(
                export_format,
                out,
                db_path=db_path,
                groups=split_values(groups) or None,
                min_score=min_score,
                include_unfinished=include_unfinished,
                reward=reward,
                critic_reward=critic_reward,
                parquet=parquet,
                render=render,
                drop_flat_groups=drop_flat_groups,
            )
        )
    except ChatTemplateError as exc:  # a template that fails on some record
        fail(str(exc))
    warn_flat_groups(report.flat_groups, report.groups, dropped=drop_flat_groups)
    warn_lines("left out, as WebGen-RL's trainer could not train them as recorded (docs/rewards.md)", report.left_out)
    warn_lines(
        f"left out of {export_format}, which trains every assistant turn: started from a folder (run --from), "
        "their first is the user's project, not a model completion (docs/exports.md)",
        report.from_folder,
    )
    warn_lines("groups of one pool entry: advantage = raw reward (mean 0, std 1)", report.lone_groups)
    warn_lines("groups mixing pool rules (profiles)", report.mixed_groups)
    if report.records == 0:
        Path(report.path).unlink(missing_ok=True)
        fail(
            f"no {export_format} records from {report.trajectories} trajectories (nothing written): "
            "lower --min-score, or pick another --format"
        )
    console.print(
        f"wrote {report.records} {export_format} records from {report.trajectories} trajectories "
        f"in {report.groups} groups to {report.path} ({report.seconds:.2f}s)"
    )


def report_signal(database: Any, groups: list[str]) -> None:
    """How many of the rollout's groups (their finished trajectories) have zero reward variance, and why."""
    import asyncio

    from webgen_agent.checkpoints.flat_groups import flat_groups
    from webgen_agent.checkpoints.trajectories import load_trajectories, trainable

    trajectories, left_out = trainable(asyncio.run(load_trajectories(database, groups=groups)))
    warn_lines("left out of the exports, as WebGen-RL's trainer could not train them as recorded", left_out)
    flat = flat_groups(trajectories)
    read = len({t.group_id for t in trajectories})
    console.print(f"{len(flat)} of {read} groups with finished trajectories have zero reward variance.")
    warn_flat_groups(flat, read, dropped=None)


def warn_lines(title: str, lines: Sequence[str]) -> None:
    """A warning with its lines, when there are any."""
    if lines:
        errors.print(f"[yellow]warning[/yellow]: {title}:", soft_wrap=True)
        for line in lines:
            errors.print(f"  {line}", soft_wrap=True, markup=False)


def warn_flat_groups(flat: Sequence[FlatGroup], groups: int, *, dropped: bool | None) -> None:
    """One warning line per flat group (a group with no training signal), and what was (or export
    can be) done with them; ``dropped`` None: nothing is written yet (rollout)."""
    if not flat:
        return
    done = {
        True: "left out (--drop-flat-groups)",
        False: "written; --drop-flat-groups leaves them out",
        None: "`export --drop-flat-groups` leaves them out",
    }[dropped]
    errors.print(
        f"[yellow]warning[/yellow]: {len(flat)} of {groups} groups have zero reward variance "
        f"(every advantage 0, no training signal), {done}:",
        soft_wrap=True,
    )
    for group in flat:
        errors.print(f"  {group.line()}", soft_wrap=True, markup=False)


def _require_runs(database: Any, groups: list[str], include_unfinished: bool) -> None:
    """One line (and nothing written) when no run would be exported, saying why."""
    from collections import Counter

    from webgen_agent.checkpoints.runs import RunIndex

    runs = [r for r in RunIndex(database).list() if not groups or r.group_id in groups]
    if not runs:
        fail(f"no runs in {database}" + (f" in groups {', '.join(groups)}" if groups else ""))
    if not include_unfinished and not any(r.status == "finished" for r in runs):
        statuses = ", ".join(f"{n} {status}" for status, n in Counter(r.status for r in runs).items())
        fail(f"none of the {len(runs)} runs has finished ({statuses}); --include-unfinished exports them too")
