"""WebVoyager's actions as the upstream profile's GUI agent takes them (A ``webvoyager/run.py``
377-451, 502-510): its typing (a click, a pause, the text, a pause, Enter; a note after typing into
what may not be a text box), its start on the page (a click on the body, the guard against the space
key), its clicks in the same tab and its scroll. Real Chromium, static pages, a scripted VLM.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gui_pages import NO_WAITS, answers_with_and_without, scripted_agent, serve_pages
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.profiles import profile_rules
from webgen_agent.tools.gui_agent import GuiAgentSettings, open_gui_session, run_gui_agent
from webgen_agent.tools.gui_agent.service import agent_tools
from webgen_agent.tools.gui_agent.webvoyager_actions import (
    ENTER_AFTER_TYPING,
    WEBVOYAGER_ACTIONS,
    not_a_text_box_note,
)

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
# A tall page that says where its window is scrolled to, with a focusable list (600 px down) that says
# when Alt was pressed on it and then ArrowDown with Alt held.
SCROLL_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Scores</title></head>
<body style="margin: 0"><div style="position: fixed; top: 0; right: 0; background: #fff">
<p id="where">Window at 0</p><p id="keys">No keys on the list</p></div>
<div style="height: 600px"></div>
<div id="list" tabindex="0" aria-label="Score list" style="height: 120px; overflow: auto; border: 1px solid">
<p>Score 1</p><p>Score 2</p><p>Score 3</p><p>Score 4</p><p>Score 5</p><p>Score 6</p></div>
<div style="height: 4000px"></div><script>
addEventListener("scroll", () => { document.getElementById("where").textContent = `Window at ${Math.round(scrollY)}` });
let altHeld = false;
document.getElementById("list").addEventListener("keydown", (event) => {
  if (event.key === "Alt") altHeld = true;
  if (altHeld && event.altKey && event.key === "ArrowDown") document.getElementById("keys").textContent = "Alt+ArrowDown on the list";
});
</script></body></html>"""

# A page that says it is ready 4.5 s after it loads.
SLOW_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Scores</title></head>
<body><p id="status">Loading scores</p>
<script>setTimeout(() => { document.getElementById("status").textContent = "Scores ready" }, 4500)</script>
</body></html>"""

# An email field that shows what it holds.
EMAIL_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Sign up</title></head>
<body><input type="email" placeholder="Email" oninput="document.getElementById('held').textContent = `Field: ${this.value}`">
<p id="held">Field: empty</p></body></html>"""


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve_pages(
        {
            "form.html": FORM_PAGE,
            "number.html": NUMBER_PAGE,
            "centre.html": CENTRE_PAGE,
            "link.html": LINK_PAGE,
            "scores.html": SCORES_PAGE,
            "scroll.html": SCROLL_PAGE,
            "slow.html": SLOW_PAGE,
            "email.html": EMAIL_PAGE,
        }
    ) as base:
        yield base


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
async def test_the_webvoyager_agent_clicks_before_typing_and_presses_enter_after(site: str, shared_browser) -> None:
    """WebVoyager clicks the field, pauses 1 s, types the text, pauses 2 s and presses Enter (A
    webvoyager/run.py l.408-417), so a form that submits on Enter is submitted by typing alone, and a
    field that reacts to clicks reacts; browser-use alone focuses the field without a click and
    leaves the form unsent. The action's description tells the model, as WebVoyager's system prompt does."""
    rules = {**profile_rules("upstream").gui_agent(), **NO_WAITS}
    async with ScriptedServer(types_a_todo()) as server:
        settings = await scripted_agent(server, shared_browser, **rules)
        run = await run_gui_agent(url=site + "form.html", task="Add a todo.", settings=settings)
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
    site: str, shared_browser
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
        run = await run_gui_agent(url=site + "number.html", task="Order 3.", settings=settings)
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
    site: str, shared_browser, prepared: bool
) -> None:
    """Once its page has loaded, WebVoyager clicks the page's body (Selenium clicks an element at the
    centre of its box in view) and replaces the page's window.onkeydown with its guard against the
    space key (A webvoyager/run.py l.502-510): a control at the viewport's centre is clicked before
    the agent's first look; and before typing it sets the guard again (l.410-415), so a handler the
    page set again meanwhile (here 1.5 s after loading, before the agent's first look 2.5 s after)
    never runs either. The default profile shows the page as it loaded. A session opened ahead does
    the same (its guard is in place before the agent's first look); one opened without the start is
    not taken by a run that asks for it."""
    url = site + "centre.html"
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
async def test_the_webvoyager_agent_opens_a_link_meant_for_a_new_tab_in_its_own_tab(site: str, shared_browser) -> None:
    """WebVoyager sets the target of each element it clicks to _self (A webvoyager/run.py l.377-380):
    a link meant for a new tab opens in the agent's tab, whose history then holds the page it came
    from. browser-use's own click opens the new tab and follows it there, a tab with no history."""
    url = site + "link.html"
    upstream = {**profile_rules("upstream").gui_agent(), **NO_WAITS, "settle_after_action_s": {"click": 1.0}}
    answers = await answers_with_and_without(
        "webvoyager_actions", follows_a_link(), shared_browser, url=url, task="Open the scores.", **upstream
    )
    assert answers == {True: ("YES, same tab", [2, 1]), False: ("NO, a new tab", [2, 0])}, answers


def scrolls_the_window_then_a_list() -> Scenario:
    """A VLM that scrolls the window down, then (where the window moved two thirds of its 768 px)
    scrolls within the list, and answers by what the page says."""
    return Scenario.model_validate(
        {
            "name": "scrolls",
            "rules": [
                {"page_contains": ["Alt+ArrowDown on the list"], "agent": {"actions": [{"done": {"text": "YES"}}]}},
                {
                    "page_contains": ["Window at 512"],
                    "agent": {"actions": [{"scroll": {"direction": "down", "target": "Score list"}}]},
                },
                {"page_contains": ["Window at 768"], "agent": {"actions": [{"done": {"text": "NO, a whole page"}}]}},
                {"turn": 0, "agent": {"actions": [{"scroll": "down"}]}},
                {"agent": {"actions": [{"done": {"text": "NO, somewhere else"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agent_scrolls_two_thirds_of_the_window_or_presses_alt_arrow_on_an_element(
    site: str, shared_browser
) -> None:
    """WebVoyager's Scroll (A webvoyager/run.py l.422-451) moves the window by two thirds of its
    height (512 px of 768), and scrolls an element by focusing it and pressing Alt+ArrowDown on it;
    browser-use's own scroll moves a whole viewport (768 px) and takes a number of pages, which
    WebVoyager's does not offer."""
    url = site + "scroll.html"
    upstream = {**profile_rules("upstream").gui_agent(), **NO_WAITS}
    answers = await answers_with_and_without(
        "webvoyager_actions",
        scrolls_the_window_then_a_list(),
        shared_browser,
        url=url,
        task="Look at the scores.",
        **{**upstream, "viewport": (1024, 768)},
    )
    assert answers == {True: ("YES", [3, 1, 0]), False: ("NO, a whole page", [3, 2])}, answers


def test_the_webvoyager_agent_is_offered_webvoyagers_actions_only() -> None:
    """WebVoyager's agent can Click, Type, Scroll, Wait, GoBack, Google and ANSWER (A webvoyager/run.py
    l.631-708), Google being off the site here; browser-use's own agent can also run JavaScript,
    search the page, press keys, visit URLs and switch tabs. Its Wait takes no duration and its Scroll
    no number of pages."""
    assert profile_rules("upstream").gui_agent()["webvoyager_actions"] is True
    assert profile_rules("default").gui_agent()["webvoyager_actions"] is False

    def offered(webvoyager: bool) -> dict[str, set[str]]:
        settings = GuiAgentSettings(
            model="vlm", base_url="http://127.0.0.1:9/v1", api_key="k", webvoyager_actions=webvoyager
        )
        actions = agent_tools(settings).registry.registry.actions
        return {name: set(action.param_model.model_fields) for name, action in actions.items()}

    webvoyager, own = offered(True), offered(False)
    assert sorted(webvoyager) == sorted(WEBVOYAGER_ACTIONS)
    assert "seconds" not in webvoyager["wait"] and "pages" not in webvoyager["scroll"]
    assert {"evaluate", "navigate", "send_keys", "switch", "search_page"} <= set(own)
    assert "seconds" in own["wait"] and "pages" in own["scroll"]


def waits_then_answers() -> Scenario:
    """A VLM that waits once, then answers by whether the scores are ready."""
    return Scenario.model_validate(
        {
            "name": "waits",
            "rules": [
                {"page_contains": ["Scores ready"], "agent": {"actions": [{"done": {"text": "YES"}}]}},
                {"turn": 0, "agent": {"actions": [{"wait": {}}]}},
                {"agent": {"actions": [{"done": {"text": "NO, still loading"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agent_waits_five_seconds(site: str, shared_browser) -> None:
    """WebVoyager's Wait sleeps 5 s (A webvoyager/run.py l.669-670): a page that is ready 4.5 s after
    it loads is ready when the agent looks again (browser-use's own wait, 3 s asked, sleeps 2)."""
    upstream = {**profile_rules("upstream").gui_agent(), **NO_WAITS}
    async with ScriptedServer(waits_then_answers()) as server:
        settings = await scripted_agent(server, shared_browser, **upstream)
        run = await run_gui_agent(url=site + "slow.html", task="Look at the scores.", settings=settings)
    assert run.stopped_reason == "done", run.errors
    assert (run.final_answer, [r.rule_index for r in server.requests]) == ("YES", [1, 0])
    assert [a.name for a in run.actions] == ["wait", "done"]


def types_into_an_email_field() -> Scenario:
    """A VLM that types two words into an email field, then answers by what the field holds."""
    return Scenario.model_validate(
        {
            "name": "types-an-email",
            "rules": [
                {"page_contains": ["Field: Buymilk"], "agent": {"actions": [{"done": {"text": "YES, no space"}}]}},
                {"page_contains": ["Field: Buy milk"], "agent": {"actions": [{"done": {"text": "NO, a space"}}]}},
                {"turn": 0, "agent": {"actions": [{"input": {"target": "Email", "text": "Buy milk"}}]}},
                {"agent": {"actions": [{"done": {"text": "NO, nothing typed"}}]}},
            ],
        }
    )


@pytest.mark.e2e
async def test_the_webvoyager_agents_typed_space_is_stopped_by_its_guard_as_seleniums_is(
    site: str, shared_browser
) -> None:
    """WebVoyager types with Selenium, whose keydown carries the character: its guard against the
    space key (set before typing, text, textarea and search boxes spared; A webvoyager/run.py
    l.410-417) prevents that keydown, so a space typed into an email field is not typed. browser-use
    sends the character in an event of its own after the keydown, which the guard cannot stop."""
    upstream = {**profile_rules("upstream").gui_agent(), **NO_WAITS, "click_before_typing_s": 0.0}
    upstream["enter_after_typing_s"] = None
    answers = await answers_with_and_without(
        "webvoyager_actions",
        types_into_an_email_field(),
        shared_browser,
        url=site + "email.html",
        task="Sign up.",
        **upstream,
    )
    assert answers == {True: ("YES, no space", [2, 0]), False: ("NO, a space", [2, 1])}, answers
