"""ESZSL and SAE end to end on every xlsa17 dataset (proposed split), on fixture features written
in the res101.mat layout next to the real att_splits.mat (issue 5 acceptance)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from harness.pipeline import run_submission
from harness.spec import load_spec_data
from tests.conftest import SHARED_DATA, SPECS, SUBMISSIONS

XLSA17 = SHARED_DATA / "xlsa17"
DIM = 64
CHANCE = {"AWA1": 1 / 10, "AWA2": 1 / 10, "CUB": 1 / 50, "SUN": 1 / 72, "APY": 1 / 12}

pytestmark = pytest.mark.skipif(
    not (XLSA17 / "AWA2" / "att_splits.mat").is_file(), reason="shared xlsa17 files absent"
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, xlsa17_release: Callable[..., Path]) -> Path:
    root = tmp_path_factory.mktemp("xlsa17-methods")
    for dataset in CHANCE:
        xlsa17_release(root, dataset, dim=DIM)
    return root


def _spec(tmp_path: Path, dataset: str, release: Path) -> Path:
    source = SPECS / "xlsa17" / f"{dataset.lower()}-ps.yaml"
    data = load_spec_data(source)
    params = data["data"]["params"]
    params["path"] = str(release)
    if "class_map" in params:
        params["class_map"] = str(source.parent / params["class_map"])
    if params.get("hierarchy") == "cub_taxonomy":
        params["taxonomy_path"] = str(SHARED_DATA / "cub-hierarchy")
    if data.get("hierarchy", {}).get("file"):
        data["hierarchy"]["file"] = str(source.parent / data["hierarchy"]["file"])
    if data.get("audit", {}).get("wordnet_map"):
        data["audit"]["wordnet_map"] = str(source.parent / data["audit"]["wordnet_map"])
    data["features"]["dim"] = DIM
    data["uncertainty"] = {"n_boot": 50}
    path = tmp_path / f"{dataset.lower()}-ps.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(CHANCE))
@pytest.mark.parametrize("method", ["eszsl", "sae"])
def test_method_runs_end_to_end(dataset: str, method: str, release: Path, tmp_path: Path) -> None:
    if dataset == "CUB" and not (SHARED_DATA / "cub-hierarchy").is_dir():
        pytest.skip("CUB taxonomy files absent")
    record = run_submission(
        SUBMISSIONS / method, _spec(tmp_path, dataset, release), store=False, quiet=True
    )
    top1 = record.score("zsl", "top1")
    assert top1 is not None and top1.value > 3 * CHANCE[dataset]
    assert top1.interval is not None and top1.interval.lo <= top1.interval.hi
    harmonic = record.score("gzsl", "H")
    assert harmonic is not None and harmonic.value > 0


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(CHANCE))
def test_no_test_image_reaches_a_bundle_fit(dataset: str, release: Path, tmp_path: Path) -> None:
    """On the real xlsa17 index vectors: bundles (main and validation fits) hold no test image."""
    import numpy as np

    from harness.bundles import Bundle, write_bundle
    from harness.data.prepare import load_benchmark
    from harness.spec import load_spec

    if dataset == "CUB" and not (SHARED_DATA / "cub-hierarchy").is_dir():
        pytest.skip("CUB taxonomy files absent")
    bench = load_benchmark(load_spec(_spec(tmp_path, dataset, release)))
    bundle = Bundle(write_bundle(bench, tmp_path / "bundle"))
    features = bench.array("features")
    index = {row.tobytes(): i for i, row in enumerate(features)}
    test = set(bench.rows("zsl").tolist()) | set(bench.rows("gzsl").tolist())
    assert len(index) == len(features), "fixture features must be unique per image"
    for fit in ("main", "validation"):
        task = bundle.train_task(fit=fit)
        for part in (task.train_features, task.val_features):
            images = {index[row.tobytes()] for row in np.asarray(part)}
            assert not images & test, (dataset, fit)
