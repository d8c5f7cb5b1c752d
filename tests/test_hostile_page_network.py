"""Attacks on the network through the page under test, each closed, in the real Chromium.

A generated page is loaded by the executor's capture and driven by the GUI agent; both used to keep
it on the site's origin with request routing (captures) or a refusing proxy (GUI agent contexts).
Routing does not see WebSockets or WebRTC: a captured page opened a WebSocket to another local port
and sent STUN packets to a local UDP port. And public internet subresources (CDN scripts, styles,
fonts, images) were refused, unlike upstream's capture. Now one policy holds for both
(``tools/page_proxy.py``): the site, public addresses, never a local or private one;
``--offline-pages`` keeps the site's origin only.

There is no internet here: a "public" host is stood in for by a server on 127.0.0.2, which these
tests (only) let the policy count as public; the address rules themselves are checked on addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import ipaddress
import os
import shutil
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from tests.helpers import CdpClient
from webgen_agent.core.context import HEADLESS_SHELLS
from webgen_agent.tools import page_proxy
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.browser_command import CHROMIUM_FLAGS
from webgen_agent.tools.cdp_scope import scoped_cdp_endpoint
from webgen_agent.tools.page_proxy import PagePolicy, public_address
from webgen_agent.tools.registry import ProcessRegistry

pytestmark = pytest.mark.e2e

STAND_IN = "127.0.0.2"  # the "public internet" of these tests


@dataclass
class Listener:
    """A TCP port that answers any HTTP request and counts every connection made to it."""

    port: int = 0
    connections: list[str] = field(default_factory=list)


@dataclass
class UdpListener:
    port: int = 0
    datagrams: list[bytes] = field(default_factory=list)


@pytest.fixture
def other_port() -> Iterator[Listener]:
    """Another local service (another run's server, the agent's own): nothing may connect to it."""
    listener = Listener()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    listener.port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.connections.append(f"{peer[0]}:{peer[1]}")
            client.settimeout(1)
            try:
                client.recv(65536)
                client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            except OSError:
                pass
            client.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener
    stop.set()
    server.close()
    thread.join(5)


@pytest.fixture
def udp_port() -> Iterator[UdpListener]:
    listener = UdpListener()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    listener.port = sock.getsockname()[1]
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            try:
                listener.datagrams.append(sock.recv(2048))
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    yield listener
    stop.set()
    sock.close()
    thread.join(5)


class _Site(http.server.BaseHTTPRequestHandler):
    pages: dict[str, str]
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        if self.path == "/slow":  # keeps the capture open while the page's connections are tried
            time.sleep(1.5)
        body = self.pages.get(self.path, "ok").encode()
        kind = "text/javascript" if self.path.endswith(".js") else "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Served:
    url: str
    pages: dict[str, str]
    hits: list[str]


@pytest.fixture
def serve_http() -> Iterator[Any]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(host: str) -> Served:
        pages: dict[str, str] = {}
        hits: list[str] = []
        handler = type("Handler", (_Site,), {"pages": pages, "hits": hits})
        server = http.server.ThreadingHTTPServer((host, 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return Served(f"http://{host}:{server.server_address[1]}", pages, hits)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
async def public_socket() -> AsyncIterator[tuple[str, list[str]]]:
    """A WebSocket server on the stand-in "public" address; lists the paths it was asked for."""
    asked: list[str] = []

    async def hello(connection: ServerConnection) -> None:
        asked.append(connection.request.path if connection.request else "?")
        await connection.send("hello from the public socket")

    async with serve(hello, STAND_IN, 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://{STAND_IN}:{port}", asked


@pytest.fixture
def stand_in_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    real = page_proxy.public_address
    monkeypatch.setattr(page_proxy, "public_address", lambda address: str(address) == STAND_IN or real(address))


# -- the address rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("::1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("172.31.255.255", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("fe80::1", False),
        ("fc00::1", False),
        ("fd12:3456::1", False),
        ("100.64.0.1", False),  # shared address space (carrier NAT)
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::ffff:127.0.0.1", False),  # loopback inside an IPv6 address
        ("::ffff:10.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
    ],
)
def test_the_policy_allows_public_addresses_only(address: str, public: bool) -> None:
    ip = ipaddress.ip_address(address)
    assert public_address(ip) is public
    refusal = PagePolicy(site=("127.0.0.1", 5173)).refusal("cdn.example", 443, [ip])
    assert (refusal is None) is public
    assert PagePolicy(site=("127.0.0.1", 5173), offline=True).refusal("cdn.example", 443, [ip]) is not None


def test_the_site_is_always_allowed_and_a_name_with_any_local_answer_is_refused() -> None:
    policy = PagePolicy(site=("127.0.0.1", 5173))
    loopback = [ipaddress.ip_address("127.0.0.1")]
    assert policy.refusal("127.0.0.1", 5173, loopback) is None
    assert PagePolicy(site=("127.0.0.1", 5173), offline=True).refusal("127.0.0.1", 5173, loopback) is None
    assert policy.refusal("127.0.0.1", 5174, loopback) is not None  # another local port
    # A name whose answers mix a public and a local address (a rebinding trick) is refused.
    mixed = [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("127.0.0.1")]
    assert policy.refusal("rebind.example", 80, mixed) is not None


def test_chromium_sends_no_unproxied_webrtc_udp() -> None:
    assert "--webrtc-ip-handling-policy=disable_non_proxied_udp" in CHROMIUM_FLAGS


# -- captures --------------------------------------------------------------------------------------

ATTACKS = """<title>Shop</title><h1>Welcome to the shop</h1>
<img src="http://127.0.0.1:{other}/img.png">
<img src="http://169.254.169.254/latest/meta-data/">
<script>
  fetch('http://127.0.0.1:{other}/fetch', {{mode: 'no-cors'}}).catch(() => {{}});
  fetch('http://localhost:{other}/by-name', {{mode: 'no-cors'}}).catch(() => {{}});
  fetch('http://10.0.0.1/', {{mode: 'no-cors'}}).catch(() => {{}});
  new WebSocket('ws://127.0.0.1:{other}/socket');
  new WebSocket('ws://localhost:{other}/socket-by-name');
  const rtc = new RTCPeerConnection({{iceServers: [
    {{urls: 'stun:127.0.0.1:{udp}'}},
    {{urls: 'turn:127.0.0.1:{other}?transport=tcp', username: 'u', credential: 'p'}},
  ]}});
  rtc.createDataChannel('leak');
  rtc.createOffer().then((offer) => rtc.setLocalDescription(offer));
</script>
<img src="/slow">"""


async def test_a_captured_page_reaches_no_other_local_port_by_fetch_image_websocket_or_webrtc(
    shared_browser: SharedBrowser, serve_http: Any, other_port: Listener, udp_port: UdpListener
) -> None:
    site = serve_http("127.0.0.1")
    site.pages["/"] = ATTACKS.format(other=other_port.port, udp=udp_port.port)
    capture = await shared_browser.capture(site.url + "/", timeout_s=15)
    await asyncio.sleep(0.5)  # anything still on its way
    assert "Welcome to the shop" in capture.visible_text and "/slow" in site.hits
    assert other_port.connections == [], f"connections reached another local port: {other_port.connections}"
    assert udp_port.datagrams == [], f"{len(udp_port.datagrams)} UDP datagrams (STUN) reached a local port"
    refused = " ".join(capture.blocked_requests)
    assert f"127.0.0.1:{other_port.port}" in refused and "169.254.169.254:80" in refused


STUN_ONLY = """<title>Call</title><h1>Call</h1>
<script>
  const rtc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{udp}'}}]}});
  rtc.createDataChannel('leak');
  rtc.createOffer().then((offer) => rtc.setLocalDescription(offer));
</script>
<img src="/slow">"""
# Both kinds the agent may launch (core/context.py find_chromium): each reads a different switch.
CHROMIUM_KINDS = {"headless shell": HEADLESS_SHELLS[0], "full browser": shutil.which("chromium") or ""}


@pytest.mark.parametrize("kind", sorted(CHROMIUM_KINDS))
async def test_no_stun_packet_leaves_either_kind_of_chromium(
    kind: str, tmp_path: Any, serve_http: Any, udp_port: UdpListener
) -> None:
    path = CHROMIUM_KINDS[kind]
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"no Chromium {kind} installed")
    site = serve_http("127.0.0.1")
    site.pages["/"] = STUN_ONLY.format(udp=udp_port.port)
    async with SharedBrowser(path, registry=ProcessRegistry(tmp_path / "processes.jsonl")) as browser:
        capture = await browser.capture(site.url + "/", timeout_s=15)
        await asyncio.sleep(0.5)  # anything still on its way
    assert "Call" in capture.visible_text
    assert udp_port.datagrams == [], f"{kind}: {len(udp_port.datagrams)} UDP datagrams (STUN) reached a local port"


PUBLIC_PAGE = """<title>Cafe</title><h1>Cafe</h1><div id=out></div>
<script src="{public}/widget.js"></script>
<script>
  const socket = new WebSocket('{socket}/live');
  socket.onmessage = (event) => {{ document.getElementById('out').append(' ' + event.data); }};
</script>
<img src="/slow">"""
WIDGET = "document.getElementById('out').append('CDN script ran');"


@pytest.mark.parametrize("offline", [False, True])
async def test_public_subresources_load_unless_pages_are_offline(
    shared_browser: SharedBrowser,
    serve_http: Any,
    public_socket: tuple[str, list[str]],
    stand_in_is_public: None,
    offline: bool,
) -> None:
    site, public = serve_http("127.0.0.1"), serve_http(STAND_IN)
    socket_url, asked = public_socket
    public.pages["/widget.js"] = WIDGET
    site.pages["/"] = PUBLIC_PAGE.format(public=public.url, socket=socket_url)
    capture = await shared_browser.capture(site.url + "/", timeout_s=15, offline=offline)
    assert "Cafe" in capture.visible_text
    if offline:  # the old rule: the site's own origin only
        assert public.hits == [] and asked == []
        assert "CDN script ran" not in capture.visible_text
        assert any(public.url in b for b in capture.blocked_requests), capture.blocked_requests
    else:
        assert "CDN script ran" in capture.visible_text and public.hits == ["/widget.js"]
        assert "hello from the public socket" in capture.visible_text and asked == ["/live"]


# -- GUI agent contexts (raw CDP through the scoped relay, as browser-use drives them) ---------------


@contextlib.asynccontextmanager
async def _page_in_scope(endpoint_url: str, url: str) -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    """An ``evaluate(js)`` for a page of ``url`` in the scoped endpoint's context."""
    async with connect(endpoint_url, max_size=None) as connection:
        client = CdpClient(connection)
        session = await client.open_page(url)

        async def evaluate(expression: str) -> str:
            return str(await client.evaluate(session, expression))

        yield evaluate


def _fetch(url: str) -> str:
    return f"fetch({url!r}, {{mode: 'no-cors'}}).then(() => 'ok', () => 'blocked')"


def _socket(url: str) -> str:
    return (
        f"new Promise((done) => {{ const s = new WebSocket({url!r}); s.onopen = () => done('ok'); "
        "s.onerror = () => done('blocked'); setTimeout(() => done('timeout'), 5000); })"
    )


@pytest.mark.parametrize("offline", [False, True])
async def test_a_gui_agent_context_follows_the_same_policy(
    shared_browser: SharedBrowser,
    serve_http: Any,
    other_port: Listener,
    public_socket: tuple[str, list[str]],
    stand_in_is_public: None,
    offline: bool,
) -> None:
    site, public = serve_http("127.0.0.1"), serve_http(STAND_IN)
    socket_url, _ = public_socket
    site.pages["/"] = "<title>Site</title><h1>Site</h1>"
    async with scoped_cdp_endpoint(shared_browser.ws_url, confine_to=site.url + "/", offline=offline) as endpoint:
        async with _page_in_scope(endpoint.url, site.url + "/") as run:
            assert await run(_fetch(site.url + "/data")) == "ok"
            assert await run(_fetch(f"http://127.0.0.1:{other_port.port}/x")) == "blocked"
            assert await run(_socket(f"ws://127.0.0.1:{other_port.port}/x")) == "blocked"
            assert await run(_fetch("http://169.254.169.254/latest/meta-data/")) == "blocked"
            expected = "blocked" if offline else "ok"
            assert await run(_fetch(public.url + "/cdn.css")) == expected
            assert await run(_socket(socket_url + "/live")) == expected
    assert other_port.connections == []
