"""Task bundles: what model code may see, including the calibration fit, and never test labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.data.prepare import load_benchmark
from harness.spec import load_spec
from harness.tasks import Bundle, write_bundle
from tests.conftest import SPECS


@pytest.fixture
def bench():  # type: ignore[no-untyped-def]
    return load_benchmark(load_spec(SPECS / "demo.yaml"))


def _labels_of(bench, features: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Find which benchmark images a bundle array holds (features are unique per image)."""
    all_features = bench.a("features")
    lookup = {row.tobytes(): i for i, row in enumerate(all_features)}
    return np.array([lookup[row.tobytes()] for row in features])


def test_bundle_holds_no_test_labels_and_no_test_image_in_training(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    names = {p.relative_to(bundle.root).as_posix() for p in bundle.root.rglob("*.npy")}
    assert not any("test" in n and "labels" in n for n in names), names
    test_images = set(bench.rows("zsl")) | set(bench.rows("gzsl"))
    for fit in ("main", "calibration"):
        task = bundle.train_task(fit=fit)
        seen_images = _labels_of(bench, task.train_features).tolist()
        seen_images += _labels_of(bench, task.val_features).tolist()
        assert not test_images & set(seen_images), fit
        np.testing.assert_array_equal(
            bench.a("labels")[_labels_of(bench, task.train_features)], task.train_labels
        )


def test_calibration_fit_sees_only_training_classes(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    assert bundle.validation_settings == ["zsl_val", "gzsl_val"]
    cal = bundle.train_task(fit="calibration")
    train, val = bench.a("splits/train_classes"), bench.a("splits/val_classes")
    assert set(cal.train_classes) | set(cal.val_classes) == set(train)
    assert not set(cal.train_classes) & set(cal.val_classes)
    assert set(cal.train_labels) <= set(cal.train_classes)
    assert set(cal.val_labels) <= set(cal.val_classes)
    # Validation predictions: validation-class images (ZSL-val), and held-out training-class
    # images + validation-class images over train ∪ val candidates (GZSL-val).
    features, candidates = bundle.test("zsl_val")
    assert set(candidates) == set(val)
    assert set(bench.a("labels")[_labels_of(bench, features)]) == set(val)
    features, candidates = bundle.test("gzsl_val")
    assert set(candidates) == set(train) | set(val)
    rows = _labels_of(bench, features)
    holdout = set(bench.a("splits/cal_holdout_images"))
    assert holdout <= set(rows)
    fit_images = set(_labels_of(bench, cal.train_features)) | set(
        _labels_of(bench, cal.val_features)
    )
    assert not holdout & fit_images
    assert np.array_equal(bench.seen_for("gzsl_val"), train)


def test_bundle_without_calibration(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b", calibration=False))
    assert bundle.validation_settings == []
    assert not (bundle.root / "calibration").exists()
    features, candidates = bundle.test("zsl")
    assert features.shape == (len(bench.rows("zsl")), 128)
    np.testing.assert_array_equal(candidates, bench.columns("zsl"))
