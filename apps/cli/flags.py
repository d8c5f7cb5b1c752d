"""Groups of flags declared once and added to commands by a decorator (``with_flags``).

A group is a registry of ``Flag`` entries (apps/cli/agent_flags.py's agent flags, the benchmark's
evaluation flags, the Ray flags); a command decorated with one lists none of them in its own
signature and receives the values given as one ``FlagValues`` argument.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webgen_agent.apps.cli.model_flags import resolved_annotation


@dataclass(frozen=True)
class Flag:
    """One flag: its type and option (the help shared by every command taking it), and its default."""

    annotation: Any
    default: Any = None


class FlagValues:
    """The values of one group's flags as a command was given them."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)


def with_flags(
    flags: dict[str, Flag],
    into: str,
    values: Callable[[dict[str, Any]], Any] = FlagValues,
    defaults: dict[str, Any] | None = None,
) -> Any:
    """Add ``flags`` to a command (keyword-only, after its own parameters); the command receives
    them as one argument named ``into``, ``values(given)``. ``defaults``: the command's own defaults."""
    defaults = defaults or {}

    def decorate(fn: Any) -> Any:
        signature = inspect.signature(fn)
        # What other decorators pass in (keyword-only without a default: ``settings``, another group's
        # values) keeps its annotation: its type is imported only when the command runs.
        params = [
            p if _passed_in(p) else p.replace(annotation=resolved_annotation(p.annotation, fn))
            for p in signature.parameters.values()
            if p.name != into
        ]
        trailing = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        params = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        for name, flag in flags.items():
            default = defaults.get(name, flag.default)
            params.append(
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=flag.annotation)
            )
        params += trailing

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in flags}
            return fn(*args, **{into: values(given)}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def _passed_in(param: inspect.Parameter) -> bool:
    return param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is inspect.Parameter.empty
