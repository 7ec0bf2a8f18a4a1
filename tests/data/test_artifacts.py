"""Frozen artifacts: content hashes, atomic writes, and refusal of tampered or truncated files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.audit import AuditStatus, LeakageAudit
from harness.core.errors import IntegrityError
from harness.core.hashing import array_sha256
from harness.data.artifacts import MANIFEST, FrozenBenchmark, cache_action, write_frozen
from harness.data.sources import RawSource, source_manifest


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "features": rng.standard_normal((50, 8)).astype(np.float32),
        "labels": rng.integers(0, 5, 50),
        "class_ids": np.array(["n01", "n02", "n03", "n04", "n05"]),
        "splits/train_images": np.arange(30),
    }


#: A toy benchmark's leakage audit (its features were not pre-trained on a class set).
TOY_AUDIT = LeakageAudit(source="none", n_test=2, status=AuditStatus.NOT_APPLICABLE)
#: Where its raw inputs came from: this file's generator.
TOY_SOURCE = source_manifest(RawSource("generated", "a test's random arrays"))


def _freeze(root: Path) -> FrozenBenchmark:
    return write_frozen(
        root,
        _arrays(),
        benchmark="toy",
        version=1,
        spec_data_hash="sha256:x",
        audit=TOY_AUDIT,
        raw_inputs=TOY_SOURCE,
    )


def test_round_trip_and_manifest(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path / "v1")
    arrays = _arrays()
    for name, array in arrays.items():
        np.testing.assert_array_equal(frozen.array(name), array)
        assert frozen.entries[name].sha256 == array_sha256(array)
    manifest = json.loads((tmp_path / "v1" / MANIFEST).read_text())
    assert list(manifest["artifacts"]) == sorted(arrays)
    assert manifest["hash"] == frozen.hash
    assert not frozen.array("features").flags.writeable
    assert (tmp_path / "v1" / "splits" / "train_images.npy").is_file()


def test_hash_is_of_content_not_bytes(tmp_path: Path) -> None:
    a = _freeze(tmp_path / "a")
    # Re-save one artifact big-endian: different bytes on disk, same content.
    path = a.path("labels")
    np.save(path, np.load(path).astype(">i8"), allow_pickle=False)
    with pytest.raises(IntegrityError, match="dtype >i8 instead of <i8"):
        FrozenBenchmark(a.root).array("labels")
    assert array_sha256(np.arange(3, dtype="<i8")) == array_sha256(np.arange(3, dtype=">i8"))
    b = _freeze(tmp_path / "b")
    assert b.hash == FrozenBenchmark(tmp_path / "b").hash == _freeze(tmp_path / "c").hash


def test_tampered_artifact_is_refused(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path / "v1")
    path = frozen.path("features")
    data = np.load(path)
    data[3, 2] += 1.0
    np.save(path, data, allow_pickle=False)
    with pytest.raises(
        IntegrityError, match=r"features\.npy: artifact 'features' does not match"
    ) as info:
        FrozenBenchmark(tmp_path / "v1").array("features")
    assert "content hash" in str(info.value) and "never rebuilt silently" in str(info.value)
    with pytest.raises(IntegrityError, match="features"):
        FrozenBenchmark(tmp_path / "v1").verify()


def test_truncated_artifact_is_refused(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path / "v1")
    path = frozen.path("features")
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(
        IntegrityError, match=r"features\.npy: artifact file is truncated or corrupt"
    ):
        FrozenBenchmark(tmp_path / "v1").array("features")


def test_missing_artifact_and_edited_manifest(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path / "v1")
    frozen.path("labels").unlink()
    with pytest.raises(IntegrityError, match=r"labels\.npy: artifact file is missing"):
        FrozenBenchmark(tmp_path / "v1").array("labels")
    manifest_path = tmp_path / "v1" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["artifacts"]["labels"]["shape"] = [49]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="manifest hash mismatch"):
        FrozenBenchmark(tmp_path / "v1")
    manifest_path.write_text("{not json")
    with pytest.raises(IntegrityError, match="not JSON"):
        FrozenBenchmark(tmp_path / "v1")


def test_pickled_npy_is_refused(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path / "v1")
    np.save(frozen.path("class_ids"), np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(IntegrityError, match="class_ids"):
        FrozenBenchmark(tmp_path / "v1").array("class_ids")


def test_write_is_atomic_and_never_overwrites(tmp_path: Path) -> None:
    arrays = _arrays()
    arrays["zz_bad"] = np.array([object()], dtype=object)
    with pytest.raises(TypeError, match="object dtype"):
        write_frozen(
            tmp_path / "v1",
            arrays,
            benchmark="toy",
            version=1,
            spec_data_hash="h",
            audit=TOY_AUDIT,
            raw_inputs=TOY_SOURCE,
        )
    assert list(tmp_path.iterdir()) == []  # no half-written directory left behind
    _freeze(tmp_path / "v1")
    with pytest.raises(IntegrityError, match="refusing to overwrite"):
        _freeze(tmp_path / "v1")


def test_cache_action(tmp_path: Path) -> None:
    assert cache_action(tmp_path / "v1", "sha256:x") == "create"
    _freeze(tmp_path / "v1")
    assert cache_action(tmp_path / "v1", "sha256:x") == "use"
    assert cache_action(tmp_path / "v1", "sha256:other") == "conflict"
    manifest = json.loads((tmp_path / "v1" / MANIFEST).read_text())
    manifest["format"] = "zsl-frozen/1"  # an older harness's benchmark
    (tmp_path / "v1" / MANIFEST).write_text(json.dumps(manifest))
    assert cache_action(tmp_path / "v1", "sha256:x") == "outdated"


def test_an_edited_raw_inputs_section_is_refused(tmp_path: Path) -> None:
    # Outside the benchmark hash (the arrays are the same whatever their origin), but sealed:
    # a synthetic benchmark cannot be relabelled a release by editing its manifest.
    frozen = _freeze(tmp_path / "v1")
    manifest = json.loads((frozen.root / MANIFEST).read_text())
    manifest["raw_inputs"]["origin"] = "release"
    (frozen.root / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="raw_inputs section was edited"):
        FrozenBenchmark(frozen.root)
    del manifest["raw_inputs"]["seal"]
    (frozen.root / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="no sealed 'raw_inputs' section"):
        FrozenBenchmark(frozen.root)
