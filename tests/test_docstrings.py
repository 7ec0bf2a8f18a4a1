"""Docstrings say what and why in at most 15 lines (Issue 28).

The mathematics and the literature behind a metric live on its page under ``docs/metrics/``; a
docstring names the page instead of repeating it. The count is of source lines, from the opening
quotes to the closing ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"
MAX_LINES = 15


def _long_docstrings(path: Path) -> list[str]:
    """``file:line (n lines)`` for each module, class or function docstring over the limit."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if not (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            continue
        lines = (first.end_lineno or first.lineno) - first.lineno + 1
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(HARNESS.parent)}:{first.lineno} ({lines} lines)")
    return found


def test_no_docstring_is_over_15_lines() -> None:
    modules = sorted(HARNESS.rglob("*.py"))
    assert modules
    too_long = [entry for path in modules for entry in _long_docstrings(path)]
    assert not too_long, "docstrings over 15 lines:\n" + "\n".join(too_long)
