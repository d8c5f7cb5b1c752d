"""``webgen-agent bench``: WebGen-Bench generation, evaluation and scoring in one command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from webgen_agent.apps.bench.modes import VerdictMode
from webgen_agent.apps.cli.agent_flags import BUDGET_FLAGS, RUN_FLAGS, AgentFlags, with_agent_flags
from webgen_agent.apps.cli.base import CommandApp, console, errors, fail, split_values
from webgen_agent.apps.cli.common import (
    check_before_run,
    make_context,
    resolve_db,
    sandbox_settings,
    warn_unconfined,
    whole_budget,
)
from webgen_agent.apps.cli.flags import Flag, FlagValues, with_flags
from webgen_agent.apps.cli.library_logs import library_logs_kept
from webgen_agent.apps.cli.model_flags import with_model_flags
from webgen_agent.apps.cli.out_paths import check_out_folder
from webgen_agent.apps.cli.ray_flags import (
    RayCommand,
    with_ray_flags,
)

if TYPE_CHECKING:
    from rich.table import Table

    from webgen_agent.apps.bench.config import EvalSettings
    from webgen_agent.apps.bench.service import RemoteBenchFactory
    from webgen_agent.apps.bench.views import BenchSummary, Rates
    from webgen_agent.apps.cluster.settings import RaySettings
    from webgen_agent.core.context import Settings
    from webgen_agent.core.costs import Spending

app = CommandApp()

_EVAL = "Evaluation"


def _percent(value: float) -> str:
    return f"{value:.1f}%"


def _row(table: Table, group: str, rates: Rates, appearance: float | None = None) -> None:
    table.add_row(
        group,
        str(rates.test_cases),
        _percent(rates.accuracy),
        _percent(rates.yes_rate),
        _percent(rates.partial_rate),
        _percent(rates.no_rate),
        _percent(rates.start_failed_rate),
        f"{appearance:.2f}" if appearance is not None else "",
    )


def summary_table(summary: BenchSummary) -> Table:
    """Accuracy, verdict rates and appearance: overall, per instruction category, per test-case category."""
    from rich.table import Table

    table = Table(title=f"WebGen-Bench: {summary.instructions} instructions, {summary.test_cases} test cases")
    for column in ("group", "cases", "accuracy", "YES", "PARTIAL", "NO", "start failed", "appearance"):
        table.add_column(column, justify="left" if column == "group" else "right")
    _row(table, "all", summary.overall, summary.appearance)
    table.add_section()
    for name, rates in summary.by_instruction_category.items():
        _row(table, f"instruction: {name or '-'}", rates, summary.appearance_by_instruction_category.get(name))
    table.add_section()
    for name, rates in summary.by_case_category.items():
        _row(table, f"test case: {name or '-'}", rates)
    return table


def _cost_lines(summary: BenchSummary) -> list[str]:
    lines = []
    if summary.generation is not None and summary.generation.units:
        g = summary.generation
        lines.append(
            f"generation: {g.seconds_per_unit:.1f} s and {g.tokens_per_unit:,.0f} tokens per instruction "
            f"({g.units} runs)"
        )
    e = summary.evaluation
    if e.units:
        lines.append(f"evaluation: {e.seconds_per_unit:.1f} s and {e.tokens_per_unit:,.0f} tokens per test case")
    if summary.overall.missing:
        lines.append(
            f"[yellow]{summary.overall.missing} test case(s) have no result yet (counted 0); "
            "re-run the same command to finish[/yellow]"
        )
    return lines


def _notify(message: str) -> None:
    # Progress lines quote logs and model answers: print them as plain text, never as markup.
    console.print(message, markup=False, highlight=False)


# The evaluation's flags (bench only): its models, endpoints, action budget and verdict rule.
EVAL_FLAGS: dict[str, Flag] = {
    "eval_vlm_model": Flag(
        Annotated[str | None, typer.Option(help="GUI-agent model (default: the agent's vlm).", rich_help_panel=_EVAL)]
    ),
    "eval_appearance_model": Flag(
        Annotated[
            str | None, typer.Option(help="Appearance grader (default: --eval-vlm-model).", rich_help_panel=_EVAL)
        ]
    ),
    "eval_feedback_model": Flag(
        Annotated[
            str | None, typer.Option(help="Verdict model (default: the agent's feedback).", rich_help_panel=_EVAL)
        ]
    ),
    "eval_base_url": Flag(
        Annotated[
            str | None,
            typer.Option(help="Endpoint of the evaluation models (default: the agent's).", rich_help_panel=_EVAL),
        ]
    ),
    "eval_appearance_base_url": Flag(
        Annotated[str | None, typer.Option(help="Endpoint of the appearance grader.", rich_help_panel=_EVAL)]
    ),
    "eval_api_key": Flag(
        Annotated[
            str | None,
            typer.Option(
                envvar="WEBGEN_EVAL_API_KEY",
                show_envvar=True,
                help="API key of the evaluation endpoints.",
                rich_help_panel=_EVAL,
            ),
        ]
    ),
    "eval_max_actions": Flag(
        Annotated[int, typer.Option(min=1, help="GUI-agent actions per test case.", rich_help_panel=_EVAL)], 15
    ),
    "eval_verdict": Flag(
        Annotated[
            VerdictMode,
            typer.Option(
                help="webgen-bench: WebGen-Bench's rule, YES anywhere in the agent's final answer, else PARTIAL, "
                "else NO; strict: the answer must start with the word (the feedback model judges otherwise); "
                "feedback: the feedback model always decides.",
                rich_help_panel=_EVAL,
            ),
        ],
        "webgen-bench",
    ),
    "retry_errors": Flag(
        Annotated[
            bool, typer.Option(help="Redo results that ended in an infrastructure error.", rich_help_panel=_EVAL)
        ],
        False,
    ),
}


@app.command(cls=RayCommand)
@with_model_flags
@with_ray_flags
@with_flags(EVAL_FLAGS, "evaluation_flags")
@with_agent_flags(*RUN_FLAGS, *BUDGET_FLAGS)
def bench(
    data: Annotated[
        Path, typer.Option(help="WebGen-Bench JSON-lines file (e.g. test.jsonl).", exists=True, dir_okay=False)
    ],
    out: Annotated[Path, typer.Option(help="Output folder; the same command again continues where it stopped.")],
    ids: Annotated[
        list[str] | None, typer.Option(help="Only these record ids (repeat, or separate with commas).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N records.")] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Runs, sites and GUI sessions at once (with --ray: --runs-per-actor per actor).")
    ] = 2,
    evaluate_only: Annotated[
        Path | None,
        typer.Option(
            "--evaluate-only",
            metavar="SITES_DIR",
            exists=True,
            file_okay=False,
            help="Evaluate sites made elsewhere (one folder per record id) instead of generating.",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Run ids are bench-NAME-<id> (default: the --out folder's name)."),
    ] = None,
    *,
    settings: Settings,
    agent: AgentFlags,
    cluster: RaySettings | None,
    evaluation_flags: FlagValues,
) -> None:
    """Run WebGen-Bench: generate a site per instruction, test it with GUI agents, grade it, score.

    Exits with 1 when some test cases have no result yet (re-run the same command to finish).
    --budget-usd / --budget-tokens count the whole generation: once spent, no run is started.
    """
    import asyncio

    from webgen_agent.apps.bench.service import run_bench
    from webgen_agent.core.errors import ConfigError
    from webgen_agent.tools.webgen_bench import BenchDataError, load_records

    try:
        records = load_records(data, ids=split_values(ids) or None, limit=limit)
        if not records:
            raise BenchDataError(f"{data}: no records selected (the file is empty, or --ids / --limit select none)")
        evaluation = _evaluation(settings, agent, evaluation_flags, workers)
    except (BenchDataError, ConfigError) as exc:
        fail(str(exc))
    context = None
    spending = None
    if evaluate_only is None:
        context = make_context(agent.sampled(settings), **agent.sandbox(), **agent.context_fields())
        spending = whole_budget(agent["budget_usd"], agent["budget_tokens"], context)
    # An explicit --db / WEBGEN_DB is honoured; otherwise the benchmark keeps its runs in its own folder.
    db_path = resolve_db(settings.db) if "db" in settings.model_fields_set else None
    check_out_folder(out)
    if context is not None:
        check_before_run(context, db_path)
    if agent["no_sandbox"]:
        warn_unconfined()  # the evaluation's installs and dev servers too
    where = "" if cluster is None else f", on Ray ({cluster.address or 'local'})"
    cases = sum(len(r.test_cases) for r in records)
    console.print(f"{len(records)} instruction(s), {cases} test case(s) -> {out}{where}")
    try:
        with library_logs_kept(out):
            summary = asyncio.run(
                run_bench(
                    records,
                    data=data,
                    out_dir=out,
                    eval_settings=evaluation,
                    context=context,
                    sites_dir=evaluate_only,
                    db_path=db_path,
                    name=name,
                    retry_errors=evaluation_flags["retry_errors"],
                    notify=_notify,
                    deps_cache_dir=Path(settings.deps_cache) if settings.deps_cache else None,
                    spending=spending,
                    remote=_on_ray(cluster),
                )
            )
    except ConfigError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted[/yellow]: results so far are kept; run the same command to continue.")
        raise typer.Exit(130) from None
    _print_summary(summary, spending, out)


def _on_ray(cluster: RaySettings | None) -> RemoteBenchFactory | None:
    """``run_bench``'s generation and evaluation on Ray for ``--ray`` (imported only then)."""
    if cluster is None:
        return None
    from webgen_agent.apps.cluster.bench import on_ray

    return on_ray(cluster)


def _evaluation(settings: Settings, agent: AgentFlags, flags: FlagValues, workers: int) -> EvalSettings:
    """The evaluation's settings: its flags over the agent's models, at the profile's viewport, in the
    sandbox the agent flags ask for (checked here: every site is installed and started in it)."""
    from webgen_agent.apps.bench.config import EvalModelFlags, eval_settings
    from webgen_agent.tools.sandbox import require_sandbox

    models = EvalModelFlags(
        vlm_model=flags["eval_vlm_model"],
        appearance_model=flags["eval_appearance_model"],
        feedback_model=flags["eval_feedback_model"],
        base_url=flags["eval_base_url"],
        appearance_base_url=flags["eval_appearance_base_url"],
        api_key=flags["eval_api_key"],
    )
    evaluation = eval_settings(
        settings,
        models,
        max_actions=flags["eval_max_actions"],
        verdict=flags["eval_verdict"],
        workers=workers,
        offline_pages=agent["offline_pages"] or None,
        sandbox=sandbox_settings(agent["no_sandbox"], agent["allow_host"]),
        profile=agent["profile"],
    )
    if evaluation.sandbox.enabled:
        require_sandbox()  # one line naming --no-sandbox
    return evaluation


def _print_summary(summary: BenchSummary, spending: Spending | None, out: Path) -> None:
    """The score table and costs; exits with 1 while some test cases have no result."""
    console.print(summary_table(summary))
    for line in _cost_lines(summary):
        console.print(line)
    if spending is not None:
        console.print(f"generation spent: {spending.line()}")
    console.print(f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}")
    if summary.overall.missing:
        raise typer.Exit(1)  # scripts can tell an incomplete benchmark from a finished one
