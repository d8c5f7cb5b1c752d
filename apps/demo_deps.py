"""The demo's npm packages, installed into the dependency cache ahead of the first demo
(``webgen-agent demo --prepare``; scripts/setup.sh runs it). Imports no graph, browser or model client."""

from __future__ import annotations

import tempfile
from importlib import resources as package_files
from pathlib import Path

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import SandboxSettings
from webgen_agent.nodes.local_dirs import deps_cache_for, registry_for
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.site import InstallResult, SiteRunner

DEMO_FIRST_REPLY = ("scenarios", "demo", "step0.txt")  # the scripted coder's first reply: it writes package.json


async def prepare_demo(db_path: str | Path | Database, *, sandbox: bool = True) -> InstallResult:
    """Install the demo's npm packages (React, Vite) into the dependency cache of runs using
    ``db_path`` without running the demo: the package.json its first step writes gets the
    executor's own install (sandboxed, cached by manifest), so later demos need no npm registry.
    ``sandbox=False``: npm runs unconfined (an image build, where user namespaces are refused; the
    manifest is the demo's own and the shared cache installs with lifecycle scripts off)."""
    reply_file = package_files.files("webgen_agent.apps.scripted").joinpath(*DEMO_FIRST_REPLY)
    reply = parse_reply(reply_file.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="webgen-demo-deps-") as tmp:
        workspace = Path(tmp) / "site"
        workspace.mkdir()
        for action in reply.files:
            if action.path == "package.json":
                (workspace / action.path).write_text(action.content, encoding="utf-8")
        runner = SiteRunner(
            workspace,
            log_dir=Path(tmp) / "logs",
            deps_cache_dir=deps_cache_for(db_path),
            registry=registry_for(db_path),
            sandbox=None if sandbox else SandboxSettings(enabled=False),
        )
        return await runner.ensure_dependencies()
