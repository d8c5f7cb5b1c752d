"""Generated code's own network namespace, and the two doors the agent keeps in it.

Every sandboxed command gets ``bwrap --unshare-net``: inside there is only a loopback interface, so
nothing on the host's loopback (the model server, databases, the agent's own ports), no private,
link-local or metadata address (169.254.169.254) and no interface of the host is reachable, and a
server listening on 0.0.0.0 listens inside only.

Two doors, both unix sockets in a private folder (``NetworkGate``) bound into the sandbox and both
served by the agent, so the agent decides what crosses:

- **the site**: the agent listens on host 127.0.0.1:<free port> per port it wants to reach inside;
  for each connection it asks the bridge at ``site.sock`` for a connection to that port in the
  namespace, gets the connected socket itself (``SCM_RIGHTS``) and relays to it (``forward``). The
  site's URL is the agent-side address, so Chromium, captures, GUI tests and HMR websockets work
  unchanged, and only what listens inside the sandbox can answer there.
- **the registry**: an HTTP proxy (CONNECT, and plain http) that lets through only the hosts of
  npm's configured registries and the ``--allow-host`` hosts, and refuses everything else. npm and
  shell actions get ``https-proxy``/``proxy`` pointing at a loopback port inside; the bridge makes
  that listening socket and hands it to the agent over ``proxy.sock`` before the command starts,
  and the agent accepts on it. Dev servers and builds get no proxy.

The bridge (``tools.netns_bridge``) carries no bytes: each byte crosses the agent's relay only.

Chosen over pasta/slirp4netns: they give the namespace a route to the whole network (they cannot
restrict destinations), and their port forwarding would still need the agent to check listeners.
The proxy is hand-written (asyncio, with ``tools.egress``, which the page proxy shares) because it
must decide on the host before any byte leaves, accept on a socket handed over from another
network namespace, and live inside the agent; proxy servers on PyPI are whole applications with
their own process and configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools import netns_bridge
from webgen_agent.tools.bridge_python import bridge_python
from webgen_agent.tools.egress import (
    BUFFER,
    ProxyRequest,
    Streams,
    connect,
    http_answer,
    literal_address,
    local_host,
    normal_host,
    parse_request,
    public_address,
    relay,
    resolve,
)
from webgen_agent.tools.netns_bridge import PROXY_SOCKET, SITE_SOCKET
from webgen_agent.tools.netns_doors import close_door, received_socket

__all__ = [
    "INNER_FOLDER",
    "INNER_PROXY_PORT",
    "NetworkGate",
    "NetworkPolicy",
    "ProxyRequest",
    "normal_host",
    "parse_request",
    "refusal",
]

INNER_FOLDER = "/tmp/.webgen-net"  # where the gate's folder is bound inside (on the sandbox's private /tmp)
INNER_PROXY_PORT = 47819  # the proxy's port on the sandbox's own loopback
DEFAULT_REGISTRY_HOST = "registry.npmjs.org"
_TIMEOUT_S = 30.0
# A sandbox's proxy holds at most this many connections at once (npm opens 15); more are closed as
# they come, so a flood costs the agent no descriptors beyond these (each holds two once tunnelled).
MAX_PROXY_CONNECTIONS = 64
PROXY_IDLE_S = 120.0  # a proxied connection that carries no byte either way for this long is closed
_Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class NetworkPolicy:
    """What one sandboxed command may reach: nothing, the proxy's hosts, and whether the agent reaches in.

    ``isolated`` False shares the machine's network (the setting ``own_network``, or a host that
    cannot make a network namespace); ``allow_hosts`` non-empty opens the proxy; ``forward`` lets
    the agent connect to ports inside (dev servers).
    """

    isolated: bool = True
    allow_hosts: tuple[str, ...] = ()
    forward: bool = False

    @property
    def in_effect(self) -> bool:
        return self.isolated and network_problem() is None

    @property
    def needs_gate(self) -> bool:
        return self.in_effect and (bool(self.allow_hosts) or self.forward)


@functools.cache
def network_problem() -> str | None:
    """Why generated code cannot get its own network namespace here (one line), or None. Probed once."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [bwrap, "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    try:
        done = subprocess.run([*probe, "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not run ({exc})"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"no network namespace can be made ({reason})"
    return None


def shared_network_warning(settings: SandboxSettings) -> str | None:
    """The run's one line when generated code shares this machine's network (None when it has its own)."""
    if not settings.own_network:
        why = "own_network is off"
    elif (problem := network_problem()) is not None:
        why = problem
    else:
        return None
    return (
        f"Generated code shares this machine's network ({why}): it can reach local services (the model "
        "server among them), private and metadata addresses, any host, and listen on this machine's interfaces."
    )


def registry_hosts() -> tuple[str, ...]:
    """The hosts of the registries npm is configured with (``registry`` and ``@scope:registry``).

    Read from the user's and the global npm configuration and the environment, never from a
    workspace (its ``.npmrc`` is model-written): npm runs in an empty folder. Asked again only when
    the environment's npm registry settings change (an embedder may set ``npm_config_registry``).
    """
    settings = tuple(sorted((k, v) for k, v in os.environ.items() if k.lower().startswith("npm_config_")))
    return _configured_registry_hosts(settings)


@functools.cache
def _configured_registry_hosts(_environment: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    hosts = {DEFAULT_REGISTRY_HOST}
    npm = shutil.which("npm")
    if npm is not None:
        with tempfile.TemporaryDirectory(prefix="webgen-npmrc-") as empty:
            with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
                shown = subprocess.run(
                    [npm, "config", "list", "--json", "--logs-max=0"],
                    cwd=empty,
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                config = json.loads(shown.stdout) if shown.returncode == 0 else {}
                for name, value in config.items():
                    if name.endswith("registry") and isinstance(value, str):
                        entry = _registry_entry(value)
                        if entry:
                            hosts.add(entry)
    return tuple(sorted(hosts))


def _registry_entry(url: str) -> str | None:
    """The allow-list entry of a registry URL: its host, or ``host:port`` for a local one.

    A registry on this machine's loopback or a private address (a local mirror) opens that one port
    only: the host alone would let generated code reach every service on it through the proxy.
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return None
    if not local_host(host):
        return host.lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{normal_host(host)}:{port}"


def bridge_command(policy: NetworkPolicy, gate: NetworkGate | None) -> list[str]:
    """What goes before the command inside: the bridge for the gate's doors (nothing without a gate)."""
    if gate is None:
        return []
    proxy_port = INNER_PROXY_PORT if policy.allow_hosts else 0
    source = Path(netns_bridge.__file__).read_text()
    return [
        *bridge_python().argv,  # a system Python, else a copy of what it needs: never a home folder
        "-I",
        "-S",
        "-c",
        source,
        INNER_FOLDER,
        str(proxy_port),
        "1" if policy.forward else "0",
        "--",
    ]


def bwrap_args(policy: NetworkPolicy, gate: NetworkGate | None) -> list[str]:
    """``--unshare-net`` where it is in effect, and the gate's folder bound in (after /tmp's tmpfs)."""
    if not policy.in_effect:
        return []
    return ["--unshare-net", *(["--bind", str(gate.folder), INNER_FOLDER] if gate is not None else [])]


def proxy_env(policy: NetworkPolicy, gate: NetworkGate | None) -> dict[str, str]:
    """npm's and common tools' proxy settings pointing at the bridge's port inside (empty without a proxy)."""
    if gate is None or not policy.allow_hosts:
        return {}
    url = f"http://127.0.0.1:{INNER_PROXY_PORT}"
    # The sandbox's own loopback goes direct, never to the host's: except a loopback name a registry
    # on this machine uses, which must go through the proxy (to that one port of the host's).
    through_proxy = {entry.rsplit(":", 1)[0] for entry in policy.allow_hosts if ":" in entry}
    local = ",".join(name for name in ("localhost", "127.0.0.1", "::1") if name not in through_proxy)
    env = {"npm_config_proxy": url, "npm_config_https_proxy": url, "npm_config_noproxy": local}
    for name in ("http_proxy", "https_proxy"):
        env[name] = env[name.upper()] = url
    env["no_proxy"] = env["NO_PROXY"] = local
    return env


# -- the proxy's rule --------------------------------------------------------------------------------


def refusal(host: str, allowed: Iterable[str], port: int | None = None) -> str | None:
    """Why the proxy refuses ``host`` (and ``port``) (a line for the model), or None when it is allowed.

    An entry ``host:port`` (a local registry) allows that port of the host only.
    """
    name = normal_host(host)
    allow = {normal_host(h) for h in allowed}
    if name in allow or (port is not None and f"{name}:{port}" in allow):
        return None
    shown = ", ".join(sorted(allow)) or "no host"
    address = literal_address(name)
    kind = "host" if address is None else "address" if public_address(address) else "local address"
    return (
        f"The sandbox's proxy refused the {kind} {name}: generated code may reach only {shown} "
        f"(the user can add hosts with --allow-host)."
    )


# -- the gate ------------------------------------------------------------------------------------


class NetworkGate:
    """One sandboxed command's doors: a private folder of unix sockets, served on a thread of its own.

    The thread has its own event loop, so a gate opened from one loop (or none) serves for as long
    as the process lives, whichever loop later stops it.
    """

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self.folder = Path(tempfile.mkdtemp(prefix="webgen-net-"))  # 0700: only this user opens its sockets
        self._ports: dict[int, int] = {}
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._proxy_clients = 0
        self._loop.set_exception_handler(_quiet_cancellations)
        self._thread = threading.Thread(target=self._loop.run_forever, name="webgen-netns", daemon=True)
        self._thread.start()
        if policy.allow_hosts:
            self._call(self._open_proxy_door())

    @classmethod
    def open(cls, policy: NetworkPolicy) -> NetworkGate | None:
        return cls(policy) if policy.needs_gate else None

    def forward(self, port: int) -> int:
        """The agent-side port (host 127.0.0.1) that reaches ``port`` inside the sandbox."""
        if port not in self._ports:
            self._ports[port] = self._call(self._serve_port(port))
        return self._ports[port]

    def url(self, url: str) -> str:
        """``url`` (as printed inside) rewritten to the agent-side address of its port."""
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.forward(port)}"))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _call(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout=_TIMEOUT_S)

    def _connection(self, handler: _Handler, *, proxy: bool = False) -> _Handler:
        """``handler`` run for one connection: its task held by the gate (asyncio keeps only weak
        references to tasks), cancelled at the close, which ends it quietly (asyncio's streams log a
        traceback for every cancelled connection task). A proxy connection over
        ``MAX_PROXY_CONNECTIONS`` is closed at once."""

        async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if proxy and self._proxy_clients >= MAX_PROXY_CONNECTIONS:
                writer.transport.abort()
                return
            task = asyncio.current_task()
            if task is not None:
                self._connections.add(task)
            self._proxy_clients += proxy
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    await handler(reader, writer)
            finally:
                self._proxy_clients -= proxy
                self._connections.discard(task)

        return run

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        # A connection accepted just before the close gets its task a moment later: look again.
        for _ in range(10):
            current = asyncio.current_task()
            connections = {task for task in asyncio.all_tasks() if task is not current} | self._connections
            if not connections:
                return
            for task in connections:
                task.cancel()
            await asyncio.wait(connections, timeout=1.0)  # each closes its sockets as it ends

    # -- the site: connections made inside, handed to the agent ---------------------------------

    async def _serve_port(self, port: int) -> int:
        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                inner = await asyncio.wait_for(self._open_site(port), _TIMEOUT_S)
            except (OSError, TimeoutError):
                inner = None
            if inner is None:
                writer.close()
                return
            await relay((reader, writer), inner)

        server = await asyncio.start_server(self._connection(client), "127.0.0.1", 0, limit=BUFFER)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _open_site(self, port: int) -> Streams | None:
        """A connection to ``port`` inside the namespace, made there by the bridge and handed over;
        None when nothing listens there (or what answered on ``site.sock`` handed over no such socket)."""
        loop = asyncio.get_running_loop()
        # The folder is writable inside: generated code could put a symlink to some host socket
        # (docker's, say) in place of site.sock. Open the name without following links, check that
        # it is a socket, and connect through the descriptor.
        fd = os.open(self.folder / SITE_SOCKET, os.O_PATH | os.O_NOFOLLOW)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as door:
            door.setblocking(False)
            try:
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    raise OSError(f"{SITE_SOCKET} is not a socket")
                await loop.sock_connect(door, f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
            await loop.sock_sendall(door, f"{port}\n".encode())
            inner = await received_socket(door, listening=False)
        if inner is None:
            return None
        return await asyncio.open_connection(sock=inner, limit=BUFFER)

    # -- the registry: the proxy, accepting on the listener made inside -------------------------

    async def _open_proxy_door(self) -> None:
        """Listen on ``proxy.sock`` for the one listening socket the bridge hands over."""
        door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        door.bind(str(self.folder / PROXY_SOCKET))
        door.listen(4)
        door.setblocking(False)
        task = asyncio.get_running_loop().create_task(self._take_listener(door))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _take_listener(self, door: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                handed, _ = await loop.sock_accept(door)
                with handed:
                    handed.setblocking(False)
                    with contextlib.suppress(OSError, TimeoutError):
                        listener = await asyncio.wait_for(received_socket(handed, listening=True), _TIMEOUT_S)
                        if listener is None:
                            continue
                        server = await asyncio.start_server(
                            self._connection(self._proxy_client, proxy=True), sock=listener, limit=BUFFER
                        )
                        self._servers.append(server)
                        await close_door(door, self.folder / PROXY_SOCKET)  # one listener per sandbox
                        await loop.sock_sendall(handed, b"1")
                        return
        finally:
            await close_door(door, self.folder / PROXY_SOCKET)

    async def _proxy_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _TIMEOUT_S)
            request = parse_request(head[:-4])
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await http_answer(writer, 400, "The sandbox's proxy takes only CONNECT and absolute http:// requests.")
            return
        why = refusal(request.host, self.policy.allow_hosts, request.port)
        if why is not None:
            await http_answer(writer, 403, why)
            return
        upstream = await connect(await resolve(request.host, request.port), request.port)
        if upstream is None:
            await http_answer(writer, 502, f"The sandbox's proxy could not reach {request.host}:{request.port}.")
            return
        if request.head is None:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream[1].write(request.head + b"\r\n\r\n")
        await relay((reader, writer), upstream, idle_s=PROXY_IDLE_S)


def _quiet_cancellations(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The gate loop's exception handler: a connection task cancelled at the close before it ran
    makes asyncio's streams call ``task.exception()``, which raises CancelledError in a callback
    (a traceback on the terminal per connection); those are dropped, anything else reported."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)
