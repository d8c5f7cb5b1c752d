"""The Executor on its own (tests/node_harness.py): the coder's files written, the site run and captured."""

from __future__ import annotations

import pytest

from webgen_agent.nodes.executor import executor

PAGE = "<!doctype html><html><head><title>Notes</title></head><body><h1>My notes</h1><p>Buy milk</p></body></html>"


def reply(*files: tuple[str, str], shell: str = "") -> str:
    actions = "".join(f'<boltAction type="file" filePath="{path}">{text}</boltAction>\n' for path, text in files)
    if shell:
        actions += f'<boltAction type="shell">{shell}</boltAction>\n'
    return f'<boltArtifact id="a" title="a">\n{actions}</boltArtifact>'


def edit_state(harness, text: str, **fields):
    step = harness.step(0, completion=harness.store.put_text(text))
    return harness.state(steps=[step], current=0, **fields)


async def test_the_edit_is_written_refusals_reported_and_a_site_with_nothing_to_run_errors(node_harness):
    text = reply(("notes.txt", "a note"), ("../escape.txt", "out"), shell="touch ran.txt")
    run = await node_harness.run(executor, edit_state(node_harness, text, consecutive_errors=1))
    (patch,) = run.update["steps"]
    workspace = node_harness.workspace
    assert (workspace / "notes.txt").read_text() == "a note"
    assert not (node_harness.out_dir / "escape.txt").exists() and not (workspace / "ran.txt").exists()
    problems = "\n".join(patch["problems"])
    assert "../escape.txt" in problems and "Shell action not run" in problems
    assert set(node_harness.store.manifest(patch["files"])) == {"notes.txt"} and patch["changed"] == ["notes.txt"]
    assert run.update["files"] == patch["files"] and run.update["edit_step"] == 0
    execution = patch["execution"]
    assert not execution["ok"] and execution["stage"] == "start" and "nothing to run" in execution["error"]
    assert patch["errored"] and run.update["consecutive_errors"] == 2
    assert "screenshot" not in patch
    assert run.message.startswith("start: The project has no package.json or index.html")


async def test_the_next_edit_is_written_over_its_parents_files(node_harness):
    first = await node_harness.run(executor, edit_state(node_harness, reply(("a.txt", "1"), ("b.txt", "1"))))
    files = first.update["files"]
    second = node_harness.step(1, completion=node_harness.store.put_text(reply(("b.txt", "2"))), parent=0)
    state = {**first.state, "steps": [*first.state["steps"], second], "current": 1}
    run = await node_harness.run(executor, state)
    (patch,) = run.update["steps"]
    assert patch["base_files"] == files and patch["changed"] == ["b.txt"]
    assert node_harness.store.get_text(node_harness.store.manifest(patch["files"])["a.txt"]) == "1"


@pytest.mark.e2e
async def test_a_static_site_is_served_and_captured(browser_node_harness):
    harness = browser_node_harness
    run = await harness.run(executor, edit_state(harness, reply(("index.html", PAGE)), consecutive_errors=3))
    (patch,) = run.update["steps"]
    execution = patch["execution"]
    assert execution["ok"] and execution["stage"] == "ok" and execution["url"], execution["error"]
    assert not patch["errored"]
    assert run.update["consecutive_errors"] == 3  # the screenshot judge settles the step
    page = harness.store.get_json(patch["page"])
    assert page["title"] == "Notes" and "Buy milk" in page["visible_text"] and not page["page_errors"]
    assert harness.store.get(patch["screenshot"]).startswith(b"\x89PNG")
    assert patch["page_count"] == 1
    assert run.message == "ok: ok"


# Serves index.html; a request for /grow.js holds 1 GB before it answers, one for /grow 8 MB more every 20 ms.
GROWING_SERVER = (
    "const fs = require('fs'); const keep = [];"
    "require('http').createServer((q, s) => {"
    " if (q.url === '/grow.js') for (let i = 0; i < 128; i++) keep.push(Buffer.alloc(8 << 20, 1));"
    " if (q.url === '/grow') setInterval(() => keep.push(Buffer.alloc(8 << 20, 1)), 20);"
    " s.setHeader('content-type', q.url.endsWith('.js') ? 'text/javascript' : 'text/html');"
    " s.end(q.url.endsWith('.js') ? '' : fs.readFileSync('index.html'));"
    "}).listen(Number(process.env.PORT), '127.0.0.1');"
)
GROWING_PACKAGE = '{"name": "grower", "private": true, "scripts": {"dev": "node server.js"}}'


def memory_limited():
    from webgen_agent.core.context import SandboxSettings
    from webgen_agent.tools.limits import cgroup_parent

    if cgroup_parent("memory") is None:
        pytest.skip("no memory cgroup here (limit_warnings says so in the run)")
    return SandboxSettings(sandbox_memory_mb=128)


@pytest.mark.e2e
async def test_a_dev_server_killed_by_its_memory_limit_under_the_capture_is_the_steps_error(browser_node_harness):
    harness = browser_node_harness
    page = '<!doctype html><html><head><script src="/grow.js"></script></head><body><h1>Hi</h1></body></html>'
    files = (("package.json", GROWING_PACKAGE), ("server.js", GROWING_SERVER), ("index.html", page))
    run = await harness.run(executor, edit_state(harness, reply(*files)), sandbox=memory_limited())
    (patch,) = run.update["steps"]
    execution = patch["execution"]
    assert not execution["ok"] and execution["stage"] == "start" and patch["errored"]
    assert "memory limit" in execution["error"] and "128 MB" in execution["error"], execution["error"]


@pytest.mark.e2e
async def test_a_dev_server_killed_by_its_memory_limit_after_its_step_is_told_to_the_next(browser_node_harness):
    import httpx

    from tests.helpers import eventually

    harness = browser_node_harness
    settings = memory_limited()
    files = (("package.json", GROWING_PACKAGE), ("server.js", GROWING_SERVER), ("index.html", PAGE))
    first = await harness.run(executor, edit_state(harness, reply(*files)), sandbox=settings)
    url = first.update["steps"][0]["execution"]["url"]
    assert first.update["steps"][0]["execution"]["ok"] and url
    async with httpx.AsyncClient() as client:  # as a GUI test's page might
        await client.get(url + "grow", timeout=30)

    def gone() -> bool:
        try:
            httpx.get(url, timeout=2)
        except httpx.HTTPError:
            return True
        return False

    await eventually(gone, timeout_s=60, what="the server killed at its memory limit")
    second = harness.step(1, completion=harness.store.put_text(reply(("notes.txt", "n"))), parent=0)
    state = {**first.state, "steps": [*first.state["steps"], second], "current": 1}
    run = await harness.run(executor, state, sandbox=settings)
    (patch,) = run.update["steps"]
    assert patch["execution"]["ok"], patch["execution"]["error"]  # started again
    told = "\n".join(patch["problems"])
    assert "memory limit" in told and "128 MB" in told and "last step" in told, told
