"""How long ``zsl --version`` and ``zsl --help`` take from a fresh process (target < 0.5 s).

Each command runs ``repeat`` times as its own process (the console script beside this Python);
the best time is reported, as the other benchmarks do, with the modules the process ended up
importing that ``harness.cli.main`` keeps out of those two commands.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = 0.5


def _zsl() -> str:
    return str(Path(sys.executable).with_name("zsl"))


def measure(repeat: int = 5) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for words in (["--version"], ["--help"]):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([_zsl(), *words], capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        results[" ".join(["zsl", *words])] = {
            "seconds": round(min(times), 3),
            "target_seconds": TARGET_SECONDS,
        }
    return {
        "commands": results,
        "targets_met": all(r["seconds"] < TARGET_SECONDS for r in results.values()),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=1))
