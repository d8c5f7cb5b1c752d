"""Attacks on the network from generated code, each closed by the sandbox's own network namespace.

Before, the sandbox shared the host's network namespace: generated code reached the model server (a
full chat completion at the user's cost) and any other loopback service of the agent's machine, one
request from a cloud metadata address, any host on the internet, and a server it started on
0.0.0.0 listened on the host's interfaces. Now it reaches only what the agent relays: installs and
shell actions npm's registry (and ``--allow-host`` hosts) through the agent's proxy, and the agent
reaches a dev server's port through its own forwarder.

Every command goes through the real path (``SiteRunner``, ``workspace_confinement``, real bwrap).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.netns import INNER_FOLDER, MAX_PROXY_CONNECTIONS, network_problem
from webgen_agent.tools.process import ManagedProcess
from webgen_agent.tools.sandbox import sandbox_problem, workspace_confinement
from webgen_agent.tools.site import SiteRunner, free_port

pytestmark = [
    pytest.mark.e2e,  # bubblewrap, and its network namespace
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
    pytest.mark.skipif(network_problem() is not None, reason=f"no network namespace here: {network_problem()}"),
    pytest.mark.skipif(
        shutil.which("curl") is None, reason="curl is not installed (scripts/setup.sh --test installs it)"
    ),
]


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"a local service's page"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_service() -> Iterator[int]:
    """Another loopback listener of the agent's machine (a database, the agent's own port): its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def _runner(tmp_path: Path, **settings: object) -> SiteRunner:
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    return SiteRunner(workspace, log_dir=tmp_path / "logs", sandbox=SandboxSettings.model_validate(settings))


async def _shell(runner: SiteRunner, script: str) -> str:
    result = await runner.shell(script, timeout_s=60)
    assert result.exit_code is not None, result.output_tail
    return result.output_tail


async def test_generated_code_cannot_reach_the_model_server_or_another_loopback_listener(tmp_path, local_service):
    scenario = Scenario.model_validate({"name": "net", "rules": [{"content": "A completion the user pays for."}]})
    with ScriptedServer(scenario) as model_server:
        completions = f"{model_server.base_url}/chat/completions"
        request = json.dumps({"model": "scripted-coder", "messages": [{"role": "user", "content": "hi"}]})
        script = (
            # Straight to the port, and through the agent's proxy (the attacker names it itself).
            f"curl -sS -m 10 --noproxy '*' -H 'content-type: application/json' -d '{request}' {completions}"
            '; echo " exit=$?"\n'
            f"curl -sS -m 10 --noproxy '' --proxy \"$http_proxy\" -H 'content-type: application/json' -d '{request}' {completions}"
            '; echo " exit=$?"\n'
            f"curl -sS -m 10 --noproxy '*' http://127.0.0.1:{local_service}/"
            '; echo " exit=$?"\n'
            f"curl -sS -m 10 --noproxy '' --proxy \"$http_proxy\" http://127.0.0.1:{local_service}/"
            '; echo " exit=$?"\n'
            f"curl -sS -m 10 --noproxy '' --proxy \"$http_proxy\" http://localhost:{local_service}/"
            '; echo " exit=$?"\n'
        )
        output = await _shell(_runner(tmp_path), script)
        assert model_server.requests == [], output
    assert "A completion the user pays for" not in output
    assert "a local service's page" not in output
    assert output.count("exit=7") == 2, output  # nothing listens on the sandbox's own loopback
    assert output.count("The sandbox's proxy refused") == 3, output


async def test_generated_code_reaches_no_metadata_private_or_public_address(tmp_path):
    script = (
        "for target in 169.254.169.254/80 10.0.0.1/80 192.168.1.1/80 1.1.1.1/443 8.8.8.8/53; do\n"
        '  if timeout 10 bash -c "exec 3<>/dev/tcp/${target}" 2>/dev/null; then echo "reached $target";\n'
        '  else timeout 10 bash -c "exec 3<>/dev/tcp/${target}" 2>&1 | grep -q "Network is unreachable" '
        '&& echo "unreachable $target" || echo "failed otherwise $target"; fi\n'
        "done\n"
        "curl -sS -m 10 http://169.254.169.254/latest/meta-data/; echo\n"
        "echo routes: $(tail -n +2 /proc/net/route | wc -l); echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)\n"
    )
    output = await _shell(_runner(tmp_path), script)
    for target in ("169.254.169.254/80", "10.0.0.1/80", "192.168.1.1/80", "1.1.1.1/443", "8.8.8.8/53"):
        assert f"unreachable {target}" in output, output
    assert "The sandbox's proxy refused the local address 169.254.169.254" in output
    assert "routes: 0" in output and "interfaces: lo" in output.replace("  ", " ").replace(
        "interfaces:  ", "interfaces: "
    )


async def test_a_server_on_all_interfaces_inside_is_not_on_the_hosts(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    port = free_port()
    serve = (
        "import socket, time\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('0.0.0.0', {port})); s.listen(8); print('listening', flush=True)\n"
        "while True:\n"
        "    c, _ = s.accept(); c.sendall(b'from inside'); c.close()\n"
    )
    server = await ManagedProcess.astart(
        [sys.executable, "-c", serve],
        cwd=workspace,
        log_path=tmp_path / "server.log",
        sandbox=workspace_confinement(workspace, SandboxSettings(), "server"),
    )
    try:
        for _ in range(300):
            if "listening" in server.log_tail():
                break
            await asyncio.sleep(0.05)
        assert "listening" in server.log_tail(), server.log_tail()
        for host in ("127.0.0.1", _host_address()):
            with pytest.raises(OSError):
                socket.create_connection((host, port), timeout=5).close()
        # The agent still reaches it, through its own forwarder.
        assert server.network is not None
        agent_side = await asyncio.to_thread(server.network.forward, port)
        reader, writer = await asyncio.open_connection("127.0.0.1", agent_side)
        assert await asyncio.wait_for(reader.read(), 10) == b"from inside"
        writer.close()
    finally:
        await server.stop()


def _host_address() -> str:
    """An address of one of the host's own interfaces other than loopback (or loopback when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


async def test_a_symlink_in_place_of_the_site_socket_does_not_lead_the_agent_to_a_host_socket(tmp_path):
    # Generated code may write in the folder of the site's socket; a symlink there to a host socket
    # (docker's, say) must not get the agent's forwarder, and Chromium's requests, connected to it.
    host_socket = tmp_path / "host.sock"
    reached: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append(await reader.read(100))
        writer.close()

    listener = await asyncio.start_unix_server(record, path=str(host_socket))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    swap = f"rm -f {INNER_FOLDER}/site.sock && ln -s {host_socket} {INNER_FOLDER}/site.sock && echo swapped && sleep 60"
    server = await ManagedProcess.astart(
        ["bash", "-c", swap],
        cwd=workspace,
        log_path=tmp_path / "server.log",
        sandbox=workspace_confinement(workspace, SandboxSettings(), "server"),
    )
    try:
        for _ in range(300):
            if "swapped" in server.log_tail():
                break
            await asyncio.sleep(0.05)
        assert "swapped" in server.log_tail(), server.log_tail()
        assert server.network is not None and (server.network.folder / "site.sock").is_symlink()
        agent_side = await asyncio.to_thread(server.network.forward, 8080)
        async with httpx.AsyncClient(trust_env=False) as client:
            with pytest.raises(httpx.HTTPError):
                await client.post(f"http://127.0.0.1:{agent_side}/containers/create", content=b"{}", timeout=5)
        await asyncio.sleep(0.2)
        assert reached == []
    finally:
        await server.stop()
        listener.close()


async def test_an_install_reaches_the_registry_but_no_other_host(tmp_path):
    runner = _runner(tmp_path)
    package = {
        "name": "net-install",
        "version": "1.0.0",
        "private": True,
        "dependencies": {"is-number": "7.0.0"},
        "scripts": {
            "postinstall": "curl -sS -m 15 -o /dev/null https://example.com 2> proxied.txt; echo $? >> proxied.txt; "
            "curl -sS -m 10 -o /dev/null --noproxy '*' https://example.com 2> direct.txt; echo $? >> direct.txt"
        },
    }
    (runner.workspace / "package.json").write_text(json.dumps(package))
    installed = await runner.ensure_dependencies()
    assert installed.error is None and installed.ran, installed
    assert (runner.workspace / "node_modules" / "is-number" / "package.json").is_file()  # the registry worked
    proxied = (runner.workspace / "proxied.txt").read_text()
    direct = (runner.workspace / "direct.txt").read_text()
    assert proxied.strip().endswith("56") and "403" in proxied, proxied  # the proxy refused the tunnel
    assert direct.strip().split()[-1] != "0", direct


async def test_allow_host_lets_a_named_host_through(tmp_path, local_service):
    # Through the proxy by name (the sandbox's own loopback is exempt from the proxy otherwise).
    script = f"curl -sS -m 10 --noproxy '' --proxy \"$http_proxy\" http://localhost:{local_service}/; echo"
    refused = await _shell(_runner(tmp_path / "default"), script)
    assert "The sandbox's proxy refused the host localhost" in refused
    allowed = await _shell(_runner(tmp_path / "allowed", allow_hosts=["localhost"]), script)
    assert "a local service's page" in allowed, allowed


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


FLOOD = 2000  # idle connections the attacker opens to its proxy (4,000 were tried by hand)


async def test_a_connection_flood_on_the_proxy_costs_the_attacking_sandbox_only(tmp_path, local_service, caplog, capfd):
    # Every connection the proxy accepted held a descriptor of the agent (two once tunnelled, with no
    # idle timeout): a few thousand stopped every run of the process. Now each sandbox's proxy holds
    # at most MAX_PROXY_CONNECTIONS at once and closes the rest as they come.
    flood = (
        "const net = require('net'); let open = 0, closed = 0;"
        f"for (let i = 0; i < {FLOOD}; i++) {{ const s = net.connect(47819, '127.0.0.1');"
        " s.on('connect', () => open++); s.on('close', () => closed++); s.on('error', () => {}); }"
        "setTimeout(() => { require('fs').writeFileSync('flooded', open + ' ' + closed); }, 3000);"
        "setTimeout(() => process.exit(0), 12000);"
    )
    attacker = _runner(tmp_path / "attacker")
    before = _descriptors()
    attack = asyncio.create_task(attacker.shell(f'node -e "{flood}"', timeout_s=60))
    marker = attacker.workspace / "flooded"
    for _ in range(200):
        if marker.exists() or attack.done():
            break
        await asyncio.sleep(0.1)
    during = _descriptors()
    # Another sandbox, meanwhile, reaches an allowed host through its own proxy.
    script = f"curl -sS -m 10 --noproxy '' --proxy \"$http_proxy\" http://localhost:{local_service}/; echo"
    honest = await _shell(_runner(tmp_path / "honest", allow_hosts=["localhost"]), script)
    result = await attack
    assert result.exit_code == 0, result.output_tail
    assert "a local service's page" in honest
    assert during - before < 2 * MAX_PROXY_CONNECTIONS + 40, (before, during, marker.read_text())
    assert "CancelledError" not in caplog.text + capfd.readouterr().err
