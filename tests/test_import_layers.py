"""Import layering: data code never imports the metrics (Issue 28).

Importing any ``harness.metrics`` module runs the package's ``__init__``, which registers every
metric and loads ``scipy.stats``; a fresh interpreter shows what ``import harness.data`` pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
