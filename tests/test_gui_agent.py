"""The GUI agent drives a real Chromium through a local page, scripted by the scripted model server."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.context import find_chromium
from webgen_agent.core.errors import ConfigError
from webgen_agent.tools.gui_agent import (
    PINNED_BROWSER_USE,
    GuiAction,
    GuiAgentSettings,
    GuiRun,
    UnsupportedBrowserUse,
    check_browser_use_version,
    run_gui_agent,
)

try:  # the one the agent itself would launch
    CHROMIUM = find_chromium()
except ConfigError:
    CHROMIUM = ""
needs_chromium = pytest.mark.skipif(not CHROMIUM, reason="no Chromium on PATH (set WEBGEN_CHROMIUM)")
PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TASK = "Add a todo 'Buy milk' and check that it appears in the list. Answer YES or NO."

TODO_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Todo</title></head>
<body>
<h1>My todos</h1>
<input id="new-item" placeholder="What needs doing?">
<button id="add" type="button">Add item</button>
<ul id="items"></ul>
<p id="count">0 items</p>
<script>
document.getElementById('add').addEventListener('click', () => {
  const input = document.getElementById('new-item');
  const text = input.value.trim();
  if (!text) return;
  const li = document.createElement('li');
  li.textContent = 'Todo: ' + text;   // only script-made list items carry the "Todo:" prefix
  document.getElementById('items').appendChild(li);
  input.value = '';
  document.getElementById('count').textContent = document.querySelectorAll('#items li').length + ' items';
});
</script>
<div style="height: 3000px"></div>
</body></html>
"""


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text(TODO_PAGE, encoding="utf-8")

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    httpd.shutdown()
    httpd.server_close()


def scripted(rules: list[dict]) -> ScriptedServer:
    return ScriptedServer(Scenario.model_validate({"name": "gui", "rules": rules}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


TODO_RULES = [
    {
        "turn": 0,
        "agent": {
            "actions": [
                {"input": {"target": "What needs doing?", "text": "Buy milk"}},
                {"click": {"target": "Add item"}},
            ],
            "memory": "Typed the item and pressed Add item.",
        },
    },
    # Only a list item made by the page's script shows "Todo: Buy milk" in the element listing.
    {
        "page_contains": ["Todo: Buy milk"],
        "agent": {"actions": [{"done": {"text": "YES - Buy milk is listed", "success": True}}]},
    },
    {"agent": {"actions": [{"done": {"text": "NO - the item is missing", "success": False}}]}},
]


@pytest.mark.e2e
@needs_chromium
async def test_agent_adds_a_todo_in_a_real_browser(site_url: str) -> None:
    async with scripted(TODO_RULES) as server:
        run = await run_gui_agent(
            url=site_url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                chromium_path=CHROMIUM,
                timeout_s=90,
            ),
        )
    assert run.stopped_reason == "done", run.errors
    assert run.final_answer == "YES - Buy milk is listed" and run.success is True
    assert [r.rule_index for r in server.requests] == [0, 1]  # the answer came from the list-item rule
    assert [(a.step, a.name) for a in run.actions] == [(1, "input"), (1, "click"), (2, "done")]
    assert run.actions[0].params["text"] == "Buy milk" and run.actions[0].error is None
    # What was acted on, as a person reads it (not browser-use's element index).
    assert [a.target for a in run.actions] == ['input "What needs doing?"', 'button "Add item"', None]
    # The page before each agent step, scaled down for the report.
    assert [f.step for f in run.frames] == [1, 2]
    assert all(f.png.startswith(PNG_MAGIC) for f in run.frames)
    thumbnails = [f.thumbnail() for f in run.frames]
    assert all(t.startswith(b"\xff\xd8") and 1_000 < len(t) < 100_000 for t in thumbnails)
    assert all(f.url == site_url for f in run.frames)
    assert run.steps == 2 and run.errors == []
    assert run.input_tokens > 1000 and run.output_tokens > 0  # two screenshots at 765 tokens each, plus text
    assert run.final_screenshot_png is not None and run.final_screenshot_png.startswith(PNG_MAGIC)
    again = GuiRun.model_validate_json(run.model_dump_json())  # PNG travels as base64 in JSON
    assert again.final_screenshot_png == run.final_screenshot_png


async def test_dead_endpoint_fails_fast_without_a_browser() -> None:
    started = time.monotonic()
    run = await run_gui_agent(
        url="http://127.0.0.1:9/",
        task=TASK,
        settings=GuiAgentSettings(
            model="vlm",
            base_url=f"http://127.0.0.1:{free_port()}/v1",
            api_key="k",
            chromium_path=CHROMIUM or "/usr/bin/chromium",
        ),
    )
    assert run.stopped_reason == "error"
    assert "cannot be reached" in run.errors[0]
    assert time.monotonic() - started < 20


async def test_missing_chromium_is_reported() -> None:
    run = await run_gui_agent(
        url="http://127.0.0.1:9/",
        task=TASK,
        settings=GuiAgentSettings(
            model="vlm",
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            chromium_path="/nonexistent/chromium",
        ),
    )
    assert run.stopped_reason == "error" and "Chromium not found" in run.errors[0]


@pytest.mark.e2e
@needs_chromium
async def test_failing_endpoint_stops_after_bounded_retries(site_url: str) -> None:
    async with scripted([{"fault": {"status": 500, "message": "model crashed"}}]) as server:
        run = await run_gui_agent(
            url=site_url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                chromium_path=CHROMIUM,
                timeout_s=90,
            ),
        )
    assert run.stopped_reason == "error"
    assert any("model crashed" in e for e in run.errors)
    assert len(server.requests) == 6  # two steps, each one call plus two client retries
    assert run.seconds < 45


@pytest.mark.e2e
@needs_chromium
async def test_action_budget_counts_actions_not_steps(site_url: str) -> None:
    rules = [
        {
            "contains": ["You reached max_steps"],
            "agent": {"actions": [{"done": {"text": "NO - out of steps", "success": False}}]},
        },
        {"agent": {"actions": [{"scroll": "down"}, {"scroll": {"direction": "up", "pages": 0.5}}]}},
    ]
    async with scripted(rules) as server:
        run = await run_gui_agent(
            url=site_url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                chromium_path=CHROMIUM,
                max_actions=3,
                timeout_s=90,
            ),
        )
    assert run.stopped_reason == "max_actions"
    assert [(a.step, a.name) for a in run.actions] == [(1, "scroll"), (1, "scroll"), (2, "scroll")]
    assert run.final_answer is None
    assert len(server.requests) == 2
    assert run.final_screenshot_png is not None


@pytest.mark.e2e
@needs_chromium
async def test_whole_run_timeout(site_url: str) -> None:
    rules = [{"delay_s": 60, "agent": {"actions": [{"done": {"text": "too late", "success": True}}]}}]
    async with scripted(rules) as server:
        run = await run_gui_agent(
            url=site_url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                chromium_path=CHROMIUM,
                timeout_s=6,
            ),
        )
    assert run.stopped_reason == "timeout"
    assert run.final_answer is None
    assert any("exceeded 6s" in e for e in run.errors)
    assert 6 <= run.seconds < 30


@pytest.mark.e2e
@needs_chromium
async def test_page_that_never_loads_ends_at_the_deadline() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        async with scripted(TODO_RULES) as server:
            run = await run_gui_agent(
                url=f"http://127.0.0.1:{silent.getsockname()[1]}/",
                task=TASK,
                settings=GuiAgentSettings(
                    model="vlm",
                    base_url=server.base_url,
                    api_key="k",
                    chromium_path=CHROMIUM,
                    timeout_s=6,
                ),
            )
    assert run.stopped_reason == "timeout"
    assert any("never finished loading" in e for e in run.errors)
    assert server.requests == []  # the model was never asked
    assert run.seconds < 40  # deadline plus bounded cleanup, on a loaded machine


@pytest.fixture
def attached_chromium(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """A Chromium started outside the GUI agent, and its DevTools URL."""
    profile = tmp_path / "profile"
    sockets = tempfile.mkdtemp(prefix="cdp-")
    chromium = subprocess.Popen(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--remote-debugging-port=0",  # Chromium picks a port and writes it to DevToolsActivePort
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "chromium.log").open("wb"),
        # Its socket folder lands in a folder of its own, with a short path: a unix socket's path holds
        # 107 bytes at most, which a pytest-xdist worker's tmp_path can pass.
        env={**os.environ, "TMPDIR": sockets},
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 90  # a loaded machine starts Chromium slowly
        while not (port_file.exists() and port_file.read_text().strip()):
            assert chromium.poll() is None, (
                f"Chromium exited ({chromium.returncode}) before it listened: "
                + (tmp_path / "chromium.log").read_text(errors="replace")[-2000:]
            )
            assert time.monotonic() < deadline, "Chromium wrote no DevToolsActivePort in 90 s"
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        yield chromium, f"http://127.0.0.1:{port}"
    finally:
        chromium.terminate()
        chromium.wait(timeout=10)
        shutil.rmtree(sockets, ignore_errors=True)


@pytest.mark.e2e
@needs_chromium
async def test_cdp_attached_browser_is_left_running(
    site_url: str, attached_chromium: tuple[subprocess.Popen, str]
) -> None:
    chromium, cdp_url = attached_chromium
    async with scripted(TODO_RULES) as server:
        run = await run_gui_agent(
            url=site_url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm", base_url=server.base_url, api_key="k", cdp_url=cdp_url, timeout_s=90
            ),
        )
    assert run.stopped_reason == "done", run.errors
    assert run.final_answer == "YES - Buy milk is listed"
    assert chromium.poll() is None  # the attached browser still runs


def test_gui_action_and_run_defaults() -> None:
    run = GuiRun()
    assert run.stopped_reason == "error" and run.actions == [] and run.final_screenshot_png is None
    action = GuiAction(step=1, name="click", params={"index": 3})
    assert action.result is None and action.error is None


def test_settings_reject_an_empty_budget_or_deadline() -> None:
    for bad in ({"max_actions": 0}, {"max_actions_per_step": 0}, {"timeout_s": 0}):
        with pytest.raises(ValueError):
            GuiAgentSettings(model="vlm", base_url="http://127.0.0.1:9/v1", api_key="k", **bad)
    settings = GuiAgentSettings(model="vlm", base_url="http://127.0.0.1:9/v1", api_key="secret-key")
    assert "secret-key" not in repr(settings)


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (a fresh Python process importing the package)
def test_importing_the_package_and_the_report_loads_no_browser_use() -> None:
    # Against a baseline of what langgraph itself loads (its SDK imports websockets).
    script = """
import os, sys
import langgraph.graph
before = set(sys.modules)
import webgen_agent.apps.report.html
import webgen_agent.tools.gui_agent
from webgen_agent.tools.gui_agent import GuiAction, GuiAgentSettings, GuiRun
heavy = ("browser_use", "bubus", "playwright", "langchain_openai", "websockets")
print(sorted(m for m in set(sys.modules) - before if m.startswith(heavy)))
print(sorted(k for k in os.environ if k.startswith("BROWSER_USE") or k == "ANONYMIZED_TELEMETRY"))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROWSER_USE") and k != "ANONYMIZED_TELEMETRY"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "[]"], out.stdout


def test_only_the_pinned_browser_use_is_supported() -> None:
    pin = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("browser-use"))
    assert pin == f"browser-use=={PINNED_BROWSER_USE}"  # the patches name the version pyproject.toml installs
    check_browser_use_version()  # the installed one
    with pytest.raises(UnsupportedBrowserUse) as raised:
        check_browser_use_version("0.14.0")
    message = str(raised.value)
    assert "\n" not in message and "0.14.0" in message and PINNED_BROWSER_USE in message


async def test_an_unsupported_browser_use_is_reported_before_any_browser_starts(monkeypatch) -> None:
    from webgen_agent.tools.gui_agent import patches

    monkeypatch.setattr(patches, "PINNED_BROWSER_USE", "0.0.1")
    run = await run_gui_agent(
        url="http://127.0.0.1:9/",
        task=TASK,
        settings=GuiAgentSettings(model="vlm", base_url="http://127.0.0.1:9/v1", api_key="k", chromium_path=CHROMIUM),
    )
    assert run.stopped_reason == "error" and run.errors == [
        f"browser-use {PINNED_BROWSER_USE} is installed, but the GUI agent supports only browser-use 0.0.1 "
        "(pip install browser-use==0.0.1)"
    ]
