"""Import layering (Issue 28): packages import one way, and data code never imports the metrics.

Importing any ``harness.metrics`` module runs the package's ``__init__``, which registers every
metric and loads ``scipy.stats``; a fresh interpreter shows what ``import harness.data`` pulls in.
The package layering is the import-linter contracts in ``pyproject.toml``; few harness imports
are made inside functions, each with its reason beside it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest


def _modules_after(module: str) -> list[str]:
    code = (
        f"import json, sys, {module}; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('harness.metrics', 'scipy.stats')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    return list(json.loads(out.stdout))


@pytest.mark.parametrize(
    "module", ["harness.data", "harness.data.structure", "harness.data.scale_images"]
)
def test_data_imports_no_metric(module: str) -> None:
    assert _modules_after(module) == []


# -- the package layering (pyproject.toml, [tool.importlinter]) --------------------------------

HARNESS = Path(__file__).resolve().parents[1] / "harness"
#: Imports of harness modules inside functions, at most (each with its reason in a comment).
LAZY_IMPORTS_AT_MOST = 20


def test_import_contracts_hold() -> None:
    """The layers and forbidden contracts, over every import grimp finds (function-level ones
    too; TYPE_CHECKING blocks are left out): what `lint-imports` reports."""
    from importlinter.cli import lint_imports

    config = str(HARNESS.parent / "pyproject.toml")
    assert lint_imports(config_filename=config, no_cache=True, no_logo=True) == 0


def _function_level_imports() -> list[tuple[str, int, bool]]:
    """``(file, line, has_reason)`` of each harness import inside a function; the reason is a
    comment on the import's line or on the line above it."""
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        if "template" in path.parts:  # copied into packages, never imported by the harness
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                if any(name == "harness" or name.startswith("harness.") for name in names):
                    here = lines[node.lineno - 1 : node.end_lineno]
                    above = lines[node.lineno - 2].strip()
                    reason = any("#" in line for line in here) or above.startswith("#")
                    found.append((str(path.relative_to(HARNESS.parent)), node.lineno, reason))
    return sorted(set(found))


def test_each_function_level_import_says_why() -> None:
    missing = [f"{file}:{line}" for file, line, reason in _function_level_imports() if not reason]
    assert missing == [], "function-level harness imports without a `# why` comment"


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
def test_few_function_level_imports() -> None:
    assert len(_function_level_imports()) <= LAZY_IMPORTS_AT_MOST


def test_the_cli_makes_no_function_level_harness_import() -> None:
    # Its commands bind their implementation with harness.core.lazy.lazy_module at the top of
    # each module, so that a command's --help imports none of it (tests/cli/test_cli_startup.py).
    in_cli = [f"{file}:{line}" for file, line, _ in _function_level_imports()]
    assert [place for place in in_cli if place.startswith("harness/cli/")] == []
