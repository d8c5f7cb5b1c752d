"""Attacks on the shared dependency cache from generated code, each closed.

- Poisoning through ``"workspaces"``: a project with an honest project's dependencies plus a
  workspace package whose ``postinstall`` rewrote ``node_modules/react/index.js`` got the honest
  project's cache key, and the next honest install restored that tree.
- A dependency's postinstall rewriting another package: it ran before the tree was stored in the
  shared cache, so the next run restored the rewritten tree.
- A dependency's own postinstall output stored (esbuild's launcher replaced by its binary), and a
  lockfile naming planted content: a tree is shared only when installed from nothing and proved
  against the registry's tarballs (``tools/site/integrity.py``). The two-step poisoning through the
  whole pipeline is in tests/test_hostile_corpus.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.sandbox import cacheable_install, sandbox_problem, workspace_confinement
from webgen_agent.tools.site.depcache import DepsCache
from webgen_agent.tools.site.deps import cache_key, dependency_key, install_dependencies

# Every test here runs npm inside bubblewrap, but the manifest checks.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]


def _project(root: Path, package: dict) -> Path:
    root.mkdir(parents=True)
    (root / "package.json").write_text(json.dumps(package, indent=2))
    return root


HONEST = {"name": "honest", "private": True, "version": "1.0.0", "dependencies": {"react": "^18.3.1"}}


async def test_a_workspace_postinstall_cannot_poison_the_next_honest_install(tmp_path):
    cache = DepsCache(tmp_path / "deps-cache")
    settings = SandboxSettings()

    async def install(workspace: Path):
        return await install_dependencies(
            workspace,
            dependency_key(workspace),
            cache=cache,
            timeout_s=300,
            registry=None,
            log_path=lambda: tmp_path / "logs" / f"{workspace.name}-{os.urandom(4).hex()}.log",
            sandbox=workspace_confinement(workspace, settings, "install"),
        )

    attacker = _project(tmp_path / "attacker", {**HONEST, "workspaces": ["evil"]})
    evil = _project(
        attacker / "evil", {"name": "evil", "version": "1.0.0", "scripts": {"postinstall": "node plant.js"}}
    )
    (evil / "plant.js").write_text(
        "require('fs').writeFileSync('../node_modules/react/index.js', \"module.exports = 'PWNED';\\n\")\n"
    )
    attacker_key = dependency_key(attacker)
    attack = await install(attacker)
    assert attack.error is None, attack.error
    assert "PWNED" in (attacker / "node_modules" / "react" / "index.js").read_text()  # it ran, in its own tree
    assert not any(cache.root.glob("*/node_modules"))  # and was not kept

    honest = _project(tmp_path / "honest", dict(HONEST))
    assert dependency_key(honest) == attacker_key  # same dependencies: what the cache was keyed by
    installed = await install(honest)
    assert installed.error is None, installed.error
    assert not installed.cached
    assert "PWNED" not in (honest / "node_modules" / "react" / "index.js").read_text()

    # The honest tree is shared with the next honest project, and only with it.
    again = _project(tmp_path / "honest-again", dict(HONEST))
    reused = await install(again)
    assert reused.cached and "PWNED" not in (again / "node_modules" / "react" / "index.js").read_text()


@pytest.mark.parametrize(
    "change",
    [
        {"workspaces": ["packages/*"]},
        {"dependencies": {"react": "file:../react"}},
        {"dependencies": {"react": "link:../react"}},
        {"dependencies": {"react": "git+https://example.com/react.git"}},
        {"dependencies": {"react": "facebook/react"}},
        {"dependencies": {"react": "https://example.com/react.tgz"}},
        {"bundleDependencies": ["react"]},
        {"overrides": {"react": {"loose-envify": "file:./x"}}},
        {"scripts": {"postinstall": "node x.js"}},
    ],
)
def test_projects_whose_install_the_manifest_does_not_describe_are_never_shared(tmp_path, change):
    package = {**HONEST, **change}
    workspace = _project(tmp_path / "p", package)
    assert cacheable_install(workspace, HONEST)
    assert not cacheable_install(workspace, package)


def test_the_cache_key_covers_the_whole_manifest_and_the_lockfile(tmp_path):
    workspace = _project(tmp_path / "p", dict(HONEST))
    base = cache_key(workspace)
    (workspace / "package.json").write_text(json.dumps({**HONEST, "scripts": {"dev": "vite"}}))
    with_scripts = cache_key(workspace)
    (workspace / "package-lock.json").write_text("{}")
    assert len({base, with_scripts, cache_key(workspace)}) == 3
    assert cacheable_install(workspace, {**HONEST, "dependencies": {"@scope/pkg": "npm:other@^1", "x": "latest"}})


def _tarball(files: dict[str, str]) -> bytes:
    """An npm package tarball (``package/<file>``) holding ``files``."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def local_registry():
    """A registry on loopback serving two packages: a victim, and one whose postinstall rewrites the victim."""
    import base64
    import hashlib
    import http.server
    import threading

    packages = {
        "webgen-victim": {
            "package.json": json.dumps({"name": "webgen-victim", "version": "1.0.0"}),
            "index.js": "module.exports = 'honest';\n",
        },
        "webgen-planter": {
            "package.json": json.dumps(
                {"name": "webgen-planter", "version": "1.0.0", "scripts": {"postinstall": "node plant.js"}}
            ),
            "plant.js": "require('fs').writeFileSync(require('path').join(__dirname, '..', 'webgen-victim', 'index.js'), \"module.exports = 'PWNED';\\n\")\n",
        },
    }
    tarballs = {name: _tarball(files) for name, files in packages.items()}

    class Registry(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            name = self.path.strip("/").split("/")[0]
            if name not in packages:
                self.send_error(404)
                return
            if "/-/" in self.path:
                body = tarballs[name]
            else:
                manifest = json.loads(packages[name]["package.json"])
                digest = base64.b64encode(hashlib.sha512(tarballs[name]).digest()).decode()
                tarball = f"http://127.0.0.1:{self.server.server_port}/{name}/-/{name}-1.0.0.tgz"
                manifest["dist"] = {"tarball": tarball, "integrity": f"sha512-{digest}"}
                body = json.dumps(
                    {"name": name, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": manifest}}
                ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


async def test_a_dependencys_postinstall_cannot_change_the_cached_tree(tmp_path, monkeypatch, local_registry):
    monkeypatch.setenv("npm_config_registry", local_registry)
    cache = DepsCache(tmp_path / "deps-cache")
    manifest = {"name": "p", "version": "1.0.0", "dependencies": {"webgen-planter": "1.0.0", "webgen-victim": "1.0.0"}}

    async def install(workspace: Path):
        return await install_dependencies(
            workspace,
            dependency_key(workspace),
            cache=cache,
            timeout_s=120,
            registry=None,
            log_path=lambda: tmp_path / "logs" / f"{workspace.name}-{os.urandom(4).hex()}.log",
            sandbox=workspace_confinement(workspace, SandboxSettings(), "install"),
        )

    first = _project(tmp_path / "first", manifest)
    result = await install(first)
    entry = cache.entry(cache_key(first))
    assert entry is not None
    assert (entry / "node_modules" / "webgen-victim" / "index.js").read_text() == "module.exports = 'honest';\n"
    # The planter's script ran (in this copy) and could not write outside its own package.
    assert result.error and "install script" in result.error, result
    second = _project(tmp_path / "second", manifest)
    await install(second)  # restored from the cache: the same script, the same refusal
    assert (second / "node_modules" / "webgen-victim" / "index.js").read_text() == "module.exports = 'honest';\n"


async def test_a_dependencys_own_postinstall_output_never_reaches_the_shared_cache(tmp_path):
    # esbuild's postinstall replaces bin/esbuild (a JavaScript launcher in its tarball) by a hardlink
    # to its native binary, where it can link (unconfined, --no-sandbox; inside the sandbox the
    # package folders are separate mounts and the link fails). Installed again over that tree (the
    # next step adds a dependency), npm kept the replaced file and the tree was shared: every later
    # install from it failed in esbuild's own script.
    cache = DepsCache(tmp_path / "deps-cache")
    workspace = _project(tmp_path / "ws", {**HONEST, "dependencies": {"esbuild": "0.21.5"}})

    async def install():
        return await install_dependencies(
            workspace,
            dependency_key(workspace),
            cache=cache,
            timeout_s=300,
            registry=None,
            log_path=lambda: tmp_path / "logs" / f"{os.urandom(4).hex()}.log",
            sandbox=None,
        )

    first = await install()
    assert first.error is None and not first.cached, first
    entry = cache.entry(cache_key(workspace))
    assert entry is not None
    launcher = (entry / "node_modules" / "esbuild" / "bin" / "esbuild").read_bytes()
    assert (workspace / "node_modules" / "esbuild" / "bin" / "esbuild").read_bytes() != launcher  # the script ran here
    (workspace / "package.json").write_text(
        json.dumps({**HONEST, "dependencies": {"esbuild": "0.21.5", "js-tokens": "4.0.0"}})
    )
    again = await install()
    assert again.error is None and not again.cached, again
    shared = cache.entry(cache_key(workspace))
    assert shared is not None and shared != entry
    assert (shared / "node_modules" / "esbuild" / "bin" / "esbuild").read_bytes() == launcher


async def test_a_lockfile_naming_other_content_than_the_registrys_is_never_shared(
    tmp_path, monkeypatch, local_registry
):
    # A lockfile whose integrity names a tarball the attacker planted in npm's cache (a content file
    # is taken back into the agent's npm cache when its name is its own digest): npm installs the
    # planted content, the tree matches its lockfile's tarballs, and only the registry's metadata
    # tells that the lockfile lies.
    import base64
    import hashlib

    monkeypatch.setenv("npm_config_registry", local_registry)
    cache = DepsCache(tmp_path / "deps-cache")
    agents_npm = tmp_path / "deps-cache" / "npm"
    planted = _tarball(
        {
            "package.json": json.dumps({"name": "webgen-victim", "version": "1.0.0"}),
            "index.js": "module.exports = 'PWNED';\n",
        }
    )
    digest = hashlib.sha512(planted).digest()
    hexed = digest.hex()
    content = agents_npm / "_cacache" / "content-v2" / "sha512" / hexed[:2] / hexed[2:4] / hexed[4:]
    content.parent.mkdir(parents=True)
    content.write_bytes(planted)

    def lock(integrity: str, version: str) -> dict:
        return {
            "name": "p",
            "version": version,
            "lockfileVersion": 3,
            "requires": True,
            "packages": {
                "": {"name": "p", "version": version, "dependencies": {"webgen-victim": "1.0.0"}},
                "node_modules/webgen-victim": {
                    "version": "1.0.0",
                    "resolved": f"{local_registry}webgen-victim/-/webgen-victim-1.0.0.tgz",
                    "integrity": integrity,
                },
            },
        }

    async def install(workspace: Path):
        return await install_dependencies(
            workspace,
            dependency_key(workspace),
            cache=cache,
            timeout_s=120,
            registry=None,
            log_path=lambda: tmp_path / "logs" / f"{workspace.name}-{os.urandom(4).hex()}.log",
            sandbox=workspace_confinement(workspace, SandboxSettings(), "install"),
            npm_cache=agents_npm,
        )

    manifest = {"name": "p", "version": "1.0.0", "dependencies": {"webgen-victim": "1.0.0"}}
    forged = _project(tmp_path / "forged", manifest)
    (forged / "package-lock.json").write_text(json.dumps(lock("sha512-" + base64.b64encode(digest).decode(), "1.0.0")))
    result = await install(forged)
    assert result.error is None, result.error
    assert "PWNED" in (forged / "node_modules" / "webgen-victim" / "index.js").read_text()  # its own tree only
    assert not any(cache.root.glob("*/node_modules"))

    # The registry's own lockfile (written by an install without one) passes the same check.
    fresh = _project(tmp_path / "fresh", manifest)
    assert (await install(fresh)).error is None
    honest_lock = json.loads((fresh / "package-lock.json").read_text())
    integrity = honest_lock["packages"]["node_modules/webgen-victim"]["integrity"]
    locked = _project(tmp_path / "locked", {**manifest, "version": "1.0.1"})
    (locked / "package-lock.json").write_text(json.dumps(lock(integrity, "1.0.1")))
    result = await install(locked)
    assert result.error is None and not result.cached, result
    entry = cache.entry(cache_key(locked))
    assert entry is not None
    assert (entry / "node_modules" / "webgen-victim" / "index.js").read_text() == "module.exports = 'honest';\n"
