"""The upstream GUI agent's rules (WebVoyager's run.py, as WebGen-Agent and WebGen-Bench run it):
one action per iteration, the latest 3 screenshots in every request, and at the 15th iteration an
answer forced from an agent that never answers by itself. Real Chromium, a static page, a scripted VLM.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gui_pages import NO_WAITS, scripted_agent, serve_pages
from webgen_agent.apps.bench import prompts as bench_prompts
from webgen_agent.apps.bench.evaluate import webgen_bench_agent, webgen_bench_verdict
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.profiles import profile_rules
from webgen_agent.nodes.gui_testing import SCREENSHOT_MARKER, upstream_trajectory
from webgen_agent.nodes.profile import prompts_for
from webgen_agent.tools.gui_agent import GuiAgentSettings, run_gui_agent
from webgen_agent.tools.gui_agent.patches import PAGE_NOT_SHOWN
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
FORCED = "used up the interactions"


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serve_pages({"index.html": PAGE, "late.html": LATE_PAGE}) as base:
        yield base + "index.html"


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
