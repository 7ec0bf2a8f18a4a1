"""How a prediction-file package reaches CI (issue 14, item 17).

Decision: prediction files are committed with their package (bounded in size, see
``MAX_PREDICTION_FILE_BYTES``), so a fresh clone of the leaderboard repository holds everything
CI scores. The shipped baseline goes through ``zsl ci pr`` from a fresh clone made with this
repository's own ``.gitignore`` and reproduces its committed record; a file over the bound is
refused naming the file, the bound and what to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.ci import Execution, run_pull_request
from harness.core.errors import PredictionError
from harness.results.records_io import read_records
from harness.submission.package import MAX_PREDICTION_FILE_BYTES, load_package
from tests.ci.test_ci import (  # noqa: F401  (_isolated_git is an autouse fixture)
    _board_repo,
    _isolated_git,
    commit_all,
    git,
)
from tests.conftest import REPO, SUBMISSIONS

BASELINE = "nearest-seen-class-transfer"
RESULTS = Path("leaderboard", "results")


def _tracked(folder: Path) -> list[str]:
    """The files of ``folder`` that this repository's git tracks (what a clone gets)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", str(folder.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p]


@pytest.mark.slow
def test_a_prediction_file_package_passes_ci_from_a_fresh_clone(tmp_path: Path) -> None:
    tracked = _tracked(SUBMISSIONS / BASELINE)
    assert f"submissions/{BASELINE}/predictions/demo.zsl.safetensors" in tracked
    origin = _board_repo(tmp_path / "origin")
    shutil.copy(REPO / ".gitignore", origin / ".gitignore")
    git(origin, "checkout", "--quiet", "-b", "add-baseline")
    for rel in tracked:  # what a clone of this repository holds, nothing generated here
        (origin / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, origin / rel)
    committed = REPO / RESULTS / "demo" / "v1" / f"{BASELINE}@1.0.json"
    (origin / RESULTS / "demo" / "v1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(committed, origin / RESULTS / "demo" / "v1" / committed.name)
    commit_all(origin, "the baseline and its record")
    assert git(origin, "status", "--porcelain").strip() == ""  # nothing left out by .gitignore
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "--quiet", "--branch", "add-baseline", str(origin), str(fresh))
    git(fresh, "branch", "--quiet", "main", "origin/main")

    result = run_pull_request(
        "main",
        repo_root=fresh,
        results_dir=fresh / RESULTS,
        out_dir=tmp_path / "out",
        runner="local",  # a predictions package runs no model code
        execution=Execution("inline"),
    )

    assert result.ok, (result.outcomes, result.problems)
    (outcome,) = result.outcomes
    assert outcome.package == f"submissions/{BASELINE}" and outcome.status == "ok"
    assert outcome.detail.startswith("scored on demo v1")
    (exported,) = [r for r in read_records(fresh / RESULTS) if r.submission.name == BASELINE]
    (shipped,) = [r for r in read_records(REPO / RESULTS) if r.submission.name == BASELINE]
    assert exported.submission.package_hash == shipped.submission.package_hash
    assert exported.predictions_hashes == shipped.predictions_hashes
    assert exported.scores == shipped.scores


def test_a_prediction_file_over_the_bound_is_refused(tmp_path: Path) -> None:
    package_dir = tmp_path / BASELINE
    shutil.copytree(SUBMISSIONS / BASELINE, package_dir)
    big = package_dir / "predictions" / "demo.gzsl.safetensors"
    with big.open("r+b") as handle:  # sparse: no disk is spent
        handle.truncate(MAX_PREDICTION_FILE_BYTES + 1)
    package = load_package(package_dir)
    with pytest.raises(PredictionError) as err:
        package.prediction_files("demo", ["zsl", "gzsl"])
    assert str(err.value) == (
        "predictions/demo.gzsl.safetensors: 50.0 MiB; a prediction file may hold at most 50 MiB,"
        " as it is committed with the package to the leaderboard's repository (git hosts refuse"
        " files over 100 MB): store scores as float32, or ask for the benchmark's top-K format"
        " (predictions.format: topk in its spec)"
    )
    assert os.path.getsize(big) == MAX_PREDICTION_FILE_BYTES + 1
