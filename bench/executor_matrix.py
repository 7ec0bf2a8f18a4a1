"""The demo matrix (every shipped submission × the demo) on the local executor vs Ray.

:func:`measure` copies every package under ``submissions/`` into ``work`` (a predictions
package's files regenerated there), freezes the demo once, then runs the matrix with
:func:`harness.executors.matrix.run_matrix`, each executor into its own fresh store:

- ``local``: the process pool, one worker per CPU;
- ``ray``: a Ray instance started here with 2 CPUs (its start timed apart), one task per run.

Both use the default runner (the strongest the machine offers). It reports the wall time of each
matrix, the runs done and failed, and whether the two stores hold identical scores and
prediction hashes; where Ray is not installed, the Ray figures say ``not measured`` and why.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RAY_CPUS = 2

__all__ = ["RAY_CPUS", "measure"]


def _packages(work: Path) -> list[Path]:
    from harness.data.prepare import load_benchmark
    from harness.pipeline import generate_prediction_files
    from harness.spec import load_spec
    from harness.submission.package import load_package

    bench = load_benchmark(load_spec(REPO / "specs" / "demo.yaml"))  # frozen once, untimed
    copies = []
    for manifest in sorted((REPO / "submissions").glob("*/submission.yaml")):
        copy = work / "submissions" / manifest.parent.name
        shutil.copytree(manifest.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        package = load_package(copy)
        if package.manifest.kind == "predictions":
            generate_prediction_files(package, bench)
        copies.append(copy)
    return copies


def _matrix(executor: str, packages: list[Path], db: str, jobs: int | None) -> dict[str, Any]:
    from harness.executors.matrix import RunRequest, run_matrix

    spec = REPO / "specs" / "demo.yaml"
    report = run_matrix(
        [RunRequest(p, spec) for p in packages],
        executor=executor,
        jobs=jobs,
        database_url=db,
        progress=False,
    )
    return {
        "wall_s": round(report.wall_s, 2),
        "done": report.count("done"),
        "failed": report.count("failed"),
        "errors": [r.error for r in report.results if r.error],
    }


def _stored(db: str) -> dict[str, Any]:
    from harness.store import load_runs, open_store

    return {
        r.submission.name: (
            r.predictions_hashes,
            [e.model_dump(mode="json") for e in r.scores],
        )
        for r in load_runs(open_store(db))
    }


def measure(work: Path) -> dict[str, Any]:
    """Wall time of the demo matrix on the local executor and on Ray (2 CPUs)."""
    from harness.executors import default_jobs

    work = Path(work)
    saved = os.environ.get("ZSL_HOME")
    os.environ["ZSL_HOME"] = str(work / "executor-matrix-home")
    try:
        packages = _packages(work / "executor-matrix")
        local_db = f"sqlite:///{work / 'executor-local.sqlite3'}"
        local = _matrix("local", packages, local_db, default_jobs())
        local["jobs"] = default_jobs()
        result: dict[str, Any] = {
            "status": "measured",
            "matrix": f"{len(packages)} submissions × demo",
            "local": local,
        }
        try:
            import ray
        except ImportError as err:
            result["ray"] = {"status": "not measured", "reason": f"ray not installed ({err})"}
            return result
        os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
        start = time.perf_counter()
        ray.init(
            num_cpus=RAY_CPUS,
            object_store_memory=200 << 20,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="WARNING",
        )
        started = time.perf_counter() - start
        try:
            ray_db = f"sqlite:///{work / 'executor-ray.sqlite3'}"
            on_ray = _matrix("ray", packages, ray_db, None)
        finally:
            ray.shutdown()
        on_ray.update(cpus=RAY_CPUS, start_s=round(started, 2))
        result["ray"] = on_ray
        result["identical_scores"] = _stored(local_db) == _stored(ray_db)
        result["ray_over_local"] = round(on_ray["wall_s"] / local["wall_s"], 2)
        return result
    finally:
        if saved is None:
            os.environ.pop("ZSL_HOME", None)
        else:
            os.environ["ZSL_HOME"] = saved


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="zsl-bench-") as tmp:
        json.dump(measure(Path(tmp)), sys.stdout, indent=2)
        print()
