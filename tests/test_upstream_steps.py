"""The upstream profile runs every step as WebGen-Agent does: a fresh `npm install` and a fresh start
at each step, a GUI test included (so what the server prints while the GUI agent navigates reaches
the step's error words), and whatever the server serves is captured and graded (an error page, a
page slower than the start deadline). Real npm, real dev servers (plain node), Chromium and
browser-use; only the models are scripted.

Upstream: src/agent/webgen_agent.py ``get_cmds``/``get_feedback``, src/utils/execute_for_feedback.py
``execute_for_feedback`` and ``execute_for_webvoyager_feedback`` (WebGen-Agent ba86ef1).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.prompt_tree import DESCRIBE, FUNCTION_TEST, GRADE, REMINDERS, SYSTEM, write_prompt_tree
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.graph.api import run_requirement
from webgen_agent.nodes.prompts import UPSTREAM_FEEDBACK

pytestmark = pytest.mark.e2e

VALIDATED = '<boltAction type="screenshot_validated"/>'
FINISH = '<boltAction type="finish"/>'
PACKAGE = json.dumps({"name": "site", "private": True, "scripts": {"dev": "node server.js"}}, indent=2)


def server_js(*, on_start: str = "", delay_s: float = 0, status: int = 200, crash: bool = False) -> str:
    """A dev server: index.html for every path, /api/save logs a failure; ``on_start``: a line it
    prints when it starts; ``delay_s``: it answers nothing until that long after its start."""
    return f"""const http = require('http');
const fs = require('fs');
const ready = Date.now() + {int(delay_s * 1000)};
{f"console.log({json.dumps(on_start)});" if on_start else ""}
{"throw new Error('menu.json is missing');" if crash else ""}
http.createServer((req, res) => {{
  setTimeout(() => {{
    if (req.url === '/api/save') {{
      console.log('Error: could not save the note (notes.json is read-only)');
      res.writeHead(200, {{'content-type': 'application/json'}});
      res.end('{{}}');
      return;
    }}
    res.writeHead({status}, {{'content-type': 'text/html'}});
    res.end(fs.readFileSync('index.html', 'utf8'));
  }}, Math.max(0, ready - Date.now()));
}}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('Local: http://127.0.0.1:' + process.env.PORT + '/'));
"""


def site(title: str, body: str = "", **server: Any) -> str:
    html = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
    return (
        f'<boltArtifact id="site" title="{title}">\n'
        f'<boltAction type="file" filePath="package.json">\n{PACKAGE}\n</boltAction>\n'
        f'<boltAction type="file" filePath="server.js">\n{server_js(**server)}</boltAction>\n'
        f'<boltAction type="file" filePath="index.html">\n{html}\n</boltAction>\n</boltArtifact>'
    )


def page_only(title: str) -> str:
    html = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
    return f'<boltArtifact id="site" title="{title}">\n<boltAction type="file" filePath="index.html">\n{html}\n</boltAction>\n</boltArtifact>'


NOTES = "Build a notes page with a Save note button."
WARNS = "Build a page that greets the visitor."
BROKEN = "Build a menu page for a cafe."
SLOW = "Build a page about slow food."
CRASH = "Build a page that lists the opening hours."
SAVE = (
    "<button id='save' onclick=\"fetch('/api/save').then(()=>document.body.insertAdjacentText('beforeend', "
    "'Saved.'))\">Save note</button>"
)
DESCRIPTION = "A white page with a heading."


def coder(turn: int, reply: str, requirement: str) -> dict[str, Any]:
    return {"model": "scripted-coder", "turn": turn, "contains": [requirement], "content": reply}


RULES: list[dict[str, Any]] = [
    coder(0, site("Notes", SAVE), NOTES),
    coder(1, VALIDATED, NOTES),
    coder(2, FINISH, NOTES),
    coder(0, site("Hello", on_start="warning: the errorHandler option is deprecated"), WARNS),
    coder(1, page_only("Hello again"), WARNS),
    coder(2, FINISH, WARNS),
    coder(0, site("Menu", status=500), BROKEN),
    coder(1, FINISH, BROKEN),
    coder(0, site("Slow food", delay_s=6), SLOW),
    coder(1, FINISH, SLOW),
    coder(0, site("Hours", crash=True), CRASH),
    coder(1, FINISH, CRASH),
    {"model": "scripted-vlm", "schema": "ScreenshotGrade", "json": {"analysis": "Plain.", "grade": 4}},
    {
        "model": "scripted-vlm",
        "schema": "ScreenshotDescription",
        "json": {"is_error": False, "error_message": "", "screenshot_description": DESCRIPTION, "suggestions": ""},
    },
    {
        "model": "scripted-vlm",
        "page_contains": ["Saved."],
        "agent": {"actions": [{"done": {"text": "YES - the note was saved.", "success": True}}]},
    },
    {
        "model": "scripted-vlm",
        "turn": 0,
        "page_contains": ["Save note"],
        "agent": {"actions": [{"click": {"target": "Save note"}}]},
    },
    {"model": "scripted-vlm", "agent": {"actions": [{"done": {"text": "NO - nothing happened.", "success": False}}]}},
    {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Click Save note."}},
    {"model": "scripted-feedback", "schema": "GuiSummary", "json": {"passed": True, "suggestions": "", "grade": 5}},
]


@pytest.fixture(scope="module")
async def runs(tmp_path_factory, chromium_path):
    base = tmp_path_factory.mktemp("upstream-steps")
    db = base / "webgen.db"
    scenario = Scenario.model_validate({"name": "upstream-steps", "rules": RULES})
    with ScriptedServer(scenario) as server:
        for run_id, requirement, steps, extra in (
            # This run reads WebGen-Agent's prompts from a checkout-shaped tree (--prompts-from).
            ("notes", NOTES, 3, {"prompts_from": str(write_prompt_tree(base / "WebGen-Agent"))}),
            ("warns", WARNS, 3, {}),
            ("broken", BROKEN, 2, {}),
            # The start deadline passes before the page answers; the capture still waits for its load.
            ("slow", SLOW, 2, {"start_timeout_s": 2.0, "page_timeout_s": 30.0}),
            ("crash", CRASH, 2, {}),
        ):
            context = scripted_context(
                server.base_url, profile="upstream", max_steps=steps, chromium=chromium_path, **extra
            )
            await run_requirement(requirement, context=context, run_id=run_id, out_dir=base / run_id, db_path=db)
        requests = list(server.requests)
    store = BlobStore(db)
    states = {run_id: await final_state(db, run_id) for run_id in ("notes", "warns", "broken", "slow", "crash")}
    return {"states": states, "store": store, "requests": requests}


def feedback_to(store: BlobStore, state: dict, index: int) -> str:
    """The last user message of step ``index``'s prompt: the feedback on the step before it."""
    return store.get_text(store.get_json(state["steps"][index]["prompt"])[-1]["hash"])


async def test_errors_the_server_prints_while_the_gui_agent_navigates_mark_the_gui_step(runs):
    """A screenshot_validated step installs and starts anew, and the log it reads includes what the
    server printed while the agent clicked: that log holds "Error", so the step is errored (counted
    toward backtracking) and the coder reads the log with the start-errors line."""
    state, store = runs["states"]["notes"], runs["store"]
    edit, gui = state["steps"][0], state["steps"][1]
    assert edit["action"] == "edit" and not edit["errored"]  # the landing page alone prints nothing
    assert gui["action"] == "screenshot_validated" and gui["gui_passed"] is True  # the agent said YES
    assert gui["execution"]["start_error"] is True and gui["execution"]["install_ran"] is True
    assert gui["errored"] is True
    feedback = feedback_to(store, state, 2)
    assert UPSTREAM_FEEDBACK["start_failed"] in feedback and "could not save the note" in feedback
    assert "Change the code to fix the errors in service starting." in feedback


async def test_every_step_reads_its_own_fresh_install_output_and_start_log(runs):
    """A start-up warning holding the word "error" is in every step's fresh log (upstream restarts
    the server each step), not only in the step that first started it; npm runs at every step."""
    state, store = runs["states"]["warns"], runs["store"]
    first, second = state["steps"][0], state["steps"][1]
    for step in (first, second):
        assert step["execution"]["start_error"] is True and step["execution"]["server_restarted"] is True
        logs = store.get_json(step["execution"]["logs"])
        assert "errorHandler option is deprecated" in logs["server"]
        assert logs["install"].strip()  # npm's own output for this step (an up-to-date tree included)
    assert UPSTREAM_FEEDBACK["start_failed"] in feedback_to(store, state, 2)


async def test_an_error_page_is_captured_and_graded(runs):
    """A server answering HTTP 500 with a page: upstream's Selenium loads it and the VLM grades it."""
    state, store = runs["states"]["broken"], runs["store"]
    step = state["steps"][0]
    assert step["execution"]["ok"] is False  # the page answered HTTP 500
    assert step.get("screenshot") and step["screenshot_score"] == 4
    feedback = feedback_to(store, state, 1)
    assert DESCRIPTION in feedback and UPSTREAM_FEEDBACK["no_screenshot"] not in feedback


async def test_a_page_slower_than_the_start_deadline_is_captured_and_graded(runs):
    state, store = runs["states"]["slow"], runs["store"]
    step = state["steps"][0]
    assert step["execution"]["ok"] is False  # the start deadline passed with no answer
    assert step.get("screenshot") and step["screenshot_score"] == 4
    page = store.get_json(step["page"])
    assert "Slow food" in page["visible_text"]


async def test_a_run_given_a_checkout_sends_its_prompts(runs):
    """--prompts-from reaches every request that uses it: the coder's system prompt, the GUI test
    instruction request, both screenshot requests, the GUI-run summary and the feedback's reminder."""
    state, store = runs["states"]["notes"], runs["store"]
    first = store.get_json(state["steps"][0]["prompt"])[0]
    assert store.get_text(first["hash"]) == SYSTEM
    asked: dict[str, str] = {}
    for request in runs["requests"]:  # the notes run went first: each schema's first request is its
        if request.rule_index is not None:
            asked.setdefault(str(RULES[request.rule_index].get("schema")), request.last_user_text)
    assert asked["TestInstruction"] == FUNCTION_TEST.format(instruction=NOTES)
    assert (asked["ScreenshotDescription"], asked["ScreenshotGrade"]) == (DESCRIBE, GRADE)
    assert asked["GuiSummary"].startswith("Checkout summary request.\nInstruction: Click Save note.")
    assert feedback_to(store, state, 1).endswith(REMINDERS)


async def test_a_server_that_crashes_at_start_reports_its_errors(runs):
    """The dev server exits with an error before it answers: upstream reads its log, which holds the
    error, so the coder is told the service reported errors on starting, with the log."""
    state, store = runs["states"]["crash"], runs["store"]
    step = state["steps"][0]
    assert step["execution"]["ok"] is False and step["execution"]["start_error"] is True
    feedback = feedback_to(store, state, 1)
    assert UPSTREAM_FEEDBACK["start_failed"] in feedback and "menu.json is missing" in feedback
