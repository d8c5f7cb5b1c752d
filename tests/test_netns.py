"""The network namespace's parts on their own: the proxy's rule and requests, the settings, the run's line.

The attacks themselves, through real bwrap, are in tests/test_hostile_network.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from webgen_agent.apps.cli.common import _sandbox_flags
from webgen_agent.core.context import SandboxSettings
from webgen_agent.core.errors import ConfigError
from webgen_agent.tools.netns import (
    DEFAULT_REGISTRY_HOST,
    NetworkGate,
    NetworkPolicy,
    parse_request,
    refusal,
    registry_hosts,
    shared_network_warning,
)
from webgen_agent.tools.netns_bridge import PROXY_SOCKET, hand_over_listener


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("169.254.169.254", "local address"),
        ("127.0.0.1", "local address"),
        ("10.1.2.3", "local address"),
        ("::1", "local address"),
        ("[fe80::1]", "local address"),
        ("0.0.0.0", "local address"),
        ("1.1.1.1", "address"),
        ("evil.example", "host"),
        ("registry.npmjs.org.evil.example", "host"),
    ],
)
def test_the_proxy_refuses_every_host_not_named(host, kind):
    why = refusal(host, [DEFAULT_REGISTRY_HOST])
    assert why is not None and why.startswith(f"The sandbox's proxy refused the {kind} ") and "--allow-host" in why


def test_the_proxy_lets_named_hosts_through_whatever_their_case():
    assert refusal("Registry.NPMJS.org.", [DEFAULT_REGISTRY_HOST]) is None
    assert refusal("10.1.2.3", ["10.1.2.3"]) is None  # an internal mirror the user named


def test_proxy_requests_are_parsed_to_a_host_and_what_to_send():
    tunnel = parse_request(b"CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443")
    assert (tunnel.host, tunnel.port, tunnel.head) == ("registry.npmjs.org", 443, None)
    assert parse_request(b"CONNECT [::1]:8080 HTTP/1.1").host == "::1"
    plain = parse_request(b"GET http://Example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: x")
    assert (plain.host, plain.port) == ("example.com", 80)
    assert plain.head == b"GET /a?b=1 HTTP/1.1\r\nHost: example.com"
    for bad in (b"GET / HTTP/1.1", b"GET https://example.com/ HTTP/1.1", b"nonsense"):
        with pytest.raises(ValueError):
            parse_request(bad)


async def test_the_proxy_answers_a_refused_tunnel_with_403_and_why(tmp_path):
    gate = NetworkGate(NetworkPolicy(allow_hosts=(DEFAULT_REGISTRY_HOST,)))
    try:
        # What the bridge does inside: a listening socket, handed to the agent's proxy, which accepts on it.
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            await asyncio.to_thread(hand_over_listener, str(gate.folder), listener)
            port = listener.getsockname()[1]
        assert not (gate.folder / PROXY_SOCKET).exists()  # one listener taken, the door closed
        answers = []
        for request in (b"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n", b"GET http://127.0.0.1:9/ HTTP/1.1\r\n\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            answers.append((await asyncio.wait_for(reader.read(), 10)).decode())
            writer.close()
        assert all(a.startswith("HTTP/1.1 403 Forbidden") and "refused the local address" in a for a in answers)
    finally:
        gate.close()
    assert not gate.folder.exists()


def test_the_proxys_door_takes_only_a_listening_tcp_socket(tmp_path):
    # What a process that took the bridge's place could hand over instead: a file, a unix socket,
    # a connection. The agent closes each unused and keeps waiting for a listener.
    gate = NetworkGate(NetworkPolicy(allow_hosts=(DEFAULT_REGISTRY_HOST,)))
    with socket.socket() as listener, open(tmp_path / "file", "w+b") as a_file:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        unix_pair = socket.socketpair()
        connection = socket.create_connection(listener.getsockname())
        try:
            for wrong in (a_file, unix_pair[0], connection):
                with pytest.raises(OSError, match="did not take"):
                    hand_over_listener(str(gate.folder), wrong)  # type: ignore[arg-type]
            assert (gate.folder / PROXY_SOCKET).exists()
        finally:
            gate.close()
            connection.close()
            for end in unix_pair:
                end.close()


@pytest.mark.e2e
def test_npm_registries_are_read_outside_any_workspace():
    assert DEFAULT_REGISTRY_HOST in registry_hosts()


def test_allow_host_takes_host_names_only_and_adds_to_recorded_hosts():
    assert SandboxSettings(allow_hosts=[" Example.COM. ", "[::1]"]).allow_hosts == ["example.com", "::1"]
    for bad in ("https://example.com", "example.com:8443", "user@example.com", ""):
        with pytest.raises(ValidationError):
            SandboxSettings(allow_hosts=[bad])
    merged = _sandbox_flags({"allow_hosts": ["a.example"]}, False, ["B.example"])
    assert merged.enabled and merged.allow_hosts == ["a.example", "b.example"]
    assert not _sandbox_flags(None, True, []).enabled
    with pytest.raises(ConfigError, match="--allow-host takes a host name"):
        _sandbox_flags(None, False, ["http://x"])


def test_a_run_without_its_own_network_says_so_in_one_line():
    line = shared_network_warning(SandboxSettings(own_network=False))
    assert line is not None and "\n" not in line and "shares this machine's network (own_network is off)" in line
    assert NetworkPolicy(isolated=False).needs_gate is False


@pytest.mark.e2e
async def test_a_run_on_the_shared_network_says_so_in_run_json_and_the_progress_view(tmp_path, chromium_path):
    from rich.console import Console

    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.apps.progress import ProgressView
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.graph.api import run_requirement

    page = '<boltArtifact id="p" title="p"><boltAction type="file" filePath="index.html"><h1>Hi</h1></boltAction></boltArtifact>'
    scenario = Scenario.model_validate(
        {
            "name": "shared-network",
            "rules": [
                {"model": "scripted-coder", "turn": 0, "content": page},
                {"model": "scripted-coder", "content": "finish"},
                {"model": "scripted-vlm", "json": {"description": "A heading.", "score": 2, "suggestions": []}},
            ],
        }
    )
    console = Console(record=True, width=300)
    with ScriptedServer(scenario) as server:
        context = scripted_context(server.base_url, max_steps=2, sandbox=SandboxSettings(own_network=False))
        with ProgressView(console, "shared") as view:
            result = await run_requirement(
                "A page.",
                context=context,
                run_id="shared",
                out_dir=tmp_path / "out",
                db_path=tmp_path / "webgen.db",
                on_progress=view.on_event,
            )
    summary = json.loads((Path(result.out_dir) / "run.json").read_text())
    assert [w for w in summary["warnings"] if "shares this machine's network" in w] == [
        shared_network_warning(SandboxSettings(own_network=False))
    ]
    assert "warning: Generated code shares this machine's network" in console.export_text()


@pytest.mark.parametrize("command", ["run", "bench"])
@pytest.mark.e2e
def test_a_bad_allow_host_is_a_one_line_error_before_anything_runs(tmp_path, command):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"id": "1", "instruction": "A blog.", "ui_instruct": []}) + "\n")
    args = ["run", "A blog"] if command == "run" else ["bench", "--data", str(data), "--out", str(tmp_path / "b")]
    done = subprocess.run(
        [sys.executable, "-m", "webgen_agent", *args, "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
        + ["--db", str(tmp_path / "db.sqlite"), "--allow-host", "https://registry.example.com/npm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--allow-host takes a host name or address" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_registry_on_this_machine_opens_its_one_port_through_the_proxy() -> None:
    from webgen_agent.tools.netns import NetworkGate, NetworkPolicy, _registry_entry, proxy_env, refusal

    entry = _registry_entry("http://127.0.0.1:4873/")
    assert entry == "127.0.0.1:4873" and _registry_entry("https://registry.npmjs.org/") == "registry.npmjs.org"
    assert refusal("127.0.0.1", [entry], 4873) is None
    assert refusal("127.0.0.1", [entry], 5432) is not None  # another service on the host: refused
    policy = NetworkPolicy(allow_hosts=("registry.npmjs.org", entry))
    env = proxy_env(policy, NetworkGate.__new__(NetworkGate))  # npm must reach 127.0.0.1 through the proxy
    assert "127.0.0.1" not in env["npm_config_noproxy"].split(",") and "localhost" in env["npm_config_noproxy"]


async def test_the_site_door_relays_only_to_a_loopback_tcp_connection_handed_over(tmp_path):
    # A process that took the bridge's place on site.sock hands the agent one end of a unix socket
    # pair instead of a connection inside: the agent must not send a client's bytes there.
    gate = NetworkGate(NetworkPolicy(forward=True))
    impostor_end, kept_end = socket.socketpair()
    site_door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    site_door.bind(str(gate.folder / "site.sock"))
    site_door.listen(4)

    def impostor() -> None:
        request, _ = site_door.accept()
        with request:
            request.recv(16)
            socket.send_fds(request, [b"1"], [impostor_end.fileno()])

    try:
        serving = asyncio.create_task(asyncio.to_thread(impostor))
        reader, writer = await asyncio.open_connection("127.0.0.1", gate.forward(5173))
        writer.write(b"GET /secret-request HTTP/1.1\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed at once, nothing relayed
        writer.close()
        await serving
        kept_end.setblocking(False)
        with pytest.raises(BlockingIOError):
            kept_end.recv(100)  # nothing arrived at the impostor's end
    finally:
        gate.close()
        site_door.close()
        impostor_end.close()
        kept_end.close()
