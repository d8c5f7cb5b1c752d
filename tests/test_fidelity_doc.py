"""docs/fidelity.md stays honest: every test it names exists in the file it is named by, and the
counts at its end are the counts of the marks in its rule rows."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fidelity.md"
# The letters the page's legend gives test files.
LETTERS = {
    "F": "tests/test_fidelity.py",
    "G": "tests/test_gui_forced_answer.py",
    "V": "tests/test_gui_webvoyager_actions.py",
    "W": "tests/test_bench.py",
    "R": "tests/test_fidelity_rules.py",
    "S": "tests/test_upstream_steps.py",
    "P": "tests/test_prompts_from.py",
    "U": "tests/test_upstream_pools.py",
}
# A letter, a test file or a test name, in the order they appear in a cell or paragraph.
TOKEN = re.compile(r"\b([FGVWRSPU]) (?=`test_|\()|`(tests/[\w/]+\.py)`|`(test_\w+)`")
MARK = re.compile(r"\| \*\*(exact|partly|differs)\*\*: ")


@functools.cache
def defined_tests(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def rule_rows() -> list[str]:
    """The rule tables' rows: the tables before the section on prompts from a checkout."""
    rules = DOC.read_text().split("## Prompts from your checkout")[0]
    return [row for row in rules.splitlines() if row.startswith("| ") and not row.startswith("| rule |")]


def citing_parts() -> list[str]:
    """Each table cell and each paragraph: a letter or file named in one applies to the names after it there."""
    text = DOC.read_text()
    cells = [cell for row in text.splitlines() if row.startswith("| ") for cell in row.split(" | ")]
    return cells + [part for part in text.split("\n\n") if not part.startswith("| ")]


def test_every_test_the_page_names_exists_where_it_is_named():
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")}
    missing = []
    for part in citing_parts():
        where: str | None = None
        for letter, path, name in TOKEN.findall(part):
            if letter or path:
                where = LETTERS[letter] if letter else path
                assert where in files, f"{where}, named in docs/fidelity.md, does not exist"
            elif not any(name in defined_tests(f) for f in ([where] if where else sorted(files))):
                missing.append(f"{name} (in {where or 'any test file'}): {part[:70]}")
    assert not missing, "\n".join(missing)


def test_every_rule_row_says_how_close_it_is_and_the_counts_add_up():
    counts = {"exact": 0, "partly": 0, "differs": 0}
    for row in rule_rows():
        marks = MARK.findall(row)
        assert len(marks) == 1, f"one mark expected: {row[:80]}"
        counts[marks[0]] += 1
    total = sum(counts.values())
    stated = f"{total} rules: {counts['exact']} exact, {counts['partly']} partly, {counts['differs']} differ"
    assert f"**{stated}**" in DOC.read_text()
    assert stated in (ROOT / "README.md").read_text()  # the README quotes the counts
