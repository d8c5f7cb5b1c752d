"""Attacks on the sandbox from generated code, each closed: what leaked or got out before, and now does not.

- The agent's environment through ``/proc/1/environ``: bwrap is PID 1 inside and used to keep the
  (deny-list scrubbed) environment it was started with, so names the deny-list did not know
  (``GITHUB_PAT``, ``DATABASE_URL``) were readable in every phase.
- Filling the private /tmp or home folder (each a tmpfs, by default up to half the host's memory).
- Making a nested user namespace inside, where most unprivileged kernel escapes start.
- Reading what the agent keeps on the host: ``--ro-bind / /`` left the run database (other runs,
  their code and checkpoints), the dependency cache, the process registry, other runs' folders and
  the user's project readable, and, for a root caller, ``/etc/shadow`` and ``/etc/ssl/private``.
- Writing into npm's cache: the user's ~/.npm was bound writable for installs and shell actions
  (files left there, cacache entries later unsandboxed installs trust).
- The network bridge's interpreter folder (a pyenv Python under /root) bound inside.

The shared dependency cache's attacks are in tests/test_hostile_cache.py.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_hostile_cache import HONEST, _project
from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.process import ProcessRegistry, run_command
from webgen_agent.tools.sandbox import Confinement, sandbox_problem
from webgen_agent.tools.site import SiteRunner

# Every test here runs bubblewrap (and most npm, a dev server or Chromium inside it).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

AGENT_SECRETS = {
    "GITHUB_PAT": "ghp_webgenHostileCanary0001",
    "DATABASE_URL": "postgresql://u:pw-canary-0002@db.internal/webgen",
}


async def test_no_process_inside_can_read_the_agents_environment(tmp_path, monkeypatch):
    for name, value in AGENT_SECRETS.items():
        monkeypatch.setenv(name, value)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # Every environment block visible inside: PID 1 (bwrap), its children, this shell.
    script = 'for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null; done; env'
    result = await run_command(
        ["bash", "-c", script], cwd=workspace, timeout_s=30, sandbox=Confinement(workspace=workspace), tail_lines=400
    )
    assert result.ok, result.output_tail
    assert "PATH=" in result.output_tail  # the blocks were read
    for value in AGENT_SECRETS.values():
        assert value not in result.output_tail


async def test_a_private_tmp_or_home_cannot_be_filled_past_its_size(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sandbox = Confinement(workspace=workspace, settings=SandboxSettings(tmpfs_mb=16))
    script = (
        "head -c 33554432 /dev/zero > /tmp/fill && echo tmp-filled; "
        'head -c 33554432 /dev/zero > "$HOME/fill" && echo home-filled; '
        "df -m /tmp | tail -1"
    )
    result = await run_command(["bash", "-c", script], cwd=workspace, timeout_s=60, sandbox=sandbox, tail_lines=40)
    assert "tmp-filled" not in result.output_tail and "home-filled" not in result.output_tail, result.output_tail
    assert "No space left on device" in result.output_tail


async def test_no_user_namespace_can_be_made_inside(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = "unshare --user --map-root-user id -u && echo nested-userns-made || echo refused"
    result = await run_command(
        ["bash", "-c", script], cwd=workspace, timeout_s=30, sandbox=Confinement(workspace=workspace), tail_lines=20
    )
    assert "nested-userns-made" not in result.output_tail and "refused" in result.output_tail, result.output_tail


@pytest.fixture
def user_project() -> Iterator[Path]:
    """A user's project laid out as the agent leaves it: in the current folder (not under /tmp or a
    home folder, which the sandbox always replaced), removed afterwards."""
    project = Path(tempfile.mkdtemp(prefix=".webgen-hostile-", dir=Path.cwd()))
    try:
        yield project
    finally:
        shutil.rmtree(project, ignore_errors=True)


def _plant(path: Path, canary: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(canary)
    return path


async def test_nothing_the_agent_keeps_on_the_host_is_readable_inside(user_project):
    canary = f"webgen-fs-canary-{uuid.uuid4().hex[:8]}"  # the content planted, never a path
    tag = uuid.uuid4().hex[:8]
    state = user_project / ".webgen"
    state.mkdir()
    with contextlib.closing(sqlite3.connect(state / "webgen.db")) as db, db:  # the run database
        db.execute("create table runs (secret text)")
        db.execute("insert into runs values (?)", (canary,))
    planted = [
        state / "webgen.db",
        _plant(state / "processes.jsonl", canary),  # the process registry
        _plant(state / "deps-cache" / "k" / "node_modules" / "x" / "index.js", canary),  # the dependency cache
        _plant(user_project / "webgen-runs" / "other-run" / "workspace" / "App.jsx", canary),  # another run
        _plant(user_project / "notes.txt", canary),  # the user's own files
        _plant(Path.home() / f".webgen-canary-{tag}", canary),  # the home folder (/root for root)
    ]
    other_home = Path("/home") / f"webgen-canary-{tag}"
    with contextlib.suppress(OSError):
        planted.append(_plant(other_home / "secret.txt", canary))  # another user's home
    run_folder = user_project / "webgen-runs" / "this-run"
    workspace = run_folder / "workspace"
    workspace.mkdir(parents=True)
    runner = SiteRunner(
        workspace,
        registry=ProcessRegistry(state / "processes.jsonl"),
        log_dir=run_folder / "logs",
        deps_cache_dir=state / "deps-cache",
    )
    probes = [*planted, state, Path("/root"), Path("/home"), Path("/sys/class"), Path("/etc/shadow")]
    # One short line per path (the output's tail is what comes back): whatever of the canary it can
    # read, then whether the path exists at all.
    script = "".join(
        f"grep -a -o -r {canary} {p} 2>/dev/null | head -1; [ -e {p} ] && echo visible: {p} || echo absent: {p}\n"
        for p in probes
    )
    # Every process visible inside is the sandbox's own: none of the host's command lines.
    script += 'for f in /proc/[0-9]*/cmdline; do grep -q "py[t]est" "$f" && echo "host process: $f"; done\n'
    script += "ls -A /etc/ssl\n"
    try:
        result = await runner.shell(script, timeout_s=60)
    finally:
        shutil.rmtree(other_home, ignore_errors=True)
        (Path.home() / f".webgen-canary-{tag}").unlink(missing_ok=True)
    out = result.output_tail
    assert result.ok, out
    assert canary not in out, out
    for path in probes:
        assert f"absent: {path}" in out, out
    assert "host process" not in out and "private" not in out, out


async def test_a_shell_action_cannot_write_the_users_npm_cache_nor_plant_entries_in_the_agents(tmp_path, monkeypatch):
    import hashlib

    from webgen_agent.tools.npm_cache import AGENT_NPM_CACHE
    from webgen_agent.tools.site import SiteRunner

    users = tmp_path / "users-npm-cache"
    (users / "_cacache").mkdir(parents=True)
    monkeypatch.setenv("npm_config_cache", str(users))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "index.html").write_text("<h1>hi</h1>")
    honest = b"honest content"
    good = hashlib.sha512(honest).hexdigest()
    forged = hashlib.sha512(b"what the name promises").hexdigest()
    content = "$npm_config_cache/_cacache/content-v2/sha512"
    script = (
        f"mkdir -p {content}/{good[:2]}/{good[2:4]} {content}/{forged[:2]}/{forged[2:4]} "
        "$npm_config_cache/_cacache/index-v5/aa/bb ~/.npm/_cacache && "
        f"printf '{honest.decode()}' > {content}/{good[:2]}/{good[2:4]}/{good[4:]} && "
        f"printf 'PLANTED' > {content}/{forged[:2]}/{forged[2:4]}/{forged[4:]} && "
        "printf 'PLANTED' > $npm_config_cache/_cacache/index-v5/aa/bb/entry && "
        "printf 'PLANTED' > ~/.npm/_cacache/planted && "
        f"printf 'PLANTED' > {users}/_cacache/planted 2>/dev/null; echo wrote"
    )
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", deps_cache_dir=tmp_path / "deps-cache")
    result = await runner.shell(script, timeout_s=60)
    assert "wrote" in result.output_tail, result.output_tail
    assert [p for p in users.rglob("*") if p.is_file()] == []  # the user's cache: untouched
    agents = tmp_path / "deps-cache" / AGENT_NPM_CACHE
    kept = sorted(p.relative_to(agents).as_posix() for p in agents.rglob("*") if p.is_file())
    # Only the content file whose name is its own SHA-512 came back; no index entry, no forged content.
    assert kept == [f"_cacache/content-v2/sha512/{good[:2]}/{good[2:4]}/{good[4:]}"]


async def test_a_sandboxed_npm_install_fills_only_the_agents_content_cache(tmp_path, monkeypatch):
    from webgen_agent.tools.npm_cache import AGENT_NPM_CACHE, content_files
    from webgen_agent.tools.site import SiteRunner

    users = tmp_path / "users-npm-cache"
    users.mkdir()
    monkeypatch.setenv("npm_config_cache", str(users))
    workspace = _project(tmp_path / "ws", {**HONEST, "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"}})
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs", deps_cache_dir=tmp_path / "deps-cache")
    result = await runner.ensure_dependencies()
    assert result.error is None and not result.cached, result
    assert (workspace / "node_modules" / "react-dom" / "package.json").is_file()
    agents = tmp_path / "deps-cache" / AGENT_NPM_CACHE
    assert len(content_files(agents)) >= 3  # react, react-dom, loose-envify, ...: kept for the next install
    assert not (agents / "_cacache" / "index-v5").exists()
    assert list(users.iterdir()) == []


def test_only_verified_regular_content_files_go_back_to_the_agents_npm_cache(tmp_path):
    import hashlib

    from webgen_agent.tools.npm_cache import content_files, merge_verified, seed

    private, agents = tmp_path / "private", tmp_path / "agents"

    def content(data: bytes, *, under: str | None = None) -> Path:
        digest = hashlib.sha512(under.encode() if under else data).hexdigest()
        path = private / "_cacache" / "content-v2" / "sha512" / digest[:2] / digest[2:4] / digest[4:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    content(b"a real tarball")
    content(b"PLANTED", under="what the name promises")
    outside = tmp_path / "outside"
    outside.write_bytes(b"a file of the agent's")
    link = content(b"", under="a file of the agent's")
    link.unlink()
    link.symlink_to(outside)  # right digest, but a link out of the cache
    assert merge_verified(private, agents) == 1
    assert [path.read_bytes() for _digest, path in content_files(agents)] == [b"a real tarball"]
    assert seed(agents, tmp_path / "next") == len(b"a real tarball")
    assert seed(agents, tmp_path / "small", max_bytes=4) == 0


async def test_the_network_bridge_shows_no_home_folder_inside(tmp_path):
    # The bridge that opens the sandbox's network doors ran on the agent's base interpreter, whose
    # whole folder was bound read-only: with a pyenv Python, /root/.pyenv/versions/<v> was listable.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "index.html").write_text("<h1>hi</h1>")
    runner = SiteRunner(workspace, log_dir=tmp_path / "logs")
    script = "cat /proc/self/mountinfo; for p in /root /home; do [ -e $p ] && echo visible: $p; done; echo probed"
    result = await runner.shell(script, timeout_s=60)
    assert result.ok, result.output_tail
    assert "probed" in result.output_tail and "visible:" not in result.output_tail, result.output_tail
    homes = {str(Path.home()), "/root", "/home"}
    mounts = [line.split()[4] for line in result.output_tail.splitlines() if len(line.split()) > 4]
    assert mounts and not [m for m in mounts if any(m == h or m.startswith(h + "/") for h in homes)], mounts


async def test_without_a_system_python_the_bridge_runs_on_a_copy_outside_any_home(tmp_path, monkeypatch):
    from webgen_agent.tools import bridge_python as bridge_module

    monkeypatch.setattr(bridge_module, "SYSTEM_PYTHONS", ())
    bridge_module.bridge_python.cache_clear()
    try:
        chosen = bridge_module.bridge_python()
        assert chosen.folder is not None and chosen.folder.startswith("/tmp/")
        await test_the_network_bridge_shows_no_home_folder_inside(tmp_path)
    finally:
        bridge_module.bridge_python.cache_clear()
        if chosen.folder:
            shutil.rmtree(chosen.folder, ignore_errors=True)
