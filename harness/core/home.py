"""Where the harness keeps what it downloads, freezes and leases: ``ZSL_HOME``.

Frozen benchmarks, downloads, feature sets, prediction archives, GPU leases and failed runs'
logs all live under this one root, so every package that stores something reads it here.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["zsl_home"]


def zsl_home() -> Path:
    """The cache root: ``ZSL_HOME`` or ``~/.cache/zsl-harness``."""
    return Path(os.environ.get("ZSL_HOME") or Path.home() / ".cache" / "zsl-harness")
