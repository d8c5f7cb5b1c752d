"""The upstream profile's execution rules against references ported from WebGen-Agent's code.

Each ``reference_*`` function below reproduces, in a few lines, what the upstream source does
(WebGen-Agent ``src/agent/webgen_agent.py``, ``src/utils/execute_for_feedback.py``; WebGen-RL
``verl/workers/agentic/webgen_agent/feedback/execute_for_feedback.py`` and ``file_management.py``);
the tests compare the project's behaviour with them, never with the project's own helpers:

- the rollout environment (``environment="rollout"``, what `rollout` runs) against the agent loop
  (an ordinary run): which control word wins, a control reply's files, a grade <= 1, the log clip,
  the observation cut;
- the restart after a judge reply with no JSON object, and backtracking, in one scripted run on a
  package.json + Vite site (the shared dependency cache: no npm install of its own);
- npm install with no retry (real npm, a peer-dependency conflict), no static site, and the capture's
  fixed wait after the load event (real Chromium).
"""

from __future__ import annotations

import asyncio
import functools
import html
import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VITE_TEMPLATE_FILES
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.rollout.service import rollout_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import SandboxSettings
from webgen_agent.core.profiles import environment_rules, profile_rules
from webgen_agent.core.profiles.rules import Profile
from webgen_agent.core.state import Step
from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.routers import route_after_critic, route_after_judge
from webgen_agent.nodes.feedback import clipped_log, upstream_feedback
from webgen_agent.nodes.prompts import UPSTREAM_FEEDBACK
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.site import ExecutionResult, SiteRunner

INFERENCE = environment_rules("upstream", "inference")
ROLLOUT = environment_rules("upstream", "rollout")
VALIDATED = '<boltAction type="screenshot_validated"/>'
FINISH = '<boltAction type="finish"/>'


# ---- references: upstream's code, reduced to what each rule needs -------------------------------


def reference_agent_control(reply: str) -> str | None:
    """A `WebGenAgent.step`: finish is looked for first, then screenshot_validated; nothing is written."""
    if 'boltAction type="finish"' in reply or "boltAction type='finish'" in reply:
        return "finish"
    if 'boltAction type="screenshot_validated"' in reply or "boltAction type='screenshot_validated'" in reply:
        return "screenshot_validated"
    return None


def reference_rollout_turn(reply: str) -> tuple[str | None, bool, dict[str, str]]:
    """RL `create_workspace`: (control word, good format, files written from this turn).

    Every assistant turn's file actions are written, a control turn's too; then screenshot_validated
    is looked for first, then finish; a control turn over 400 characters or holding boltArtifact is
    badly formatted.
    """
    found = re.findall(r'<boltAction type="file" filePath="(.*?)">(.*?)</boltAction>', reply, flags=re.DOTALL)
    files = {path: html.unescape(body) for path, body in found}
    word = None
    if 'boltAction type="screenshot_validated"' in reply or "boltAction type='screenshot_validated'" in reply:
        word = "screenshot_validated"
    elif 'boltAction type="finish"' in reply or "boltAction type='finish'" in reply:
        word = "finish"
    good = word is None or not (len(reply) > 400 or "boltArtifact" in reply)
    return word, good, files


def reference_has_error(
    install_error: bool, start_error: bool, grade: int, description: dict[str, str], *, rollout: bool
) -> tuple[bool, list[str]]:
    """RL `get_feedback_single` (rollout) or the agent's `get_feedback`: (has_error, error stages)
    after a code edit whose screenshot was taken."""
    has_error, stages = False, []
    if install_error:
        has_error, stages = True, [*stages, "dependency installation"]
    if start_error:
        has_error, stages = True, [*stages, "service starting"]
    if rollout and grade <= 1:
        has_error = True
    if description.get("error_message"):
        has_error, stages = True, [*stages, "screenshot"]
    if not any(description.get(key) for key in ("error_message", "screenshot_description", "suggestions")):
        has_error, stages = True, [*stages, "screenshot description"]
    return has_error, stages


def reference_start_output(log: str, *, rollout: bool) -> str:
    """The start output both `execute_for_feedback` versions show (a log without port-in-use lines)."""
    lines = log.replace("\u0000", "").split("\n")
    if len(lines) > 500:
        lines = lines[:50] + ["......\n[Truncated]\n......"] + lines[-50:]
    output, suffix = "\n".join(lines), ""
    if len(output) > (10000 if rollout else 50000):
        output = output[:5000] + "\n......\n[Truncated]\n......\n" + output[-5000:]
        suffix = "\n\n...... [Output Too Long, Truncated]"
    return output.strip() + suffix


def reference_run(outcomes: list[tuple[str, int]], *, error_limit: int, restart_limit: int = 5) -> dict[str, Any]:
    """`WebGenAgent.run` over scripted step outcomes, ("edit" | "finish", grade) or ("raise", 0).

    Returns the restores (step about to run, the step restored or None for the requirement), the
    steps saved, the chosen step and whether the run ended on an exception.
    """
    nodes: dict[int, dict[str, Any]] = {}
    error_count, restart, restart_num, grade = 0, False, 0, 0
    restores: list[tuple[int, int | None]] = []
    errored = False

    def choose_best() -> tuple[int, bool]:
        good = [(i, n) for i, n in nodes.items() if n["grade"] >= 3 and not n["has_error"]]
        pool = good or list(nodes.items())
        return max(pool, key=lambda item: (item[1]["gui"], item[1]["grade"], item[0]))[0], bool(good)

    for i, (kind, step_grade) in enumerate(outcomes):
        if error_count >= error_limit or restart:
            best, valid = choose_best()
            restores.append((i, best if valid else None))
            grade = nodes[best]["grade"] if valid else 0
            error_count = 0  # a good node's error count (`get_error_count`), or a fresh start
        if kind == "raise":
            if restart_num < restart_limit:
                restart_num, restart = restart_num + 1, True
                continue
            errored = True
            break
        if kind == "edit":
            grade = step_grade
        has_error = grade <= 2  # `save_history`
        nodes[i] = {"grade": grade, "gui": 0, "has_error": has_error}
        error_count = error_count + 1 if has_error else 0
        if kind == "finish":
            break
    return {"restores": restores, "saved": sorted(nodes), "chosen": choose_best()[0], "errored": errored}


# ---- the rollout environment against the agent loop ----------------------------------------------


def artifact(*files: tuple[str, str]) -> str:
    actions = "".join(f'<boltAction type="file" filePath="{path}">{body}</boltAction>' for path, body in files)
    return f'<boltArtifact id="site" title="Site">{actions}</boltArtifact>'


REPLIES = [
    VALIDATED,
    FINISH,
    f"{FINISH} {VALIDATED}",
    f"{VALIDATED} then {FINISH}",
    f"I fixed the title. {artifact(('index.html', '<h1>Fixed</h1>'))} {VALIDATED}",
    f"{artifact(('src/App.jsx', 'export default () => null'))}\n{FINISH}",
    "<boltAction type='screenshot_validated'/>" + " I checked every part of the page again." * 12,
    artifact(("index.html", "<h1>Plain edit</h1>")),
    artifact(("src/App.jsx", "\nexport default () => null\n")),  # the body's first newline is written too
    f'<boltAction type="file" filePath="src/App.jsx">\nexport default () => null</boltAction>\n{VALIDATED}',
    '<boltArtifact id="a"><boltAction filePath="index.html" type="file"><h1>Other spelling</h1></boltAction></boltArtifact>',
]


@pytest.mark.parametrize("reply", REPLIES)
def test_the_control_word_and_a_control_replys_files_follow_each_environment(reply):
    loop, rollout = parse_reply(reply, INFERENCE.replies), parse_reply(reply, ROLLOUT.replies)
    assert (loop.kind if loop.kind != "edit" else None) == reference_agent_control(reply)
    if loop.kind != "edit":
        assert loop.files == []  # the agent loop writes no file of a control reply
    word, good, files = reference_rollout_turn(reply)
    assert (rollout.kind if rollout.kind != "edit" else None) == word
    assert {f.path: f.content for f in rollout.files} == files
    assert rollout.format_ok == good


def edit_step(grade: int, **fields: Any) -> Step:
    step: dict[str, Any] = {
        "index": 0,
        "action": "edit",
        "tests_step": None,
        "screenshot": "png-hash",
        "screenshot_score": grade,
        "gui_score": 0,
        "gui_passed": None,
        "execution": {"install_error": False, "start_error": False},
        "description": "A heading on a white page.",
        "suggestions": [],
        "visible_error": "",
        **fields,
    }
    return step  # type: ignore[return-value]


@pytest.mark.parametrize("grade", [0, 1, 2, 3])
@pytest.mark.parametrize("environment", [INFERENCE, ROLLOUT])
def test_a_low_grade_is_an_error_with_no_stage_in_rollouts_only(grade, environment):
    text = upstream_feedback("Build a page.", edit_step(grade), None, {}, environment)
    description = {"screenshot_description": "A heading on a white page."}
    has_error, stages = reference_has_error(False, False, grade, description, rollout=environment.name == "rollout")
    asked = UPSTREAM_FEEDBACK["ask_validated"] in text
    told_to_fix = UPSTREAM_FEEDBACK["fix"].format(stages=", ".join(stages)) in text
    assert (told_to_fix, asked) == (has_error, not has_error)


@pytest.mark.parametrize("environment", [INFERENCE, ROLLOUT])
@pytest.mark.parametrize("size", [9_000, 20_000, 60_000])
def test_the_start_log_is_clipped_where_each_environment_clips_it(environment, size):
    log = "\n".join(f"vite line {n}: " + "x" * 40 for n in range(size // 55))
    expected = reference_start_output(log, rollout=environment.name == "rollout")
    assert clipped_log(log, whole_up_to=environment.start_log_chars) == expected


def test_rollout_runs_in_the_rollout_environment():
    context = scripted_context("http://127.0.0.1:9/v1", profile="upstream")
    assert context.environment == "inference"
    assert rollout_context(context).environment == "rollout"


def test_a_rollouts_coder_is_sampled_up_to_the_trainers_response_budget():
    """WebGen-RL's sampler stops a reply at max_response_length (run script: 9,000 tokens); the
    trainer's over-long rule then reads that reply, so a rollout asks for no more."""
    upstream = scripted_context("http://127.0.0.1:9/v1", profile="upstream")
    assert upstream.coder.max_tokens is None  # a run is not capped
    assert rollout_context(upstream).coder.max_tokens == 9_000
    smaller = upstream.model_copy(update={"coder": upstream.coder.model_copy(update={"max_tokens": 4_000})})
    assert rollout_context(smaller).coder.max_tokens == 4_000
    default = scripted_context("http://127.0.0.1:9/v1", profile="default")
    assert rollout_context(default).coder.max_tokens is None  # no response budget in the default profile


# ---- restart after an exception, and backtracking, in one scripted run --------------------------

REQUIREMENT = "Build a page that greets the visitor."


def vite_site(title: str) -> str:
    """A site upstream can run: the test template's package.json (served by the shared dependency
    cache) and an index.html; no vite.config.js, so the profile writes its default one."""
    page = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
    return artifact(("package.json", VITE_TEMPLATE_FILES["package.json"]), ("index.html", page))


def coder(turn: int, reply: str) -> dict[str, Any]:
    return {"model": "scripted-coder", "turn": turn, "contains": [REQUIREMENT], "times": 1, "content": reply}


def grade(value: int | None) -> dict[str, Any]:
    reply: dict[str, Any] = (
        {"json": {"analysis": f"Graded {value}.", "grade": value}}
        if value is not None
        else {"content": "The page looks fine to me, but I cannot put a number on it."}  # no JSON object
    )
    return {"model": "scripted-vlm", "schema": "ScreenshotGrade", "times": 1, **reply}


# (kind, grade) per step, as `reference_run` takes them: a good edit, an errored edit (error limit 1:
# backtrack), an edit whose grade reply has no JSON object (restart), a good edit (restart again: the
# flag is never reset), finish.
OUTCOMES = [("edit", 4), ("edit", 2), ("raise", 0), ("edit", 3), ("finish", 0)]
RESTART_RULES: list[dict[str, Any]] = [
    coder(0, vite_site("Hello (first)")),
    coder(1, vite_site("Hello (second)")),
    coder(1, vite_site("Hello (third)")),  # after the backtrack to step 0
    coder(1, vite_site("Hello (fourth)")),  # after the restart to step 0
    coder(1, FINISH),  # restarted again from step 0
    grade(4),
    grade(2),
    grade(None),
    grade(3),
    {
        "model": "scripted-vlm",
        "schema": "ScreenshotDescription",
        "json": {"is_error": False, "error_message": "", "screenshot_description": "A greeting.", "suggestions": ""},
    },
    {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Check the greeting."}},
]


@pytest.mark.e2e
async def test_a_judge_reply_without_json_restarts_every_later_step(tmp_path, chromium_path, vite_template):
    scenario = Scenario.model_validate({"name": "upstream-restart", "rules": RESTART_RULES})
    db = tmp_path / "webgen.db"
    with ScriptedServer(scenario) as server:
        context = scripted_context(
            server.base_url, profile="upstream", max_steps=8, error_limit=1, chromium=chromium_path
        )
        await run_requirement(REQUIREMENT, context=context, run_id="r", out_dir=tmp_path / "r", db_path=db)
    state, store = await final_state(db, "r"), BlobStore(db)
    steps = state["steps"]
    expected = reference_run(OUTCOMES, error_limit=1)
    assert [s["action"] for s in steps] == ["edit"] * 4 + ["finish"]
    assert [s["index"] for s in steps if s.get("exception")] == [2]
    restores = [
        (event["after_step"] + 1, event["target_step"])
        for event in state["events"]
        if event["kind"] in ("backtrack", "restart")
    ]
    assert restores == expected["restores"] == [(2, 0), (3, 0), (4, 0)]
    # Each restored step went on from step 0's own conversation: its prompt, its reply, its feedback.
    first = store.get_json(steps[0]["prompt"])
    for index in (2, 3, 4):
        sent = store.get_json(steps[index]["prompt"])
        assert sent[:-2] == first and sent[-2]["hash"] == steps[0]["completion"]
        assert store.get_text(sent[-1]["hash"]) == store.get_text(steps[0]["feedback"])
    assert state["chosen_step"] == expected["chosen"] == 4 and not expected["errored"]
    assert state["status"] == "finished"
    # The site upstream could run, with the vite.config.js the profile writes when a project has none.
    files = store.manifest(steps[0]["files"])
    assert {"package.json", "index.html", "vite.config.js"} <= set(files)
    assert all(s.get("screenshot") for s in steps[:4])


def test_the_run_ends_at_the_exception_after_the_fifth_restart():
    expected = reference_run([("edit", 4), *[("raise", 0)] * 6, ("edit", 4)], error_limit=5)
    assert expected["errored"] and expected["restores"][-1] == (6, 0)
    context = scripted_context("http://127.0.0.1:9/v1", profile="upstream")
    raised: dict[str, Any] = {"index": 1, "action": "edit", "exception": "no JSON object in the grade reply"}
    for restarts, route in [(1, "backtrack"), (5, "backtrack"), (6, "finalize")]:
        state: Any = {"current": 1, "steps": [{}, raised], "restarts": restarts, "consecutive_errors": 0}
        assert route_after_judge(state, context) == route
    calm: Any = {"current": 0, "steps": [{"index": 0, "action": "edit"}], "consecutive_errors": 0, "messages": [1]}
    assert route_after_critic(calm, context) == "refiner"
    assert route_after_critic({**calm, "restarts": 1}, context) == "backtrack"  # the flag is never reset
    # The rollout environment has no restart: WebGen-RL's batch fails on the exception instead.
    assert INFERENCE.restart_limit == 5 and ROLLOUT.restart_limit is None


# ---- install, static sites and the capture's wait -------------------------------------------------

PEER_CONFLICT = {
    "name": "peer-conflict",
    "private": True,
    "version": "0.0.0",
    # react-dom 16 asks for react ^16.14.0 as a peer: npm 7+ refuses the tree (ERESOLVE).
    "dependencies": {"react": "18.3.1", "react-dom": "16.14.0"},
    "scripts": {"dev": "vite"},
}


def reference_install_error(output: str) -> bool:
    """The agent's `execute_for_feedback`: "error" anywhere in the one `npm install`'s output."""
    return "error" in output.lower()


async def run_site_as(profile: Profile, workspace: Path, log_dir: Path, **settings: Any) -> ExecutionResult:
    """Install and start ``workspace`` once as ``profile``'s runs do (its install and site rules, as
    nodes/resources.py gives them to the runner), then stop it."""
    rules = profile_rules(profile)
    runner = SiteRunner(
        workspace,
        log_dir=log_dir,
        install_retries=rules.install_retries,
        quiet_install=rules.quiet_install,
        static_sites=rules.static_sites,
        **settings,
    )
    try:
        return await runner.ensure_running()
    finally:
        await runner.stop()


@pytest.mark.e2e
async def test_npm_install_runs_once_without_retries(tmp_path, deps_cache_dir):
    workspace = tmp_path / "site"
    workspace.mkdir()
    (workspace / "package.json").write_text(json.dumps(PEER_CONFLICT))
    (workspace / "index.html").write_text("<h1>Hi</h1>")
    result = await run_site_as("upstream", workspace, tmp_path / "logs", deps_cache_dir=deps_cache_dir)
    assert not result.ok and result.stage == "install" and "ERESOLVE" in result.install_log
    assert reference_install_error(result.install_log)
    assert len(list((tmp_path / "logs").glob("install-*.log"))) == 1  # one attempt: no --force, no --legacy-peer-deps
    assert "retried" not in (result.error or "")


@pytest.mark.e2e
@pytest.mark.parametrize("profile", ["upstream", "default"])
async def test_npm_warnings_reach_the_upstream_error_words(tmp_path, profile):
    """Upstream runs a plain `npm install` and calls the install failed when its output holds "error"
    anywhere, warnings included: a dependency named error-pages that wants another Node prints an
    EBADENGINE warning naming it, and npm exits 0. The upstream profile's install prints that
    warning (its error words then see it); the default one prints errors only."""
    workspace = tmp_path / "site"
    (workspace / "error-pages").mkdir(parents=True)
    (workspace / "error-pages" / "package.json").write_text(
        json.dumps({"name": "error-pages", "version": "1.0.0", "engines": {"node": ">=99"}})
    )
    (workspace / "package.json").write_text(
        json.dumps({"name": "site", "version": "1.0.0", "dependencies": {"error-pages": "file:./error-pages"}})
    )
    # A local package: nothing to fetch, nothing to confine.
    result = await run_site_as(profile, workspace, tmp_path / "logs", sandbox=SandboxSettings(enabled=False))
    assert (workspace / "node_modules" / "error-pages").exists()  # npm succeeded either way
    assert ("EBADENGINE" in result.install_log) == (profile == "upstream"), result.install_log
    assert reference_install_error(result.install_log) == (profile == "upstream")


async def test_a_site_without_package_json_does_not_run(tmp_path):
    (tmp_path / "index.html").write_text("<h1>Static</h1>")
    result = await run_site_as("upstream", tmp_path, tmp_path.parent / f"{tmp_path.name}-logs")
    assert (result.ok, result.stage, result.url) == (False, "install", None)
    assert reference_install_error(result.install_log)  # what npm prints without a package.json


DELAYED_PAGE = """<!doctype html><html><body><h1 id="state">Loading</h1>
<script>setTimeout(() => { document.getElementById('state').textContent = 'Ready'; }, 2000);</script>
</body></html>"""


@pytest.fixture
def delayed_page(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "index.html").write_text(DELAYED_PAGE)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# The agent's `take_screenshot`: driver.get (returns after the load event), then time.sleep(3).
UPSTREAM_SLEEP_S = 3


@pytest.mark.e2e
async def test_the_upstream_capture_waits_a_fixed_time_after_load(shared_browser, delayed_page):
    upstream = profile_rules("upstream").capture_wait_s
    assert upstream == UPSTREAM_SLEEP_S
    waited, settled = await asyncio.gather(
        shared_browser.capture(delayed_page, viewport=(1024, 768), wait_s=upstream),
        shared_browser.capture(delayed_page, viewport=(1024, 768), wait_s=profile_rules("default").capture_wait_s),
    )
    # A loading state a timer ends within the 3 s is captured done upstream; the default profile
    # captures the page as soon as its network is idle.
    assert "Ready" in waited.visible_text and waited.seconds >= UPSTREAM_SLEEP_S
    assert "Loading" in settled.visible_text


@pytest.mark.parametrize("environment", ["inference", "rollout"])
async def test_a_control_replys_files_are_written_before_the_gui_test_in_rollouts_only(node_harness, environment):
    from webgen_agent.nodes.gui_tester import gui_tester

    reply = f"{artifact(('notes.html', '<h1>Notes</h1>'))}\n{VALIDATED}"
    store = node_harness.store
    control = node_harness.step(1, action="screenshot_validated", tests_step=0, completion=store.put_text(reply))
    state = node_harness.state(
        steps=[node_harness.step(0), control], current=1, edit_step=0, test_instruction="Open the notes."
    )
    run = await node_harness.run(gui_tester, state, profile="upstream", environment=environment)
    written = reference_rollout_turn(reply)[2] if environment == "rollout" else {}
    files = store.manifest(run.update["files"]) if run.update.get("files") else {}
    assert set(written) <= set(files) and bool(files) == bool(written)
    if written:  # with the vite.config.js the profile writes, recorded on the control step
        assert "vite.config.js" in files and run.update["steps"][0]["files"] == run.update["files"]
