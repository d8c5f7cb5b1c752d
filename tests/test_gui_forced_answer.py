"""The upstream GUI agent's rules (WebVoyager's run.py, as WebGen-Agent and WebGen-Bench run it):
one action per iteration, the latest 3 screenshots in every request, and at the 15th iteration an
answer forced from an agent that never answers by itself. Real Chromium, a static page, a scripted VLM.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from webgen_agent.apps.bench import prompts as bench_prompts
from webgen_agent.apps.bench.evaluate import webgen_bench_agent, webgen_bench_verdict
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.profiles import profile_rules
from webgen_agent.nodes.gui_testing import SCREENSHOT_MARKER, upstream_trajectory
from webgen_agent.nodes.profile import prompts_for
from webgen_agent.tools.gui_agent import GuiAgentSettings, open_gui_session, run_gui_agent
from webgen_agent.tools.gui_agent.patches import ENTER_AFTER_TYPING, PAGE_NOT_SHOWN, not_a_text_box_note
from webgen_agent.tools.gui_agent.service import agent_tools
from webgen_agent.tools.webgen_bench import UITestCase

# A clock in a corner: no two screenshots are alike, so a request's images say which step took them.
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Scores</title></head>
<body><h1>High scores</h1><button type="button">Refresh</button><p>No scores yet.</p>
<div id="clock" style="position: fixed; right: 8px; bottom: 8px"></div>
<script>setInterval(() => { clock.textContent = performance.now().toFixed(1) }, 10)</script>
<div style="height: 4000px"></div></body></html>"""
# A page that comes late: its button 2 s after it loads, its scores 1.5 s after the button's click.
LATE_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Scores</title></head>
<body><p id="status">Starting</p><script>
setTimeout(() => {
  const button = document.createElement("button");
  button.textContent = "Load scores";
  button.onclick = () => {
    document.getElementById("status").textContent = "Fetching scores";
    setTimeout(() => { document.getElementById("status").textContent = "Scores loaded" }, 1500);
  };
  document.body.prepend(button);
}, 2000);
</script></body></html>"""
# A form that adds its draft on submit, saying whether the field was clicked 1 s before the text and
# whether Enter came 2 s after it.
FORM_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Todos</title></head>
<body><form id="add"><input id="draft" placeholder="New todo"><button type="button">Save</button></form>
<ul id="items"></ul><script>
let clicked = null, began = 0, typed = 0;
draft.addEventListener("click", () => { clicked = performance.now() });
draft.addEventListener("input", () => { typed = performance.now(); began = began || typed });
add.addEventListener("submit", (event) => {
  event.preventDefault();
  const item = document.createElement("li");
  const waited = performance.now() - typed >= 1900 ? "after a pause" : "at once";
  const first = clicked !== null && began - clicked >= 900 ? ", clicked first" : ", not clicked first";
  item.textContent = `${draft.value} added ${waited}${first}`;
  items.append(item);
});
</script></body></html>"""
NUMBER_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Order</title></head>
<body><label>How many <input type="number" placeholder="How many"></label></body></html>"""
# A button at the viewport's centre that counts its clicks, and a key handler of the page's own on
# window.onkeydown that says when it ran, set as the page loads and again 1.5 s later.
CENTRE_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Todos</title>
<style>body { margin: 0; height: 100vh }
#centre { position: absolute; left: calc(50% - 60px); top: calc(50% - 20px); width: 120px; height: 40px }</style>
</head><body><p id="clicks">Centre clicks: 0</p><p id="keys">Page key handler: not run</p>
<input id="draft" placeholder="New todo"><button id="centre" type="button">Centre</button><script>
let clicks = 0;
centre.addEventListener("click", () => { clicks += 1; document.getElementById("clicks").textContent = `Centre clicks: ${clicks}` });
const handler = () => { document.getElementById("keys").textContent = "Page key handler: ran" };
window.onkeydown = handler;
setTimeout(() => { window.onkeydown = handler }, 1500);
</script></body></html>"""
# A link meant for a new tab, and the page it opens, which says how long its tab's history is (1 in a
# tab of its own; more when it opened in the tab of the first page).
LINK_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Home</title></head>
<body><h1>Home</h1><a href="scores.html" target="_blank">Open scores</a></body></html>"""
SCORES_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Scores</title></head>
<body><h1>Scores</h1><p id="history"></p>
<script>document.getElementById("history").textContent = `Tab history: ${history.length}`</script></body></html>"""
FORCED = "used up the interactions"
# WebVoyager's waits before each read of the page, off where a test is about something else (they have
# a test of their own).
NO_WAITS = {
    "settle_after_load_s": 0.0,
    "settle_after_action_s": {},
}  # a phrase of both limit prompts (agent and benchmark)


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("page")
    (root / "index.html").write_text(PAGE, encoding="utf-8")
    (root / "late.html").write_text(LATE_PAGE, encoding="utf-8")
    (root / "form.html").write_text(FORM_PAGE, encoding="utf-8")
    (root / "number.html").write_text(NUMBER_PAGE, encoding="utf-8")
    (root / "centre.html").write_text(CENTRE_PAGE, encoding="utf-8")
    (root / "link.html").write_text(LINK_PAGE, encoding="utf-8")
    (root / "scores.html").write_text(SCORES_PAGE, encoding="utf-8")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    httpd.shutdown()
    httpd.server_close()


async def scripted_agent(server: ScriptedServer, shared_browser: Any, **rules: Any) -> GuiAgentSettings:
    """A GUI agent of 15 actions on the shared Chromium, asking the scripted VLM; ``rules`` beside."""
    return GuiAgentSettings(
        model="vlm",
        base_url=server.base_url,
        api_key="k",
        cdp_url=(await shared_browser.start()).ws_url,
        max_actions=15,
        timeout_s=240,
        **rules,
    )


# browser-use's own nudges, which WebVoyager never sends: a warning as the step budget runs out, and
# one after repeated actions.
NUDGES = ["BUDGET WARNING", "Heads up: you have repeated"]


def never_answers(forced_text: str) -> Scenario:
    """A VLM that scrolls for ever (two scrolls an answer, of which one action per iteration is taken);
    only the forced last step (its limit prompt) gets an answer. A request with one of browser-use's
    nudges in it matches no rule (and is answered with an error)."""
    return Scenario.model_validate(
        {
            "name": "never-answers",
            "rules": [
                {
                    "last_contains": [FORCED],
                    "contains": [PAGE_NOT_SHOWN],  # the 15th iteration's state: no page
                    "not_contains": NUDGES,
                    "agent": {"actions": [{"done": {"text": forced_text, "success": True}}]},
                },
                {
                    "not_contains": NUDGES,
                    "agent": {
                        "actions": [{"scroll": "down"}, {"scroll": "up"}],
                        "memory": "Still looking for the scores.",
                    },
                },
            ],
        }
    )


def test_upstream_profile_asks_for_webvoyager_rules() -> None:
    upstream, default = profile_rules("upstream"), profile_rules("default")
    assert (upstream.gui_actions_per_step, upstream.gui_screenshots_kept) == (1, 3)
    assert (default.gui_actions_per_step, default.gui_screenshots_kept) == (3, 1)
    assert upstream.gui_webvoyager_messages and not default.gui_webvoyager_messages
    # A webvoyager/run.py: 5 s after loading (l.510); 3 s after a click (l.380), 10 s after typing
    # (l.418), 3 s after a scroll (l.451), 2 s after going back or to Google (l.700, l.704) or a failure (l.719).
    assert upstream.gui_settle_after_load_s == 5.0
    assert dict(upstream.gui_settle_after_action_s) == {
        "click": 3.0,
        "input": 10.0,
        "scroll": 3.0,
        "go_back": 2.0,
        "navigate": 2.0,
        "failed": 2.0,
    }
    assert (default.gui_settle_after_load_s, default.gui_settle_after_action_s) == (0.0, ())
    # A webvoyager/run.py l.408-417: click(field).pause(1), the text, pause(2), Enter.
    assert (upstream.gui_click_before_typing_s, default.gui_click_before_typing_s) == (1.0, None)
    assert (upstream.gui_enter_after_typing_s, default.gui_enter_after_typing_s) == (2.0, None)
    assert FORCED in prompts_for("upstream").gui_limit("Check the scores.")
    assert "Check the scores." in prompts_for("upstream").gui_limit("Check the scores.")
    assert prompts_for("default").gui_limit("Check the scores.") == ""


@pytest.mark.e2e
async def test_an_agent_that_never_answers_is_made_to_answer_at_the_15th_iteration(
    page_url: str, shared_browser
) -> None:
    """WebGen-Bench's protocol: 14 actions, the 15th iteration asks for YES / PARTIAL / NO; its PARTIAL
    is the case's verdict (compute_acc's rule); the upstream summary reads the agent's messages."""
    case = UITestCase.model_validate(
        {
            "task": "Look at the high scores.",
            "expected_result": "A table of high scores is shown.",
            "task_category": {"primary_category": "Data Display Testing"},
        }
    )
    async with ScriptedServer(never_answers("PARTIAL - the page loads but lists no scores.")) as server:
        settings = await scripted_agent(server, shared_browser)
        run = await run_gui_agent(
            url=page_url,
            task=bench_prompts.case_task(page_url, case.task, case.expected_result, 15),
            # WebVoyager's waits after each action (42 s here) have their own test below.
            settings=settings.model_copy(update={**webgen_bench_agent(case), **NO_WAITS}),
        )
    requests = server.requests
    assert run.stopped_reason == "done", run.errors
    # 14 scrolls, one per iteration, then the answer at the 15th, when the limit prompt asked for it.
    assert [a.name for a in run.actions] == ["scroll"] * 14 + ["done"]
    assert [r.rule_index for r in requests] == [1] * 14 + [0]
    assert case.expected_result in requests[-1].last_user_text
    # The latest 3 screenshots in every request once there are 3 (1, 2, then 3 kept), each page new
    # until the 15th iteration, which shows no page: its 3 are the 14th's (A webvoyager/run.py 545-551).
    assert [r.images for r in requests] == [1, 2] + [3] * 13
    assert all(
        r.image_digests[:-1] == q.image_digests[-2:] for q, r in zip(requests[2:-2], requests[3:-1], strict=True)
    )
    assert len({r.image_digests[-1] for r in requests[:-1]}) == 14
    assert requests[-1].image_digests == requests[-2].image_digests
    # None of browser-use's own nudges came (a warning as the budget runs out, one after repeated
    # actions): no rule answers a request that carries one (``never_answers``), and all were answered.
    assert webgen_bench_verdict(run.last_message) == "PARTIAL"
    # The summary WebGen-Agent asks for sees the agent's own messages, a marker for each page shown.
    trajectory = upstream_trajectory(run)
    assert trajectory[0::2] == [SCREENSHOT_MARKER] * 15
    assert "Still looking for the scores." in trajectory[1] and "PARTIAL - the page loads" in trajectory[-1]


def fails_then_answers(failures: int) -> Scenario:
    """A VLM whose first ``failures`` answers are no action at all (prose, not the agent's JSON), then
    one that answers YES."""
    return Scenario.model_validate(
        {
            "name": "fails-then-answers",
            "rules": [
                {"times": failures, "content": "I am not sure what this page is for."},
                {"agent": {"actions": [{"done": {"text": "YES - the high scores are shown.", "success": True}}]}},
            ],
        }
    )


@pytest.mark.e2e
@pytest.mark.parametrize("agent", ["upstream", "webgen-bench", "default"])
async def test_webvoyager_goes_on_past_unreadable_answers_where_the_default_agent_gives_up(
    page_url: str, shared_browser, agent: str
) -> None:
    """WebVoyager notes a format error and goes on to its 15th iteration (A webvoyager/run.py 615-619),
    as WebGen-Agent and WebGen-Bench run it, so 4 unreadable answers and then a YES are a run that
    answered YES. The default profile's agent gives up after 3 in a row: a harness error, grade 0."""
    rules = profile_rules("default" if agent == "default" else "upstream")
    async with ScriptedServer(fails_then_answers(4)) as server:
        settings = await scripted_agent(server, shared_browser, **rules.gui_agent())
        if agent == "webgen-bench":
            case = UITestCase(task="Look at the high scores.", expected_result="A table of high scores is shown.")
            settings = GuiAgentSettings(**{**settings.model_dump(), "max_failures": 3, **webgen_bench_agent(case)})
        run = await run_gui_agent(url=page_url, task="Look at the high scores.", settings=settings)
    answered = [r.rule_index for r in server.requests]
    if agent == "default":
        assert run.stopped_reason == "error" and run.final_answer is None
        assert 1 not in answered and len(answered) <= 4
    else:
        assert run.stopped_reason == "done", run.errors
        assert answered == [0] * 4 + [1] and "YES" in (run.final_answer or "")
        # After each unreadable answer WebVoyager sends its error alone, no page (A run.py 585-586):
        # every request carries the first page's screenshot and no other.
        first = server.requests[0].image_digests
        assert len(first) == 1 and all(r.image_digests == first for r in server.requests)


def reads_the_late_page() -> Scenario:
    """A VLM that clicks "Load scores" once it is shown, then answers by what the page says."""
    done = {"done": {"text": "", "success": True}}
    return Scenario.model_validate(
        {
            "name": "late-page",
            "rules": [
                {"page_contains": ["Scores loaded"], "agent": {"actions": [{"done": {**done["done"], "text": "YES"}}]}},
                {
                    "page_contains": ["Fetching scores"],
                    "agent": {"actions": [{"done": {**done["done"], "text": "NO"}}]},
                },
                {"page_contains": ["Load scores"], "agent": {"actions": [{"click": {"target": "Load scores"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agent_reads_the_page_after_upstreams_waits(page_url: str, shared_browser) -> None:
    """WebVoyager looks at a page 5 s after it loads and 3 s after a click (A webvoyager/run.py l.510,
    l.380), so a page that shows its button 2 s after loading, and its scores 1.5 s after the click,
    is read complete: the button is there at the first step, the scores at the second. Read at once,
    as browser-use alone reads it, the first step finds no button (no rule answers it) and the
    second only "Fetching scores"."""
    rules = profile_rules("upstream")
    async with ScriptedServer(reads_the_late_page()) as server:
        settings = await scripted_agent(server, shared_browser, **rules.gui_agent())
        run = await run_gui_agent(
            url=page_url.replace("index.html", "late.html"), task="Load the scores.", settings=settings
        )
    assert run.stopped_reason == "done", run.errors
    assert [a.name for a in run.actions] == ["click", "done"] and run.final_answer == "YES"
    assert [r.rule_index for r in server.requests] == [2, 0]


def types_a_todo() -> Scenario:
    """A VLM that types a todo, then answers by what the list shows."""
    return Scenario.model_validate(
        {
            "name": "types-a-todo",
            "rules": [
                {
                    "page_contains": ["Buy milk added after a pause, clicked first"],
                    "agent": {"actions": [{"done": {"text": "YES"}}]},
                },
                {
                    "page_contains": ["Buy milk added"],
                    "agent": {"actions": [{"done": {"text": "NO, not as WebVoyager"}}]},
                },
                {"turn": 0, "agent": {"actions": [{"input": {"target": "New todo", "text": "Buy milk"}}]}},
                {"agent": {"actions": [{"done": {"text": "NO, nothing was added"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agent_clicks_before_typing_and_presses_enter_after(page_url: str, shared_browser) -> None:
    """WebVoyager clicks the field, pauses 1 s, types the text, pauses 2 s and presses Enter (A
    webvoyager/run.py l.408-417), so a form that submits on Enter is submitted by typing alone, and a
    field that reacts to clicks reacts; browser-use alone focuses the field without a click and
    leaves the form unsent. The action's description tells the model, as WebVoyager's system prompt does."""
    rules = {**profile_rules("upstream").gui_agent(), **NO_WAITS}
    async with ScriptedServer(types_a_todo()) as server:
        settings = await scripted_agent(server, shared_browser, **rules)
        run = await run_gui_agent(
            url=page_url.replace("index.html", "form.html"), task="Add a todo.", settings=settings
        )
    assert run.stopped_reason == "done", run.errors
    assert [a.name for a in run.actions] == ["input", "done"] and run.final_answer == "YES"
    assert [r.rule_index for r in server.requests] == [2, 0]
    assert ENTER_AFTER_TYPING in agent_tools(settings).registry.registry.actions["input"].description
    default = settings.model_copy(update={"enter_after_typing_s": None})
    assert ENTER_AFTER_TYPING not in agent_tools(default).registry.registry.actions["input"].description


@pytest.mark.parametrize(
    ("tag", "attributes", "noted"),
    [
        ("input", {}, False),
        ("input", {"type": "EMAIL"}, False),
        ("textarea", {}, False),
        ("input", {"type": "number"}, True),
        ("input", {"type": "checkbox"}, True),
        ("div", {"contenteditable": "true"}, True),
    ],
)
def test_webvoyagers_text_boxes_are_the_ones_typed_into_without_a_note(tag: str, attributes: dict, noted: bool) -> None:
    # A webvoyager/run.py l.390-392: input of type text, search, password, email or tel, and textarea.
    assert (not_a_text_box_note(tag, attributes) is not None) == noted


@pytest.mark.e2e
async def test_typing_into_what_may_not_be_a_text_box_is_noted_in_the_next_observation(
    page_url: str, shared_browser
) -> None:
    """WebVoyager types into a number field all the same, and its next observation notes that the
    element may not be a text box (A webvoyager/run.py l.390-395)."""
    scenario = Scenario.model_validate(
        {
            "name": "types-a-number",
            "rules": [
                {"contains": ["may not be a text box"], "agent": {"actions": [{"done": {"text": "YES"}}]}},
                {"turn": 0, "agent": {"actions": [{"input": {"target": "How many", "text": "3"}}]}},
                {"agent": {"actions": [{"done": {"text": "NO, no note"}}]}},
            ],
        }
    )
    rules = {
        **profile_rules("upstream").gui_agent(),
        **NO_WAITS,
        "click_before_typing_s": 0.0,
        "enter_after_typing_s": 0.0,
    }
    async with ScriptedServer(scenario) as server:
        settings = await scripted_agent(server, shared_browser, **rules)
        run = await run_gui_agent(url=page_url.replace("index.html", "number.html"), task="Order 3.", settings=settings)
    assert run.stopped_reason == "done", run.errors
    assert run.final_answer == "YES" and [r.rule_index for r in server.requests] == [1, 0]


def types_after_the_start() -> Scenario:
    """A VLM that types a todo once the centre was clicked, then answers by whether the page's own
    key handler ran."""
    return Scenario.model_validate(
        {
            "name": "types-after-the-start",
            "rules": [
                {"page_contains": ["Page key handler: ran"], "agent": {"actions": [{"done": {"text": "NO, it ran"}}]}},
                {
                    "turn": 0,
                    "page_contains": ["Centre clicks: 1"],
                    "agent": {"actions": [{"input": {"target": "New todo", "text": "Buy milk"}}]},
                },
                {"turn": 0, "agent": {"actions": [{"done": {"text": "NO, the centre was not clicked"}}]}},
                {"agent": {"actions": [{"done": {"text": "YES"}}]}},
            ],
        }
    )


@pytest.mark.e2e
@pytest.mark.parametrize("prepared", [False, True], ids=["own-session", "prepared-session"])
async def test_the_webvoyager_agent_clicks_the_body_and_guards_the_space_key_before_it_looks(
    page_url: str, shared_browser, prepared: bool
) -> None:
    """Once its page has loaded, WebVoyager clicks the page's body (Selenium clicks an element at the
    centre of its box in view) and replaces the page's window.onkeydown with its guard against the
    space key (A webvoyager/run.py l.502-510): a control at the viewport's centre is clicked before
    the agent's first look; and before typing it sets the guard again (l.410-415), so a handler the
    page set again meanwhile (here 1.5 s after loading, before the agent's first look 2.5 s after)
    never runs either. The default profile shows the page as it loaded. A session opened ahead does
    the same (its guard is in place before the agent's first look); one opened without the start is
    not taken by a run that asks for it."""
    url = page_url.replace("index.html", "centre.html")
    upstream = {
        **profile_rules("upstream").gui_agent(),
        **NO_WAITS,
        "settle_after_load_s": 2.5,
        "click_before_typing_s": 0.0,
    }
    answers = {}
    handlers: list[str] = []  # window.onkeydown of each session opened ahead, before its run
    for start in (True, False):
        async with ScriptedServer(types_after_the_start()) as server:
            settings = await scripted_agent(server, shared_browser, **{**upstream, "webvoyager_start": start})
            session = None
            if prepared:
                opened_with = start if start else True  # the default run is offered a start it did not ask for
                session = await open_gui_session(
                    url=url, cdp_url=settings.cdp_url or "", viewport=settings.viewport, webvoyager_start=opened_with
                )
                cdp = await session.session.get_or_create_cdp_session()
                shown = await cdp.cdp_client.send.Runtime.evaluate(
                    params={"expression": "String(window.onkeydown)", "returnByValue": True}, session_id=cdp.session_id
                )
                handlers.append(shown["result"]["value"])
            run = await run_gui_agent(url=url, task="Add a todo.", settings=settings, prepared=session)
        assert run.stopped_reason == "done", run.errors
        answers[start] = (run.final_answer, [r.rule_index for r in server.requests], run.prepared)
    assert answers[True] == ("YES", [1, 3], prepared), answers
    assert answers[False] == ("NO, the centre was not clicked", [2], False)
    assert all("keyCode == 32" in handler for handler in handlers) and len(handlers) == (2 if prepared else 0)


def follows_a_link() -> Scenario:
    """A VLM that clicks a link meant for a new tab, then answers by whether the tab has a history."""
    return Scenario.model_validate(
        {
            "name": "follows-a-link",
            "rules": [
                {"page_contains": ["Tab history: 1"], "agent": {"actions": [{"done": {"text": "NO, a new tab"}}]}},
                {"page_contains": ["Tab history: "], "agent": {"actions": [{"done": {"text": "YES, same tab"}}]}},
                {"turn": 0, "agent": {"actions": [{"click": {"target": "Open scores"}}]}},
                {"agent": {"actions": [{"done": {"text": "NO, no scores shown"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agent_opens_a_link_meant_for_a_new_tab_in_its_own_tab(
    page_url: str, shared_browser
) -> None:
    """WebVoyager sets the target of each element it clicks to _self (A webvoyager/run.py l.377-380):
    a link meant for a new tab opens in the agent's tab, whose history then holds the page it came
    from. browser-use's own click opens the new tab and follows it there, a tab with no history."""
    url = page_url.replace("index.html", "link.html")
    upstream = {**profile_rules("upstream").gui_agent(), **NO_WAITS, "settle_after_action_s": {"click": 1.0}}
    assert upstream["click_in_same_tab"] is True
    assert profile_rules("default").gui_agent()["click_in_same_tab"] is False
    answers = {}
    for same_tab in (True, False):
        async with ScriptedServer(follows_a_link()) as server:
            settings = await scripted_agent(server, shared_browser, **{**upstream, "click_in_same_tab": same_tab})
            run = await run_gui_agent(url=url, task="Open the scores.", settings=settings)
        assert run.stopped_reason == "done", run.errors
        answers[same_tab] = (run.final_answer, [r.rule_index for r in server.requests])
    assert answers == {True: ("YES, same tab", [2, 1]), False: ("NO, a new tab", [2, 0])}, answers
