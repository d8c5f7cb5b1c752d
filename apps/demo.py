"""The offline demo: the built-in scripted scenario drives a real Vite + React build over HTTP."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from importlib import resources as package_files
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console

from webgen_agent.apps.progress import ProgressView
from webgen_agent.apps.report.html import write_report
from webgen_agent.apps.report.model import REPORT_NAME
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.graph.api import RunResult, run_requirement

DEMO_REQUIREMENT = (
    "Build a to-do list web app: type a task into a text field, add it with a button, and see it "
    "appear in a list together with a count of tasks. Clean, modern look with a navy accent colour."
)


@contextlib.contextmanager
def scripted_models(scenario: str = "demo", **overrides: Any) -> Iterator[AgentContext]:
    """The offline scripted model server playing a shipped ``scenario``, and a run context whose
    three roles are its models (``overrides``: more context fields); the server stops on exit."""
    with ScriptedServer(Scenario.load(scenario_path(scenario))) as server:
        yield scripted_context(server.base_url, **overrides)


def scenario_path(name: str) -> Path:
    """Path of a scenario shipped with the package (``demo`` and the test scenarios)."""
    return Path(str(package_files.files("webgen_agent.apps.scripted") / "scenarios" / f"{name}.json"))


def scripted_context(base_url: str, **overrides: Any) -> AgentContext:
    """A run context whose three roles are the scripted server's models."""

    def role(name: str) -> ModelSettings:
        # The scripted server answers at once: a short patience and quick retries.
        return ModelSettings(
            model=f"scripted-{name}",
            base_url=base_url,
            api_key=SecretStr("scripted"),
            patience_s=10.0,
            retry_initial_s=0.1,
            retry_max_s=1.0,
        )

    return AgentContext.model_validate(
        {"coder": role("coder"), "vlm": role("vlm"), "feedback": role("feedback"), **overrides}
    )


async def run_demo(
    *, out_dir: Path | None, db_path: str | Path | Database, console: Console | None = None
) -> RunResult:
    """Play the demo scenario; the run's folder ends up with the site, screenshots and ``report.html``."""
    scenario = Scenario.load(scenario_path("demo"))
    run_id = time.strftime("demo-%Y%m%d-%H%M%S")
    with ScriptedServer(scenario) as server:
        # The scripted model is free: every cost is $0.0000, not unknown ("?" beside "$0.0000" said neither).
        free = {"input_usd_per_mtok": 0.0, "output_usd_per_mtok": 0.0}
        context = scripted_context(
            server.base_url, max_steps=8, prices={role: free for role in ("coder", "vlm", "feedback")}
        )
        if console is None:
            result = await run_requirement(
                DEMO_REQUIREMENT, context=context, run_id=run_id, out_dir=out_dir, db_path=db_path
            )
        else:
            console.print(f"scripted model server: {server.base_url}  run id: [bold]{run_id}[/bold]")
            with ProgressView(console, f"demo {run_id}") as view:
                result = await run_requirement(
                    DEMO_REQUIREMENT,
                    context=context,
                    run_id=run_id,
                    out_dir=out_dir,
                    db_path=db_path,
                    on_progress=view.on_event,
                )
    await write_report(run_id, db_path=db_path, out=Path(result.out_dir) / REPORT_NAME)
    return result
