"""The proof a node_modules tree passes before it is shared (tools/site/integrity.py): every package
folder byte for byte its tarball, the tarball found in npm's cache by the lockfile's integrity."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from webgen_agent.tools.site.integrity import NotProven, check_against_registry, check_tree

FILES = {"package.json": '{"name": "victim", "version": "1.0.0"}', "index.js": "module.exports = 'honest';\n"}


def _tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace holding one package as npm unpacks it, its lockfile, and npm's cache holding its tarball."""
    data = _tarball(FILES)
    digest = hashlib.sha512(data).digest()
    cache = tmp_path / "npm-cache"
    hexed = digest.hex()
    stored = cache / "_cacache" / "content-v2" / "sha512" / hexed[:2] / hexed[2:4] / hexed[4:]
    stored.parent.mkdir(parents=True)
    stored.write_bytes(data)
    workspace = tmp_path / "ws"
    package = workspace / "node_modules" / "victim"
    package.mkdir(parents=True)
    for name, text in FILES.items():
        (package / name).write_text(text)
    (workspace / "node_modules" / ".bin").mkdir()
    os.symlink("../victim/index.js", workspace / "node_modules" / ".bin" / "victim")
    (workspace / "node_modules" / ".package-lock.json").write_text("{}")
    integrity = "sha512-" + base64.b64encode(digest).decode()
    lock = {
        "lockfileVersion": 3,
        "packages": {"": {}, "node_modules/victim": {"version": "1.0.0", "integrity": integrity}},
    }
    (workspace / "package-lock.json").write_text(json.dumps(lock))
    return workspace, cache


def test_a_tree_as_npm_unpacked_it_is_proved(installed):
    workspace, cache = installed
    check_tree(workspace, cache)


@pytest.mark.parametrize(
    "tamper",
    [
        "a file changed",
        "a file added",
        "a file removed",
        "a package the lockfile does not name",
        "a link inside a package",
        "a bin link out of the tree",
        "no lockfile",
        "the tarball missing",
        "the tarball not what its name says",
    ],
)
def test_a_tree_that_is_not_its_tarballs_is_refused(installed, tamper):
    workspace, cache = installed
    package = workspace / "node_modules" / "victim"
    tarball = next(p for p in cache.rglob("*") if p.is_file())
    if tamper == "a file changed":
        (package / "index.js").write_text("module.exports = 'honest';\nglobalThis.planted = 1;\n")
    elif tamper == "a file added":
        (package / "extra.js").write_text("planted")
    elif tamper == "a file removed":
        (package / "index.js").unlink()
    elif tamper == "a package the lockfile does not name":
        (workspace / "node_modules" / "planted").mkdir()
        (workspace / "node_modules" / "planted" / "index.js").write_text("planted")
    elif tamper == "a link inside a package":
        os.symlink("/etc/passwd", package / "passwd")
    elif tamper == "a bin link out of the tree":
        os.symlink("/bin/sh", workspace / "node_modules" / ".bin" / "sh")
    elif tamper == "no lockfile":
        (workspace / "package-lock.json").unlink()
    elif tamper == "the tarball missing":
        tarball.unlink()
    else:
        tarball.write_bytes(_tarball({**FILES, "index.js": "planted"}))
    with pytest.raises(NotProven):
        check_tree(workspace, cache)


@pytest.fixture
def flaky_registry(installed) -> Iterator[tuple[str, list[int]]]:
    """A registry that answers the victim's metadata only after failing the first requests: the statuses
    to fail with are the list the test fills (0: drop the connection unanswered)."""
    workspace, _ = installed
    lock = json.loads((workspace / "package-lock.json").read_text())
    integrity = lock["packages"]["node_modules/victim"]["integrity"]
    metadata = json.dumps({"name": "victim", "versions": {"1.0.0": {"dist": {"integrity": integrity}}}}).encode()
    failures: list[int] = []

    class Registry(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if failures:
                status = failures.pop(0)
                if status == 0:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_error(status)
                return
            self.send_response(200)
            self.send_header("content-length", str(len(metadata)))
            self.end_headers()
            self.wfile.write(metadata)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", failures
    server.shutdown()


async def test_a_registry_that_fails_a_request_or_two_is_asked_again(installed, flaky_registry):
    # CI's registry once dropped one metadata request of a hundred: the tree, honest, was not shared
    # and the next workspace installed again from the registry.
    workspace, _ = installed
    registry, failures = flaky_registry
    failures.extend([0, 503, 429])
    await check_against_registry(workspace, registry)
    assert not failures


async def test_a_registry_that_keeps_failing_leaves_the_tree_unproven_and_says_why(installed, flaky_registry):
    workspace, _ = installed
    registry, failures = flaky_registry
    failures.extend([0] * 10)
    with pytest.raises(NotProven, match=r"metadata of victim cannot be read \((RemoteProtocolError|ReadError)"):
        await check_against_registry(workspace, registry)
    failures.clear()
    failures.extend([404, 404])  # not found: asked once, asking again cannot help
    with pytest.raises(NotProven, match="404"):
        await check_against_registry(workspace, registry)
    assert failures == [404]
