"""The command line's Typer classes, consoles and the one-line error every command ends with."""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer._coercion import PassThroughRuntimeParam
from typer.core import TyperCommand, TyperGroup, TyperOption


def _light_params(params: list[Any]) -> list[Any]:
    """The command's parameters, made cheap to start with.

    Flags show no type in help: a flag takes no value, yet Typer's rich help prints ``<bool>``
    beside it (its plain help leaves it out); an empty metavar fills that column with nothing.

    Typer builds a pydantic ``TypeAdapter`` for every parameter it processes, given or not, so any
    command imported pydantic (about 0.1 s of a 0.3 s start) before it did anything. Typer's own flags
    (``--help``, the completion flags) default to None, which is not a bool: not given is off either
    way, so False. A plain ``str`` parameter gets Typer's own pass-through coercion, which accepts a
    ``str`` as it is (what click hands over from the command line or the environment) and builds no
    adapter; every other type keeps Typer's. Typer keeps the coercion in a private attribute: if a
    later Typer drops it, parameters keep Typer's coercion and only the start is slower
    (tests/test_cli_start.py says so)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        if param.name in _TYPER_FLAGS and param.default is None:
            param.default = False
        described = getattr(param, "type_descriptor", None)
        if described is not None and described.annotation is str and getattr(param, "_runtime_param", 0) is None:
            if described.parameter_info.parser is None and described.choices is None:
                param._runtime_param = PassThroughRuntimeParam(parameter_info=described.parameter_info, annotation=str)
    return params


_TYPER_FLAGS = frozenset({"help", "install_completion", "show_completion"})


class Command(TyperCommand):
    """A command of this command line (``CommandApp`` makes every command one)."""

    def get_params(self, ctx: Any) -> list[Any]:  # ctx: the click Context Typer ships
        return _light_params(super().get_params(ctx))


class Group(TyperGroup):
    """The ``webgen-agent`` group itself (its ``--help`` and ``--version``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _light_params(super().get_params(ctx))


class CommandApp(typer.Typer):
    """``typer.Typer`` for this command line: its group and commands are ``Group`` and ``Command``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=kwargs.pop("cls", Group), **kwargs)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or Command, **kwargs)


def _width() -> int | None:
    """The output's width: the terminal's or ``COLUMNS`` (rich reads both: None); piped, the width of
    the terminal the command was typed in; with no terminal at all (logs, CI) 160 columns rather than
    rich's 80."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return None
    for stream in (sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            continue
    return 160


console = Console(width=_width())


errors = Console(stderr=True)


def split_values(values: list[str] | None) -> list[str]:
    """Repeated options and comma-separated lists both work: ``--ids a,b --ids c``."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def fail(message: str, code: int = 2) -> NoReturn:
    # Unwrapped (one line stays one line in logs) and escaped (a log tail may hold [brackets]).
    errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def run_async(coro: Any, *, run_id: str | None = None) -> Any:
    """Run ``coro``; Ctrl-C stops it with one line saying how to continue ``run_id`` (the run it drives)."""
    import asyncio

    from webgen_agent.apps import ctrl_c
    from webgen_agent.apps.cli.library_logs import report_library_logs

    try:
        return asyncio.run(ctrl_c.stopped_by_ctrl_c(coro))
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        if isinstance(exc, asyncio.CancelledError) and not ctrl_c.pressed():
            raise
        how = (
            f"continue with `webgen-agent resume {run_id}`"
            if run_id
            else "`webgen-agent runs` lists the interrupted runs, `webgen-agent resume ID` continues one"
        )
        errors.print(f"[yellow]interrupted[/yellow]: servers stopped; {escape(how)}.", soft_wrap=True)
        raise typer.Exit(130) from None
    finally:
        report_library_logs()
