"""What runner ``container`` costs over runner ``sandbox``: one reference method end to end.

:func:`measure` runs ``submissions/eszsl`` on the demo with ``run_submission`` (prepare,
validate, run, score; not stored) under each runner, best of :data:`REPEAT`, in a fresh
``ZSL_HOME`` under ``work``, the benchmark frozen once beforehand, and reports both wall times,
the run step alone (where the runners differ) and the overhead. The engine is the one
``DOCKER_HOST`` (or the default socket) reaches, the image the harness's default worker image,
which must exist (``zsl image build``, offline ``--rootfs DIR``); otherwise, and where bubblewrap
cannot make a sandbox, the figures say ``not measured`` and why.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
METHOD = "eszsl"
REPEAT = 3

__all__ = ["METHOD", "REPEAT", "measure"]


def _unavailable() -> str | None:
    from harness.core.errors import HarnessError
    from harness.images import engine_path, inspect_image
    from harness.runners.sandbox import available
    from harness.submission.package import default_worker_image

    if not available():
        return "bubblewrap cannot create a sandbox here"
    try:
        engine = engine_path()
        if inspect_image(engine, default_worker_image(0)) is None:
            return f"no image {default_worker_image(0)}: run `zsl image build` (--rootfs DIR)"
    except HarnessError as err:
        return str(err)
    return None


def _best(runner: str, package: Path, spec: Path) -> dict[str, float]:
    from harness.pipeline import run_submission

    walls, runs = [], []
    for _ in range(REPEAT):
        start = time.perf_counter()
        record = run_submission(package, spec, runner=runner, store=False, quiet=True)
        walls.append(time.perf_counter() - start)
        runs.append(record.timings["run"])
    return {"wall_s": round(min(walls), 3), "run_step_s": round(min(runs), 3)}


def measure(work: Path) -> dict[str, Any]:
    """Sandbox vs container wall time for one reference method on the demo, or why not."""
    reason = _unavailable()
    if reason is not None:
        return {"status": "not measured", "reason": reason}
    saved = os.environ.get("ZSL_HOME")
    os.environ["ZSL_HOME"] = str(Path(work) / "container-overhead-home")
    try:
        from harness.data.prepare import load_benchmark
        from harness.spec import load_spec

        spec = REPO / "specs" / "demo.yaml"
        package = REPO / "submissions" / METHOD
        load_benchmark(load_spec(spec))  # frozen once, outside the timings
        sandbox = _best("sandbox", package, spec)
        container = _best("container", package, spec)
    finally:
        if saved is None:
            os.environ.pop("ZSL_HOME", None)
        else:
            os.environ["ZSL_HOME"] = saved
    return {
        "status": "measured",
        "method": METHOD,
        "benchmark": "demo",
        "repeat": f"best of {REPEAT}",
        "sandbox": sandbox,
        "container": container,
        "overhead_s": round(container["wall_s"] - sandbox["wall_s"], 3),
        "ratio": round(container["wall_s"] / sandbox["wall_s"], 2),
    }


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="zsl-bench-") as tmp:
        json.dump(measure(Path(tmp)), sys.stdout, indent=2)
        print()
