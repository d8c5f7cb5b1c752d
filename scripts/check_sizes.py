"""No module over 500 lines and no function over 100, in the package, its tests and benchmarks.

Hand-written: ruff counts statements (PLR0915), not lines, and pylint's module-length check alone
would not be worth a second linter.
"""

from __future__ import annotations

import ast
import subprocess
import sys

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100


def oversized(path: str) -> list[str]:
    source = open(path, encoding="utf-8").read()
    found = []
    if (lines := source.count("\n")) > MAX_MODULE_LINES:
        found.append(f"{path}: {lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{path}:{node.lineno}: {node.name} is {length} lines (at most {MAX_FUNCTION_LINES})")
    return found


def main() -> int:
    tracked = subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True, check=True).stdout.split()
    problems = [problem for path in tracked for problem in oversized(path)]
    print("\n".join(problems) or f"sizes: {len(tracked)} modules within {MAX_MODULE_LINES} lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
