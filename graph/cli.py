"""The ``webgen-agent`` command line (typer)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.graph.context import DEFAULT_DB, AgentContext, ConfigError, CriticMode, Settings

app = typer.Typer(
    name="webgen-agent",
    help="Generate working websites with a LangGraph agent loop, and export its trajectories.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Logs and CI have no terminal: use a readable width there instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)

# Flags every command that talks to models accepts; explicit flags beat the environment.
_MODEL_FLAGS: list[tuple[str, str]] = [
    ("base_url", "OpenAI-compatible endpoint for all roles (default: OPENAI_BASE_URL)."),
    ("model", "Model name for all roles (default: WEBGEN_MODEL)."),
    ("coder_model", "Coder model (Generator, Refiner)."),
    ("vlm_model", "Vision model (Screenshot-Judge, GUI agent)."),
    ("feedback_model", "Feedback model (GUI test and verdict, llm Critic)."),
    ("coder_base_url", "Endpoint of the coder model."),
    ("vlm_base_url", "Endpoint of the vision model."),
    ("feedback_base_url", "Endpoint of the feedback model."),
]


def with_model_flags(fn: Any) -> Any:
    """Add the model flags to a command; the command receives them as ``settings: Settings``."""
    signature = inspect.signature(fn)
    # Resolve the string annotations (postponed evaluation) so typer sees the Annotated options.
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in signature.parameters.values() if p.name != "settings"]
    for name, help_text in _MODEL_FLAGS:
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[str | None, typer.Option(help=help_text, rich_help_panel="Models")],
            )
        )
    params.append(
        inspect.Parameter(
            "db",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[str | None, typer.Option(help=f"Run database (default: WEBGEN_DB or {DEFAULT_DB}).")],
        )
    )

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        explicit = {name: kwargs.pop(name) for name, _ in _MODEL_FLAGS}
        explicit["db"] = kwargs.pop("db")
        try:
            settings = Settings(**{k: v for k, v in explicit.items() if v is not None})
        except Exception as exc:  # pydantic-settings validation: show one line
            fail(f"invalid settings: {exc}")
        return fn(*args, settings=settings, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper


def db_option() -> Any:
    return typer.Option(help=f"Run database (default: WEBGEN_DB or {DEFAULT_DB}).")


def resolve_db(db: str | None) -> Path:
    return Path(db or Settings().db)


def fail(message: str, code: int = 2) -> None:
    errors.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def make_context(settings: Settings, **overrides: Any) -> AgentContext:
    try:
        return settings.to_context(**{k: v for k, v in overrides.items() if v is not None})
    except ConfigError as exc:
        fail(str(exc))
        raise  # unreachable; keeps type checkers calm


def _run_async(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted[/yellow]: servers stopped; continue with `webgen-agent resume RUN_ID`.")
        raise typer.Exit(130) from None


def _print_result(result: Any) -> None:
    from webgen_agent.graph.progress import step_table

    console.print(step_table(result.summary))
    console.print(f"output folder: {result.out_dir}")
    if result.site_dir:
        console.print(f"site: {result.site_dir} (step {result.chosen_step})")


async def _run_with_view(title: str, start: Any) -> Any:
    from webgen_agent.graph.progress import ProgressView

    with ProgressView(console, title) as view:
        return await start(view.on_event)


@app.command()
@with_model_flags
def run(
    requirement: Annotated[str, typer.Argument(help="The website requirement, in natural language.")],
    run_id: Annotated[str | None, typer.Option(help="Name the run (default: generated).")] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ./webgen-runs/RUN_ID).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Coder steps (default 20).")] = None,
    error_limit: Annotated[int | None, typer.Option(help="Errored steps before backtracking (default 5).")] = None,
    critic: Annotated[CriticMode | None, typer.Option(help="template or llm.")] = None,
    allow_shell: Annotated[bool, typer.Option(help="Run shell actions the coder writes.")] = False,
    group_id: Annotated[str, typer.Option(help="Group (instruction id) recorded with the run.")] = "",
    *,
    settings: Settings,
) -> None:
    """Generate a website for REQUIREMENT."""
    from webgen_agent.graph.api import run_requirement
    from webgen_agent.tools.models import ModelCallError

    context = make_context(settings, max_steps=max_steps, error_limit=error_limit, critic=critic,
                           allow_shell=allow_shell or None)
    from webgen_agent.checkpoints.runs import new_run_id

    run_id = run_id or new_run_id()
    console.print(f"run id: [bold]{run_id}[/bold]")
    try:
        result = _run_async(_run_with_view(
            f"run {run_id}",
            lambda on_event: run_requirement(requirement, context=context, run_id=run_id, out_dir=out,
                                             group_id=group_id, db_path=Path(settings.db), on_progress=on_event),
        ))
    except (ModelCallError, ValueError) as exc:
        fail(f"{exc} (the run is saved; `webgen-agent resume {run_id}` continues it)", code=1)
    _print_result(result)


@app.command()
@with_model_flags
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    *,
    settings: Settings,
) -> None:
    """Continue an interrupted or failed run from its last checkpoint."""
    from webgen_agent.graph.api import resume_run
    from webgen_agent.tools.models import ModelCallError

    recorded = RunIndex(settings.db).settings(run_id)
    context = make_context(settings, **recorded)
    try:
        result = _run_async(_run_with_view(
            f"resume {run_id}",
            lambda on_event: resume_run(run_id, context=context, db_path=Path(settings.db), on_progress=on_event),
        ))
    except (ModelCallError, ValueError) as exc:
        fail(str(exc), code=1)
    _print_result(result)


@app.command()
def preview(
    folder: Annotated[Path, typer.Argument(help="A project folder (package.json or index.html).", exists=True,
                                           file_okay=False)],
    screenshot: Annotated[Path, typer.Option(help="Where to save the PNG.")] = Path("preview.png"),
    width: int = 1280,
    height: int = 800,
    timeout: Annotated[float, typer.Option(help="Start deadline in seconds.")] = 60.0,
) -> None:
    """Run any project folder with the executor and save a screenshot of its landing page."""
    from webgen_agent.graph.preview import preview_folder

    report = _run_async(preview_folder(folder, screenshot, viewport=(width, height), start_timeout_s=timeout))
    console.print_json(json.dumps(report))
    if not report["ok"]:
        raise typer.Exit(1)


@app.command("scripted-server")
def scripted_server(
    scenario: Annotated[Path, typer.Option(help="Scenario JSON file.", exists=True, dir_okay=False)],
    host: str = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8000,
) -> None:
    """Serve the scripted OpenAI-compatible model server (for tests and offline demos)."""
    from webgen_agent.tools.scripted.server import serve

    serve(scenario, host=host, port=port)


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(help="Output folder (default: ./webgen-runs/demo-<time>).")] = None,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """Fully offline demo: a scripted model builds a real Vite + React todo app over four steps."""
    from webgen_agent.checkpoints.report import REPORT_NAME
    from webgen_agent.graph.demo import run_demo

    result = _run_async(run_demo(out_dir=out, db_path=resolve_db(db), console=console))
    _print_result(result)
    console.print(f"report: {Path(result.out_dir) / REPORT_NAME}", soft_wrap=True, highlight=False)
    if result.status != "finished":
        raise typer.Exit(1)


@app.command()
def runs(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    db: Annotated[str | None, db_option()] = None,
) -> None:
    """List the runs in the database with status, requirement and best scores."""
    from rich.table import Table

    records = RunIndex(resolve_db(db)).list()
    if json_output:
        for record in records:
            sys.stdout.write(record.model_dump_json(exclude={"settings"}) + "\n")
        return
    table = Table(title=f"runs in {resolve_db(db)}")
    for column in ("run id", "status", "steps", "chosen", "screenshot", "gui", "group", "requirement"):
        table.add_column(column)
    for r in records:
        table.add_row(r.run_id, r.status, str(r.steps), str(r.chosen_step if r.chosen_step is not None else "-"),
                      f"{r.best_screenshot}/5", f"{r.best_gui}/5", r.group_id, r.requirement[:60])
    console.print(table)


# Commands of the other subsystems register themselves on ``app`` when imported (one module each).
from webgen_agent.graph import cli_history  # noqa: E402,F401
from webgen_agent.graph import cli_bench  # noqa: E402,F401
from webgen_agent.graph import cli_report  # noqa: E402,F401
from webgen_agent.graph import cli_export  # noqa: E402,F401
