"""How a site is set up, without a running dev server: its start command and config paths, the
log summary, Vite's module paths, the registry check, dependencies' install scripts, and the
dependency cache that runs share through the database folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webgen_agent.tools.site import dependency_scripts as scripts_module
from webgen_agent.tools.site import (
    is_config_path,
    printed_urls,
    start_command,
    summarize_log,
    vite_module_path,
)
from webgen_agent.tools.site import registry as registry_module

# ---- pure helpers ------------------------------------------------------------------------------


def test_config_paths() -> None:
    for path in (
        "package.json",
        "vite.config.js",
        "vite.config.ts",
        "tsconfig.json",
        "tsconfig.node.json",
        "tailwind.config.js",
        "postcss.config.cjs",
        ".env",
        ".env.local",
        "./vite.config.mjs",
    ):
        assert is_config_path(path), path
    for path in ("index.html", "src/App.jsx", "src/config.json", "public/vite.config.js", "package-lock.json"):
        assert not is_config_path(path), path


def test_start_command_passes_the_port() -> None:
    argv, env = start_command({"scripts": {"dev": "vite --open", "start": "node server.js"}}, 4321)
    assert argv == ["npm", "run", "dev", "--", "--port", "4321", "--host", "127.0.0.1", "--strictPort"]
    assert env == {"PORT": "4321", "HOST": "127.0.0.1"}
    argv, env = start_command({"scripts": {"start": "react-scripts start"}}, 4321)
    assert argv == ["npm", "run", "start"] and env["PORT"] == "4321"
    assert start_command({"scripts": {"build": "vite build"}}, 1) is None


def test_a_plain_vite_script_runs_vite_itself(tmp_path: Path) -> None:
    (tmp_path / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin" / "vite").write_text("")
    vite = str(tmp_path / "node_modules" / ".bin" / "vite")
    argv, env = start_command({"scripts": {"dev": "vite --open"}}, 4321, tmp_path)
    assert argv == [vite, "--open", "--port", "4321", "--host", "127.0.0.1", "--strictPort"]
    assert env["PATH"].startswith(str(tmp_path / "node_modules" / ".bin"))
    # What only npm does right stays with npm: shell syntax, a pre-script, vite not installed.
    for package in ({"scripts": {"dev": "vite && echo done"}}, {"scripts": {"predev": "node gen.js", "dev": "vite"}}):
        assert start_command(package, 4321, tmp_path)[0][:3] == ["npm", "run", "dev"]
    assert start_command({"scripts": {"dev": "vite"}}, 4321, tmp_path / "elsewhere")[0][:3] == ["npm", "run", "dev"]


def test_printed_urls_only_from_announcements() -> None:
    log = "  \x1b[32m➜\x1b[39m  Local:   http://localhost:5174/\nproxy error: could not proxy to http://localhost:8080/api\n"
    assert printed_urls(log) == ["http://localhost:5174/", "http://127.0.0.1:5174/"]


def test_summarize_log_highlights_errors_and_trims() -> None:
    lines = [f"noise {i}" for i in range(200)]
    lines[50] = '✘ [ERROR] Expected ";" but found "}" in src/App.jsx:3:5'
    summary = summarize_log("\n".join(lines))
    out = summary.splitlines()
    assert len(out) <= 45 and len(summary) <= 4000
    assert any(line.startswith(">> ") and "src/App.jsx:3:5" in line for line in out)
    assert out[-1].endswith("noise 199") and "..." in out


async def test_the_registry_is_asked_once_for_many_installs_then_again_when_the_answer_is_old(monkeypatch) -> None:
    import http.server
    import threading

    asked: list[str] = []

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{server.server_address[1]}/")
        assert [await registry_module.registry_problem() for _ in range(3)] == [None, None, None]
        assert len(asked) == 1  # three uncached installs, one request
        await registry_module.registry_problem(fresh=True)  # the doctor asks now
        assert len(asked) == 2
        monkeypatch.setattr(registry_module, "REGISTRY_REACHABLE_TTL_S", 0.0)
        await registry_module.registry_problem()
        assert len(asked) == 3
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{server.server_address[1]}/")
    problem = await registry_module.registry_problem()  # gone: a fresh answer, kept only briefly
    assert problem is not None and registry_module._REGISTRY_CHECKS[registry_module.npm_registry()].problem == problem


@pytest.mark.parametrize("runner", ["npm's script runner", "npm rebuild"])
@pytest.mark.e2e
async def test_dependencies_install_scripts_run_in_order_with_npms_environment(
    tmp_path: Path, monkeypatch, runner
) -> None:
    # What a restored tree's scripts get, by dependency_scripts.js or (where npm's runner is not
    # found) npm rebuild: each event in order, in the package's folder, with npm's lifecycle variables.
    if runner == "npm rebuild":
        monkeypatch.setattr(scripts_module, "npm_root", lambda: None)
    record = "require('fs').appendFileSync('events.txt', process.env.npm_lifecycle_event + ' ' + process.env.npm_package_name + '\\n')"
    for name in ("first", "@scope/second"):
        folder = tmp_path / "node_modules" / name
        folder.mkdir(parents=True)
        scripts = {event: f'node -e "{record}"' for event in ("preinstall", "install", "postinstall")}
        (folder / "package.json").write_text(json.dumps({"name": name, "version": "1.0.0", "scripts": scripts}))
    (tmp_path / "package.json").write_text(
        json.dumps({"name": "app", "version": "1.0.0", "dependencies": {"first": "1.0.0", "@scope/second": "1.0.0"}})
    )
    result = await scripts_module.run_dependency_scripts(
        tmp_path, timeout_s=120, log_path=lambda: tmp_path / "scripts.log", registry=None, sandbox=None
    )
    assert result is not None and result.ok, result
    for name in ("first", "@scope/second"):
        events = (tmp_path / "node_modules" / name / "events.txt").read_text().split("\n")
        assert events == [f"preinstall {name}", f"install {name}", f"postinstall {name}", ""]


def test_vite_module_paths() -> None:
    assert vite_module_path("src/App.jsx") == "/src/App.jsx"
    assert vite_module_path("./src/styles.css") == "/src/styles.css"
    assert vite_module_path("src/data.json") == "/src/data.json?import"
    assert vite_module_path("src/my file.ts") == "/src/my%20file.ts"
    for path in ("index.html", "public/app.js", "README.md", "src/logo.png"):
        assert vite_module_path(path) is None, path


# ---- the dependency cache is shared by runs through the database folder ------------------------


@pytest.mark.e2e
async def test_runs_sharing_a_database_share_installs(tmp_path: Path, vite_template, monkeypatch) -> None:
    import os
    import shutil

    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.nodes.resources import Resources

    monkeypatch.delenv("WEBGEN_DEPS_CACHE", raising=False)  # the default: the machine's state folder
    monkeypatch.setenv("WEBGEN_STATE_DIR", str(tmp_path / "state"))
    db = tmp_path / "db" / "webgen.db"
    # Seed <state folder>/deps-cache from the session's cache (hardlinks): as if an earlier run installed it.
    state = tmp_path / "state"
    shutil.copytree(vite_template.deps_cache_dir, state / "deps-cache", symlinks=True, copy_function=os.link)
    results = []
    for run in ("first", "second"):  # two runs, each with its own Resources (as two processes would)
        resources = Resources(db)
        assert resources.deps_cache_dir == state / "deps-cache"
        ws = vite_template.make_workspace(tmp_path / run / "workspace")
        try:
            site = resources.site(ws, scripted_context("http://127.0.0.1:9/v1"))  # no model is asked
            results.append(await site.ensure_running(None))
        finally:
            await resources.close()
    assert all(r.ok and r.install_cached for r in results), [r.error for r in results]
    react = [tmp_path / run / "workspace" / "node_modules" / "react" / "package.json" for run in ("first", "second")]
    assert react[0].stat().st_ino == react[1].stat().st_ino
