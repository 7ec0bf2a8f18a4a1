"""Task bundles: what model code may see, including the validation fit, and never test labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.bundles import Bundle, write_bundle
from harness.core.errors import RunnerError
from harness.data.prepare import load_benchmark
from harness.spec import load_spec
from tests.conftest import SPECS


@pytest.fixture
def bench():  # type: ignore[no-untyped-def]
    return load_benchmark(load_spec(SPECS / "demo.yaml"))


def _labels_of(bench, features: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Find which benchmark images a bundle array holds (features are unique per image)."""
    all_features = bench.array("features")
    lookup = {row.tobytes(): i for i, row in enumerate(all_features)}
    return np.array([lookup[row.tobytes()] for row in features])


def test_bundle_holds_no_test_labels_and_no_test_image_in_training(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    names = {p.relative_to(bundle.root).as_posix() for p in bundle.root.rglob("*.npy")}
    assert not any("test" in n and "labels" in n for n in names), names
    test_images = set(bench.rows("zsl")) | set(bench.rows("gzsl"))
    for fit in ("main", "validation"):
        task = bundle.train_task(fit=fit)
        seen_images = _labels_of(bench, task.train_features).tolist()
        seen_images += _labels_of(bench, task.val_features).tolist()
        assert not test_images & set(seen_images), fit
        np.testing.assert_array_equal(
            bench.array("labels")[_labels_of(bench, task.train_features)], task.train_labels
        )


def test_validation_fit_sees_only_training_classes(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    assert bundle.validation_settings == ["zsl_val", "gzsl_val", "scale_val"]
    cal = bundle.train_task(fit="validation")
    train, val = bench.array("splits/train_classes"), bench.array("splits/val_classes")
    assert set(cal.train_classes) | set(cal.val_classes) == set(train)
    assert not set(cal.train_classes) & set(cal.val_classes)
    assert set(cal.train_labels) <= set(cal.train_classes)
    assert set(cal.val_labels) <= set(cal.val_classes)
    # Validation predictions: validation-class images (ZSL-val), and held-out training-class
    # images + validation-class images over train ∪ val candidates (GZSL-val).
    features, candidates = bundle.test("zsl_val")
    assert set(candidates) == set(val)
    assert set(bench.array("labels")[_labels_of(bench, features)]) == set(val)
    features, candidates = bundle.test("gzsl_val")
    assert set(candidates) == set(train) | set(val)
    rows = _labels_of(bench, features)
    holdout = set(bench.array("splits/cal_holdout_images"))
    assert holdout <= set(rows)
    fit_images = set(_labels_of(bench, cal.train_features)) | set(
        _labels_of(bench, cal.val_features)
    )
    assert not holdout & fit_images
    assert np.array_equal(bench.seen_for("gzsl_val"), train)


def test_both_fits_score_the_same_training_images_over_the_training_classes(  # type: ignore[no-untyped-def]
    bench, tmp_path: Path
) -> None:
    """The scale images (harness.data.scale_images): images both fits trained on, scored
    against the classes both fits have seen, the same rows in the same order for each fit."""
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    assert bundle.settings == ["zsl", "gzsl", "scale"]
    main_features, main_candidates = bundle.test("scale")
    val_features, val_candidates = bundle.test("scale_val")
    train = bench.array("splits/train_classes")
    assert np.array_equal(main_candidates, train) and np.array_equal(val_candidates, train)
    assert np.array_equal(main_features, val_features)
    rows = _labels_of(bench, main_features)  # image indices of the scale rows
    assert np.array_equal(rows, bench.rows("scale")) and len(set(rows)) == len(rows)
    main = bundle.train_task(fit="main")
    val = bundle.train_task(fit="validation")
    assert set(rows) <= set(_labels_of(bench, main.train_features))
    assert set(rows) <= set(_labels_of(bench, val.train_features)) | set(
        _labels_of(bench, val.val_features)
    )
    assert not set(rows) & set(bench.array("splits/cal_holdout_images"))
    test_images = set(bench.rows("zsl")) | set(bench.rows("gzsl"))
    assert not set(rows) & test_images
    # every training class is scored (the demo has far fewer than SCALE_IMAGES images)
    assert set(bench.array("labels")[rows]) == set(train)


def test_bundle_without_validation_fit(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b", validation=False))
    assert bundle.validation_settings == []
    assert not (bundle.root / "validation").exists()
    features, candidates = bundle.test("zsl")
    assert features.shape == (len(bench.rows("zsl")), 128)
    np.testing.assert_array_equal(candidates, bench.columns("zsl"))


# --- since zsl-bundle/2: every setting of a fit sees the same shuffled images -------------------


def test_model_bundles_hold_no_test_image_and_say_no_setting_rows(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """GZSL membership leak: in zsl-bundle/1 the ZSL rows were exactly the unseen-class test
    images; since /4 a model bundle holds no test image at all (a fit could compute test-set
    statistics from them). Each fit's shuffled test images lie outside every bundle, and the
    harness's row map picks each setting's images from them."""
    from harness.bundles import write_model_bundles

    rowmap = write_model_bundles(bench, tmp_path / "b", tmp_path / "secret")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["main", "validation"]
    fits = (
        ("main", ["zsl", "gzsl", "scale"]),
        ("validation", ["zsl_val", "gzsl_val", "scale_val"]),
    )
    for fit, settings in fits:
        bundle = Bundle(tmp_path / "b" / fit)
        assert bundle.info["format"] == "zsl-bundle/4" and not bundle.has_row_files
        assert bundle.fits == [fit] and bundle.settings_of(fit) == settings
        assert not list(bundle.root.rglob("rows.npy"))
        assert {p.parent.name for p in bundle.root.rglob("features.npy")} == {"train", "val"}
        with pytest.raises(RunnerError, match=r"a model bundle holds no test image"):
            bundle.test_features(fit)
        with pytest.raises(RunnerError, match=r"holds the \w+ fit only"):
            bundle.train_task(fit="validation" if fit == "main" else "main")
        union = np.unique(np.concatenate([bench.rows(s) for s in settings]))
        images = _labels_of(bench, np.load(rowmap.test_features[fit]))
        assert not rowmap.test_features[fit].is_relative_to(tmp_path / "b")
        assert sorted(images) == sorted(union)  # every test image of the fit, once
        assert rowmap.n_rows[fit] == len(union)
        for setting in settings:
            # The harness's row map picks the setting's images, in the frozen test order.
            np.testing.assert_array_equal(images[rowmap.rows[setting]], bench.rows(setting))
            np.testing.assert_array_equal(bundle.candidates(setting), bench.columns(setting))
        with pytest.raises(RunnerError, match=r"a model bundle does not say which test images"):
            bundle.test(settings[0])
    # The validation fit's bundle knows the training classes only (its own train/val split).
    val_task = Bundle(tmp_path / "b" / "validation").train_task(fit="validation")
    main_task = Bundle(tmp_path / "b" / "main").train_task(fit="main")
    assert not np.isin(val_task.seen_classes, main_task.val_classes).any()
    with pytest.raises(RunnerError, match=r"outside the bundles"):
        write_model_bundles(bench, tmp_path / "c", tmp_path / "c" / "secret")


def test_the_order_is_fresh_per_bundle_and_blind_to_class(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from harness.bundles import write_model_bundles

    orders = []
    for name in ("a", "b"):
        rowmap = write_model_bundles(bench, tmp_path / name, tmp_path / f"{name}-secret")
        orders.append(_labels_of(bench, np.load(rowmap.test_features["main"])))
    assert sorted(orders[0]) == sorted(orders[1]) and not np.array_equal(*orders)
    # Unseen-class images are spread over the whole file, not in a block.
    labels = bench.array("labels")[orders[0]]
    unseen = np.isin(labels, bench.array("splits/unseen_classes"))
    halves = np.array_split(unseen, 2)
    assert abs(halves[0].mean() - halves[1].mean()) < 0.15


def test_generator_bundle_serves_each_setting_in_the_contract_order(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    assert bundle.has_row_files
    for setting in ("zsl", "gzsl", "zsl_val", "gzsl_val"):
        features, candidates = bundle.test(setting)
        np.testing.assert_array_equal(_labels_of(bench, features), bench.rows(setting))
        np.testing.assert_array_equal(candidates, bench.columns(setting))


def test_old_bundles_and_unknown_settings_are_refused(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = write_bundle(bench, tmp_path / "b")
    with pytest.raises(RunnerError, match=r"no setting 'transductive'"):
        Bundle(root).candidates("transductive")
    info = json.loads((root / "task.json").read_text())
    # /2 named the validation fit "calibration"; /3 model bundles held test images
    for old in ("zsl-bundle/1", "zsl-bundle/2", "zsl-bundle/3"):
        (root / "task.json").write_text(json.dumps({**info, "format": old}))
        with pytest.raises(RunnerError, match=r"task\.json: not a 'zsl-bundle/4' bundle"):
            Bundle(root)


def test_train_features_are_mapped_copy_on_write(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Mapped, not loaded: every fit process shares the bundle file's pages (issue 15); a model
    # may still write into its arrays, and the file, which the next fit maps, never changes.
    bundle = Bundle(write_bundle(bench, tmp_path / "b"))
    path = bundle.root / "train" / "features.npy"
    on_disk = path.read_bytes()
    task = bundle.train_task(fit="main")
    for array in (task.train_features, task.val_features):
        assert type(array) is np.ndarray  # model code sees no np.memmap subclass
        assert isinstance(array.base, np.memmap) and array.base.mode == "c"
        assert array.flags.writeable
    original = task.train_features.copy()
    task.train_features[:] = -1.0
    np.divide(task.train_features, 7.0, out=task.train_features)
    assert (task.train_features == np.float32(-1.0) / np.float32(7.0)).all()
    del task
    assert path.read_bytes() == on_disk
    np.testing.assert_array_equal(bundle.train_task(fit="main").train_features, original)
