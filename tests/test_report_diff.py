"""The report's diffs: the same hunks as ``diff -u`` (difflib), each line highlighted in its file's language."""

from __future__ import annotations

import difflib
import html
import re

from webgen_agent.apps.report.diff import MAX_DIFF_LINES, file_diff

BEFORE = """import React from 'react'
/* a comment
   over two lines */
export default function App() {
  return <main><h1>Hello</h1></main>
}
""" + "".join(f"const line{n} = {n}\n" for n in range(20))
AFTER = BEFORE.replace("Hello", "Hi & bye").replace("const line7 = 7\n", "") + "const tail = `two\nlines`\n"


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_the_diff_has_difflibs_hunks_and_lines() -> None:
    diff = file_diff("src/App.jsx", BEFORE, AFTER)
    expected = list(difflib.unified_diff(BEFORE.splitlines(), AFTER.splitlines(), lineterm=""))[2:]
    marks = {"hunk": "", "context": " ", "added": "+", "removed": "-"}
    assert [marks[line.kind] + _plain(line.html) for line in diff.lines] == expected
    assert (diff.added, diff.removed, diff.left_out) == (3, 2, 0)


def test_lines_are_highlighted_in_the_files_language_and_escaped() -> None:
    diff = file_diff("src/App.jsx", BEFORE, AFTER)
    added = [line.html for line in diff.lines if line.kind == "added"]
    assert any('<span class="nt">h1</span>' in line and '<span class="o">&amp;</span>' in line for line in added)
    # A token spanning lines keeps its colour on each: the comment's second line is still a comment.
    whole = file_diff("src/App.jsx", "", BEFORE)
    assert whole.lines[3].html.startswith('<span class="cm">')


def test_an_added_file_a_deleted_file_and_a_huge_one() -> None:
    assert [line.kind for line in file_diff("a.txt", "", "x\ny\n").lines] == ["hunk", "added", "added"]
    assert [line.kind for line in file_diff("a.txt", "x\n", "").lines] == ["hunk", "removed"]
    huge = file_diff("big.json", "", "".join(f'"{n}"\n' for n in range(2 * MAX_DIFF_LINES)))
    assert len(huge.lines) == MAX_DIFF_LINES and huge.left_out == MAX_DIFF_LINES + 1
