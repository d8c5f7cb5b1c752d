"""The hostile-output corpus (tests/hostile_corpus.py) replayed through the scripted model server.

Each group is one real run: every coder turn answers with the next hostile reply, the sandbox,
the site runner and Chromium handle it, and the run goes on to the next one. Every case then
asserts the message the coder got for it, and every group asserts that nothing escaped: no file
outside the run, the planted secret nowhere in what the run stored, no hang, no crash.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import pids_limit_enforced
from tests.hostile_corpus import CACHE_POISON, FILES, HONEST_REPLY, NPM, PAGES, PLANTED, SERVER_FILL, Case
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import SandboxSettings
from webgen_agent.graph.api import run_requirement
from webgen_agent.tools.sandbox import sandbox_problem
from webgen_agent.tools.site import free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

SECRET_VALUE = f"CORPUS-SECRET-{uuid.uuid4().hex}"
ESCAPE_MARK = "webgen-corpus-"
JUDGE = {"description": "A page.", "score": 2, "suggestions": ["Improve it."]}


@dataclass
class Replay:
    cases: list[Case]
    state: dict[str, Any]
    store: BlobStore
    base: Path
    status: str
    seconds: float

    def step(self, name: str) -> dict[str, Any]:
        return self.state["steps"][self._index(name)]

    def feedback(self, name: str) -> str:
        """The last user message of the coder turn after this case: what the model was told."""
        following = self.state["steps"][self._index(name) + 1]
        return self.store.get_text(self.store.get_json(following["prompt"])[-1]["hash"])

    def files(self, name: str) -> dict[str, str]:
        step = self.step(name)
        return self.store.manifest(step["files"]) if step.get("files") else {}

    def page_text(self, name: str) -> str:
        step = self.step(name)
        return self.store.get_json(step["page"])["visible_text"] if step.get("page") else ""

    def _index(self, name: str) -> int:
        return next(i for i, case in enumerate(self.cases) if case.name == name)


@pytest.fixture(scope="module")
def secret():
    path = Path.home() / f".{ESCAPE_MARK}secret-{uuid.uuid4().hex[:8]}"
    path.write_text(SECRET_VALUE)
    yield path
    path.unlink(missing_ok=True)


def _escapes() -> set[Path]:
    found: set[Path] = set()
    for folder in (Path("/tmp"), Path("/var/tmp"), Path.home(), Path.home() / "Downloads"):
        if folder.is_dir():
            found |= {p for p in folder.iterdir() if p.name.startswith(ESCAPE_MARK) and "secret" not in p.name}
    return found


async def replay(
    cases: list[Case],
    base: Path,
    secret: Path,
    *,
    judge: dict[str, Any] = JUDGE,
    agent_rules: Sequence[dict[str, Any]] = (),
    **context: Any,
) -> Replay:
    port = free_port()
    other = f"http://127.0.0.1:{port}/v1/models"  # another local service: the model server itself
    rules: list[dict[str, Any]] = [
        {
            "model": "scripted-coder",
            "turn": i,
            "content": c.reply.replace("{secret}", str(secret)).replace("{other}", other),
        }
        for i, c in enumerate(cases)
    ]
    rules += [
        {"model": "scripted-coder", "content": "finish"},
        {"model": "scripted-vlm", "schema": "ScreenshotJudgement", "json": judge},
        {"model": "scripted-feedback", "schema": "Critique", "json": {"checks": [], "diagnosis": "-", "plan": ["-"]}},
        {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Look at the page."}},
        *(json.loads(json.dumps(r).replace("{other}", other)) for r in agent_rules),
    ]
    scenario = Scenario.model_validate({"name": "hostile-corpus", "rules": rules})
    before = _escapes()
    started = time.monotonic()
    with ScriptedServer(scenario, port=port) as server:
        # Every case is played in turn: no backtracking, and no loop governor stopping a run whose
        # scores never improve (they are hostile replies, not attempts at the site).
        run_context = scripted_context(
            server.base_url,
            max_steps=len(cases) + 1,
            allow_shell=True,
            backtrack=False,
            stall_steps=0,
            **context,
        )
        result = await asyncio.wait_for(
            run_requirement(
                "A page.", context=run_context, run_id="corpus", out_dir=base / "out", db_path=base / "webgen.db"
            ),
            timeout=900,
        )
    seconds = time.monotonic() - started
    state = await final_state(base / "webgen.db", "corpus")
    await asyncio.to_thread(_assert_nothing_leaked, base, secret, before)
    return Replay(list(cases), state, BlobStore(base / "webgen.db"), base, result.status, seconds)


def _assert_nothing_leaked(base: Path, secret: Path, escapes_before: Any) -> None:
    """No file appeared outside the sandbox, the secret is untouched and no stored file holds it."""
    assert _escapes() == escapes_before, "a file escaped the sandbox"
    assert secret.read_text() == SECRET_VALUE
    for stored in base.rglob("*"):
        if stored.is_file() and not stored.is_symlink() and stored.stat().st_size < 200_000_000:
            assert SECRET_VALUE.encode() not in stored.read_bytes(), f"the secret reached {stored}"


@pytest.fixture(scope="module")
async def files_run(tmp_path_factory, chromium_path, secret):
    cases = [c for c in FILES if pids_limit_enforced() or "fork-bomb" not in c.name]
    return await replay(
        cases,
        tmp_path_factory.mktemp("corpus-files"),
        secret,
        install_timeout_s=5.0,
        page_timeout_s=8.0,
        sandbox=SandboxSettings(workspace_mb=32),
    )


@pytest.fixture(scope="module")
async def npm_run(tmp_path_factory, chromium_path, secret):
    cases = [c for c in NPM if pids_limit_enforced() or "fork-bomb" not in c.name]
    return await replay(
        cases,
        tmp_path_factory.mktemp("corpus-npm"),
        secret,
        install_timeout_s=60.0,
        start_timeout_s=6.0,
        page_timeout_s=8.0,
        sandbox=SandboxSettings(workspace_mb=32),
    )


@pytest.fixture(scope="module")
async def pages_run(tmp_path_factory, chromium_path, secret):
    return await replay(PAGES, tmp_path_factory.mktemp("corpus-pages"), secret, page_timeout_s=6.0)


# What the GUI agent tries on every hostile page: leave for a local file, then for another local
# service (the model server itself, reachable here, unlike the internet).
GUI_AGENT = [
    {"model": "scripted-vlm", "turn": 0, "agent": {"actions": [{"navigate": {"url": "file:///etc/passwd"}}]}},
    {"model": "scripted-vlm", "turn": 1, "agent": {"actions": [{"navigate": {"url": "{other}"}}]}},
    {"model": "scripted-vlm", "agent": {"actions": [{"done": {"text": "NO - nothing works.", "success": False}}]}},
    {
        "model": "scripted-feedback",
        "schema": "GuiVerdict",
        "json": {"passed": False, "score": 2, "suggestions": ["Make it work."]},
    },
]
# The hostile pages whose capture succeeds (one that never yields or navigates away fails it: no GUI test).
GUI_PAGES = [
    c for c in PAGES if c.name not in ("a page that loops forever", "a page that navigates to an external host")
]


@pytest.fixture(scope="module")
async def gui_run(tmp_path_factory, chromium_path, secret):
    """The hostile pages judged good-looking, so that a GUI agent tests each: recorded what it was shown."""
    seen: list[str] = []
    original = scripted_server.request_facts

    def recording(body: dict[str, Any]):
        facts = original(body)
        if facts.model == "scripted-vlm":
            seen.append(facts.all_text)
        return facts

    patch = pytest.MonkeyPatch()
    patch.setattr(scripted_server, "request_facts", recording)
    try:
        run = await replay(
            GUI_PAGES,
            tmp_path_factory.mktemp("corpus-gui"),
            secret,
            judge={**JUDGE, "score": 5},
            agent_rules=GUI_AGENT,
            page_timeout_s=6.0,
            gui_max_actions=3,
            gui_timeout_s=60.0,
        )
    finally:
        patch.undo()
    return run, seen


def test_the_corpus_has_at_least_30_replies():
    assert len(FILES) + len(NPM) + len(PAGES) >= 30


def _check_messages(run: Replay) -> None:
    assert run.status == "finished"
    for case in run.cases:
        told = run.feedback(case.name)
        for phrase in case.expect:
            assert phrase in told, f"{case.name}: the coder was not told {phrase!r}:\n{told[:3000]}"


# -- files -------------------------------------------------------------------------------------


def test_file_and_shell_replies_end_in_clear_messages(files_run):
    _check_messages(files_run)


def test_symlinks_fifos_and_devices_are_never_read_or_written_through(files_run):
    made = files_run.files("symlinks, a device link and a FIFO made by a shell action")
    assert not {"rootlink", "leak.txt", "zero.js", "pipe.txt"} & set(made)
    assert not Path("/tmp/webgen-corpus-through.txt").exists()
    assert "hard.txt" not in files_run.files("hardlinks to files outside the workspace")
    told = files_run.feedback("hardlinks to files outside the workspace")
    assert "Invalid cross-device link" in told or "No such file" in told


def test_refused_paths_leave_nothing_behind(files_run):
    written = files_run.files("'..' in every position")
    assert set(written) == {"index.html"}
    assert not any("\u2024" in p or "\uff0f" in p for p in files_run.files("unicode look-alike separators and dots"))
    assert "big.txt" not in files_run.files("a 10 MB file")
    assert "nul.txt" not in files_run.files("NUL bytes in a path and in content")


def test_runaway_replies_and_commands_are_bounded(files_run):
    for name in ("a shell action that loops forever", "a shell action that fork-bombs"):
        if any(c.name == name for c in files_run.cases):
            assert sum(files_run.step(name)["timings"].values()) < 120, name
    prose = files_run.step("a 10 MB reply of prose")
    assert prose["action"] == "malformed"
    assert files_run.seconds < 600


# -- npm ---------------------------------------------------------------------------------------


def test_npm_replies_end_in_clear_messages(npm_run):
    _check_messages(npm_run)


def test_install_scripts_run_confined(npm_run):
    step = npm_run.step("postinstall writes outside and reads a secret")
    assert step["execution"]["ok"], step["execution"]
    # The install runs after the step's snapshot: the next step's files hold what it wrote.
    stolen = npm_run.files("preinstall fails").get("stolen.txt")
    assert stolen is not None and npm_run.store.get_text(stolen) == "unreadable"


def test_dev_servers_that_misbehave(npm_run):
    elsewhere = npm_run.step("a dev server on another port that says so")["execution"]
    assert elsewhere["ok"] and "Elsewhere" in npm_run.page_text("a dev server on another port that says so")
    assert npm_run.step("a dev server on 0.0.0.0")["execution"]["ok"]
    fake = npm_run.step("a fake Local: URL pointing at another service")["execution"]
    assert not fake["ok"] and fake["stage"] == "start"
    full = npm_run.step("postinstall fills the workspace past its size cap")["execution"]
    assert (
        not full["ok"]
        and full["stage"] == "install"
        and not npm_run.page_text("postinstall fills the workspace past its size cap")
    )
    for name in ("a dev script that loops forever", "a dev script that never listens"):
        assert npm_run.step(name)["execution"]["stage"] == "start"
        assert sum(npm_run.step(name)["timings"].values()) < 120


# -- pages -------------------------------------------------------------------------------------


def test_page_replies_end_in_clear_messages(pages_run):
    _check_messages(pages_run)


def test_pages_stay_on_their_own_origin(pages_run):
    assert "root:" not in pages_run.page_text("a page that navigates to file://")
    assert "Example Domain" not in pages_run.page_text("a page that navigates to an external host")
    for name in ("endless dialogs", "endless popups", "endless downloads"):
        step = pages_run.step(name)
        assert step.get("screenshot"), name  # the capture finished with a picture despite the page
        assert sum(step["timings"].values()) < 120, name
    assert pages_run.step("a page that loops forever")["execution"]["stage"] == "render"


async def test_gui_agents_on_hostile_pages_finish_and_stay_on_the_site(gui_run):
    run, seen = gui_run
    assert run.status == "finished"
    for case in run.cases:
        step = run.step(case.name)
        assert step.get("gui_run"), f"{case.name}: no GUI test ran"
        record = run.store.get_json(step["gui_run"])
        names = [action["name"] for action in record["actions"]]
        assert names[:2] == ["navigate", "navigate"], (case.name, record)
        assert record["seconds"] < 60, case.name  # dialogs, popups and downloads did not stall the agent
        assert all(action["error"] for action in record["actions"][:2]), (case.name, record["actions"])
        text = json.dumps(record)
        assert "root:x:0:0" not in text and "owned_by" not in text, case.name
    # Nothing of another origin reached the model: the agent's page states hold neither page.
    assert seen and not any("root:x:0:0" in t or "owned_by" in t for t in seen)


# -- the shared dependency cache -----------------------------------------------------------------


@pytest.fixture(scope="module")
async def poisoned_cache(tmp_path_factory, chromium_path, secret):
    """The two-step attack in one run, then an unrelated honest run, both on one fresh dependency cache."""
    cache = tmp_path_factory.mktemp("corpus-deps-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("WEBGEN_DEPS_CACHE", str(cache))
    try:
        attack = await replay(
            CACHE_POISON,
            tmp_path_factory.mktemp("corpus-poison"),
            secret,
            install_timeout_s=120.0,
            start_timeout_s=20.0,
        )
        honest = await replay(
            [Case("an honest run", HONEST_REPLY, ())],
            tmp_path_factory.mktemp("corpus-honest"),
            secret,
            install_timeout_s=120.0,
            start_timeout_s=20.0,
        )
    finally:
        patch.undo()
    return attack, honest, cache


async def test_a_tree_rewritten_by_an_earlier_steps_postinstall_never_reaches_the_shared_cache(poisoned_cache):
    attack, honest, cache = poisoned_cache
    assert attack.status == "finished" and honest.status == "finished"
    poisoned = attack.step("a postinstall rewrites react and deletes the lockfile")["execution"]
    assert poisoned["ok"] and not poisoned["install_cached"], poisoned  # its scripts ran, in its own tree
    over = attack.step("the honest project, written over it")["execution"]
    assert over["ok"] and over["install_ran"] and not over["install_cached"], over
    stored = [p for p in cache.glob("*/node_modules/react/index.js")]
    assert stored, "the honest tree was not shared"
    assert not any(PLANTED in p.read_text() for p in stored)
    # The unrelated honest run is served from the shared cache (no npm install), with react as published.
    served = honest.step("an honest run")["execution"]
    assert served["ok"] and served["install_cached"], served
    restored = list((honest.base / "out").rglob("node_modules/react/index.js"))
    assert restored and not any(PLANTED in p.read_text() for p in restored)


# -- a dev server filling the workspace while it runs ----------------------------------------------


@pytest.fixture(scope="module")
async def server_fill_run(tmp_path_factory, chromium_path, secret):
    return await replay(
        SERVER_FILL,
        tmp_path_factory.mktemp("corpus-server-fill"),
        secret,
        start_timeout_s=10.0,
        page_timeout_s=8.0,
        sandbox=SandboxSettings(workspace_mb=32),
    )


def test_a_dev_server_filling_the_workspace_is_stopped_as_it_writes_and_nothing_of_it_is_kept(server_fill_run):
    # Pins behaviour that holds: the workspace guard kills the server while it writes (whether the
    # capture got its page first depends on timing), the next step is told, and no file it wrote is recorded.
    _check_messages(server_fill_run)
    for case in server_fill_run.cases:
        assert not [name for name in server_fill_run.files(case.name) if name.startswith("fill")], case.name
