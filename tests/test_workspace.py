"""Model-written paths stay inside the workspace."""

import os

import pytest

from webgen_agent.tools.bolt import FileAction
from webgen_agent.tools.workspace import PathRefused, apply_files, confine


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "~/x", "C:\\x", "../x", "a/../../x", "src/../../x", "", "node_modules/x/index.js", ".git/config"],
)
def test_escaping_paths_are_refused(tmp_path, path):
    with pytest.raises(PathRefused):
        confine(tmp_path, path)


def test_writes_through_symlinks_are_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(outside, ws / "link")
    os.symlink(outside / "target.txt", ws / "file.txt")
    result = apply_files(
        ws,
        [
            FileAction(path="link/evil.js", content="x"),
            FileAction(path="file.txt", content="x"),
            FileAction(path="src/ok.js", content="ok"),
        ],
    )
    assert result.written == ["src/ok.js"]
    assert set(result.refused) == {"link/evil.js", "file.txt"}
    assert "symlink" in result.refused["link/evil.js"]
    assert list(outside.iterdir()) == []
    assert (ws / "src" / "ok.js").read_text() == "ok"


def test_refusals_are_reported_and_the_rest_written(tmp_path):
    result = apply_files(
        tmp_path, [FileAction(path="../escape.txt", content="x"), FileAction(path="./a/b.txt", content="y")]
    )
    assert result.written == ["a/b.txt"]
    assert "leave the project" in result.refused["../escape.txt"]
    assert not (tmp_path.parent / "escape.txt").exists()
