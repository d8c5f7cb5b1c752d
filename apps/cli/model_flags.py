"""The model, price and database flags every command that talks to models takes (``with_model_flags``)."""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any

import typer

from webgen_agent.apps.cli.base import fail
from webgen_agent.core.names import DEFAULT_DB

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
    ("fallback_model", "Model every role falls back to once its endpoint stays down for the patience."),
    ("fallback_base_url", "Endpoint of the fallback model (default: the role's own endpoint)."),
    ("patience", "Seconds one model call waits out 429, 5xx, timeouts and dropped connections (default 180)."),
    ("model_timeout", "Seconds before a hanging model call is cut and retried (default 600)."),
]


_SECONDS_FLAGS = frozenset({"patience", "model_timeout"})


# Prices in USD per million tokens (docs/costs.md); unknown unless given (flag or WEBGEN_<NAME>).
_PRICE_FLAGS: list[tuple[str, str]] = [
    ("price_in", "USD per million input tokens, every role (default: WEBGEN_PRICE_IN; unknown if unset)."),
    ("price_out", "USD per million output tokens, every role (default: WEBGEN_PRICE_OUT)."),
    ("coder_price_in", "Coder model: USD per million input tokens."),
    ("coder_price_out", "Coder model: USD per million output tokens."),
    ("vlm_price_in", "Vision model (judge, GUI agent): USD per million input tokens."),
    ("vlm_price_out", "Vision model (judge, GUI agent): USD per million output tokens."),
    ("feedback_price_in", "Feedback model: USD per million input tokens."),
    ("feedback_price_out", "Feedback model: USD per million output tokens."),
]


def with_model_flags(fn: Any) -> Any:
    """Add the model flags to a command; the command receives them as ``settings: Settings``."""
    signature = inspect.signature(fn)
    # Resolve the string annotations (postponed evaluation) so typer sees the Annotated options;
    # ``settings`` is left out (its type is imported only when the command runs).
    params = [
        p.replace(annotation=resolved_annotation(p.annotation, fn))
        for p in signature.parameters.values()
        if p.name != "settings"
    ]
    for name, help_text in _MODEL_FLAGS:
        seconds = name in _SECONDS_FLAGS
        option = typer.Option(help=help_text, rich_help_panel="Models", min=0 if seconds else None)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[float | None, option] if seconds else Annotated[str | None, option],
            )
        )
    for name, help_text in _PRICE_FLAGS:
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[float | None, typer.Option(min=0, help=help_text, rich_help_panel="Prices")],
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
        explicit = {name: kwargs.pop(name) for name, _ in [*_MODEL_FLAGS, *_PRICE_FLAGS]}
        explicit["db"] = kwargs.pop("db")
        from webgen_agent.core.context import Settings

        try:
            settings = Settings(**{k: v for k, v in explicit.items() if v is not None})
        except Exception as exc:  # pydantic-settings validation: show one line
            fail(f"invalid settings: {exc}")
        return fn(*args, settings=settings, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer also reads the type hints: the resolved ones, without ``settings``.
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def resolved_annotation(annotation: Any, fn: Any) -> Any:
    """A parameter's annotation as an object (``from __future__ import annotations`` leaves a string)."""
    if not isinstance(annotation, str):
        return annotation
    # What typing.get_type_hints does per annotation; done here one parameter at a time.
    return eval(annotation, fn.__globals__)  # the command's own source text


def db_option() -> Any:
    return typer.Option(help=f"Run database (default: WEBGEN_DB or {DEFAULT_DB}).")
