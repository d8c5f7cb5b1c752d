"""``--ray [ADDRESS]`` and its actor flags, of ``rollout`` and ``bench``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from webgen_agent.apps.cli.base import Command, fail
from webgen_agent.apps.cli.flags import Flag, with_flags

RAY_LOCAL = "local"


RAY_HELP = (
    "Run on Ray: --ray alone (or --ray local) starts a Ray instance on this machine for the command; "
    "--ray auto or --ray HOST:PORT joins an existing cluster."
)


class RayCommand(Command):
    """A command whose ``--ray`` takes an optional value: ``--ray`` alone means a local Ray instance.

    Click's options with an optional value (``is_flag=False, flag_value=...``) did not come along
    into the parser Typer ships, so a bare ``--ray`` (last, or followed by another option) is given
    its value here before parsing. The commands using this class take no positional arguments, so a
    word after ``--ray`` is always its address.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: the click Context Typer ships
        filled: list[str] = []
        for position, arg in enumerate(args):
            filled.append(arg)
            following = args[position + 1] if position + 1 < len(args) else None
            if arg == "--ray" and (following is None or following.startswith("-")):
                filled.append(RAY_LOCAL)
        return super().parse_args(ctx, filled)


# The Ray flags of ``rollout`` and ``bench`` (commands declared with ``cls=RayCommand``).
RAY_FLAGS: dict[str, Flag] = {
    "ray": Flag(Annotated[str | None, typer.Option(metavar="[ADDRESS]", help=RAY_HELP, rich_help_panel="Ray")]),
    "actors": Flag(
        Annotated[
            int | None,
            typer.Option(
                min=1, help="Ray actors to start (default: as many as the cluster's CPUs hold).", rich_help_panel="Ray"
            ),
        ]
    ),
    "runs_per_actor": Flag(
        Annotated[int, typer.Option(min=1, help="Runs each Ray actor drives at the same time.", rich_help_panel="Ray")],
        2,
    ),
    "cpus_per_run": Flag(
        Annotated[
            float,
            typer.Option(
                min=0.01,
                help="CPUs a Ray actor reserves per run (a run keeps about one core busy).",
                rich_help_panel="Ray",
            ),
        ],
        1.0,
    ),
}


def _ray_settings(given: dict[str, Any]) -> Any:
    return ray_settings(
        given["ray"], actors=given["actors"], runs_per_actor=given["runs_per_actor"], cpus_per_run=given["cpus_per_run"]
    )


def with_ray_flags(fn: Any) -> Any:
    """Add the Ray flags to a command, which receives ``cluster``: ``RaySettings`` for ``--ray``, else None."""
    return with_flags(RAY_FLAGS, "cluster", _ray_settings)(fn)


def ray_settings(address: str | None, *, actors: int | None, runs_per_actor: int, cpus_per_run: float) -> Any:
    """``RaySettings`` for ``--ray [ADDRESS]`` (None without --ray); checks Ray is installed."""
    if address is None:
        return None
    from webgen_agent.apps.cluster.settings import RaySettings, import_ray
    from webgen_agent.core.errors import ConfigError

    try:
        import_ray()
    except ConfigError as exc:
        fail(str(exc))
    address = address.strip()
    return RaySettings(
        address="" if address.lower() == RAY_LOCAL else address,
        actors=actors,
        runs_per_actor=runs_per_actor,
        cpus_per_run=cpus_per_run,
    )
