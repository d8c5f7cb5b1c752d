"""What a project is and how it starts: package.json, its start script, vite, config files."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

# Root-level files whose change needs a fresh dev server (vite restarts itself on some, not all).
CONFIG_PATTERNS = (
    "package.json",
    "*.config.*",
    "tsconfig*.json",
    "jsconfig*.json",
    ".env*",
    ".postcssrc*",
    ".babelrc*",
)
# Source files vite serves as transformed modules, cached in its module graph until its file watcher
# reports a change. index.html, public/ and assets are read from disk on every request.
_VITE_MODULE_SUFFIXES = (
    ".js",
    ".jsx",
    ".ts",
    ".tsx",
    ".mjs",
    ".mts",
    ".cjs",
    ".cts",
    ".vue",
    ".svelte",
    ".css",
    ".scss",
    ".sass",
    ".less",
    ".styl",
    ".pcss",
    ".json",
)


def read_package_json(workspace: Path) -> dict[str, Any]:
    """package.json as a dict; ValueError with a message for the coder when it is not valid."""
    try:
        data = json.loads((workspace / "package.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"package.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("package.json must contain a JSON object")
    return data


def is_config_path(rel_path: str) -> bool:
    """Root-level files whose change needs a dev-server restart (index.html is not one: vite serves it fresh)."""
    rel_path = rel_path.replace("\\", "/")
    rel_path = rel_path[2:] if rel_path.startswith("./") else rel_path
    return "/" not in rel_path and any(fnmatch.fnmatchcase(rel_path, pattern) for pattern in CONFIG_PATTERNS)


def config_fingerprint(workspace: Path) -> str:
    """Hash of the root-level config files, to notice changes nobody reported (shell actions)."""
    digest = hashlib.sha256()
    for path in sorted(workspace.iterdir()):
        if path.is_file() and is_config_path(path.name):
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def start_script(package: dict[str, Any]) -> tuple[str, str] | None:
    """(name, command) of the script that starts the site: dev, then start, then serve."""
    scripts = package.get("scripts") or {}
    for name in ("dev", "start", "serve"):
        script = scripts.get(name) if isinstance(scripts, dict) else None
        if isinstance(script, str) and script.strip():
            return name, script
    return None


def runs_vite(package: dict[str, Any]) -> bool:
    script = start_script(package)
    return script is not None and re.search(r"\bvite\b", script[1]) is not None


def start_command(
    package: dict[str, Any], port: int, workspace: Path | None = None
) -> tuple[list[str], dict[str, str]] | None:
    """``npm run dev`` (then start, serve) with the port passed the way common tools honour it.

    With ``workspace``, a plain ``vite [flags]`` script runs vite itself (see ``_direct_vite``).
    """
    script = start_script(package)
    if script is None:
        return None
    env = {"PORT": str(port), "HOST": "127.0.0.1"}
    if not runs_vite(package):
        return ["npm", "run", script[0]], env
    flags = ["--port", str(port), "--host", "127.0.0.1", "--strictPort"]  # vite keeps the last ones given
    if workspace is not None and (direct := _direct_vite(package, *script, workspace)) is not None:
        bin_dir = str(workspace / "node_modules" / ".bin")  # as npm run puts it first on PATH
        return [*direct, *flags], {**env, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return ["npm", "run", script[0], "--", *flags], env


_PLAIN_VITE = re.compile(r"^\s*vite(?:\s+[\w@:./=-]+)*\s*$")


def _direct_vite(package: dict[str, Any], name: str, command: str, workspace: Path) -> list[str] | None:
    """``node_modules/.bin/vite [flags]`` for a script that is only that, with no ``pre`` script.

    What ``npm run`` would do, minus the npm process that stays between us and vite for the
    server's whole life (~55 MB per dev server, and ~0.3 s per start).
    """
    scripts = package.get("scripts") or {}
    binary = workspace / "node_modules" / ".bin" / "vite"
    if not _PLAIN_VITE.match(command) or f"pre{name}" in scripts or not binary.exists():
        return None
    return [str(binary), *command.split()[1:]]


def vite_module_path(rel_path: str) -> str | None:
    """The URL path under which vite serves a workspace file as a cached module, or None.

    JSON is a module only when imported (``?import``); ``public/`` files are served raw from disk.
    """
    rel = rel_path.replace("\\", "/").removeprefix("./")
    if not rel.endswith(_VITE_MODULE_SUFFIXES) or rel.startswith(("public/", "node_modules/")):
        return None
    return "/" + quote(rel) + ("?import" if rel.endswith(".json") else "")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The vite.config.js WebGen-Agent writes into a project that has none (React plugin, any free port,
# polling file watcher); the upstream profile writes the same settings.
DEFAULT_VITE_CONFIG = """import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// Written by the agent because the project had no vite.config.js.
export default defineConfig({
  plugins: [react()],
  server: {
    port: 0,
    strictPort: false,
    watch: { usePolling: true, interval: 1000 },
    hmr: { port: 0 },
  },
  preview: { port: 0 },
})
"""


def write_default_vite_config(workspace: Path) -> bool:
    """Write ``DEFAULT_VITE_CONFIG`` as vite.config.js when the project has none; whether it did."""
    path = workspace / "vite.config.js"
    if path.exists() or path.is_symlink():
        return False
    path.write_text(DEFAULT_VITE_CONFIG, encoding="utf-8")
    return True
