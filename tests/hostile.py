"""Builders of broken and hostile submission packages, archives and prediction files.

Everything is generated inside a test's ``tmp_path``: nothing hostile is committed to the repo.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.data.prepare import Benchmark
from harness.pipeline import prediction_settings
from harness.submission.predictions import write_predictions
from tests.conftest import SUBMISSIONS

PREDICTIONS_MANIFEST = """name: hostile
version: "1.0"
authors: [Mallory]
kind: predictions
predictions:
  files: predictions/{{benchmark}}.{{setting}}.{suffix}
"""


class Payload:
    """Unpickling this touches ``marker``: proof that a pickle was (wrongly) loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


def pickled_object_array(marker: Path) -> np.ndarray:
    array = np.empty((2, 2), dtype=object)
    array[0, 0] = Payload(marker)
    return array


def copy_eszsl(tmp_path: Path, name: str = "eszsl") -> Path:
    dest = tmp_path / name
    shutil.copytree(SUBMISSIONS / "eszsl", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


# --- prediction packages -------------------------------------------------------------------

Mutator = Callable[[Path, str, dict[str, object]], None]


def predictions_package(
    tmp_path: Path, bench: Benchmark, setting_to_break: str, write_bad: Mutator, suffix: str = "npz"
) -> tuple[Path, Path]:
    """A predictions package whose files are honest except ``setting_to_break``'s.

    ``write_bad(path, setting, honest_kwargs)`` writes the broken file. Returns (package, bad).
    """
    root = tmp_path / "hostile"
    (root / "predictions").mkdir(parents=True)
    (root / "submission.yaml").write_text(PREDICTIONS_MANIFEST.format(suffix=suffix))
    bad = root / "predictions" / f"demo.{setting_to_break}.{suffix}"
    for setting in prediction_settings(bench.spec):
        shape = (len(bench.rows(setting)), len(bench.columns(setting)))
        kwargs: dict[str, object] = {
            "benchmark_hash": bench.hash,
            "class_order_hash": bench.class_order_hash(setting),
            "setting": setting,
            "shape": shape,
        }
        path = root / "predictions" / f"demo.{setting}.{suffix}"
        if setting == setting_to_break:
            write_bad(path, setting, kwargs)
        else:
            scores = np.random.default_rng(0).random(shape, dtype=np.float32)
            honest = {k: v for k, v in kwargs.items() if k != "shape"}
            if suffix == "npy":  # the writer makes no .npy files
                np.save(path, scores, allow_pickle=False)
            else:
                write_predictions(path, scores, **honest)  # type: ignore[arg-type]
    return root, bad


def write_npz(path: Path, scores: np.ndarray, meta: dict[str, object]) -> None:
    fields = {k: np.array(v) for k, v in meta.items() if k != "shape"}
    with path.open("wb") as handle:
        np.savez(handle, scores=scores, **fields)  # type: ignore[arg-type]


def lying_safetensors(path: Path, meta: dict[str, object]) -> None:
    """A safetensors file whose header claims 1e6 x 100 float32 but holds 16 bytes."""
    header = {
        "__metadata__": {k: str(v) for k, v in meta.items() if k != "shape"},
        "scores": {"dtype": "F32", "shape": [1_000_000, 100], "data_offsets": [0, 400_000_000]},
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 16)


def pickle_npy(path: Path, marker: Path) -> None:
    """A ``.npy`` file that is an object array: loading it with pickle would touch ``marker``."""
    np.save(path, pickled_object_array(marker), allow_pickle=True)


# --- archives ------------------------------------------------------------------------------


def zip_of(
    path: Path, members: dict[str, bytes], *, symlinks: dict[str, str] | None = None
) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) | 0
            zf.writestr(info, target)
    return path


def zip_with_duplicates(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("submission.yaml", b"name: a\n")
        zf.writestr("model.py", b"first\n")
        zf.writestr("./model.py", b"second\n")
    return path


def zip_bomb(path: Path, uncompressed_mib: int = 200) -> Path:
    """One member of ``uncompressed_mib`` MiB of zeros: a few hundred KB on disk."""
    chunk = bytes(1024 * 1024)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("submission.yaml", b"name: bomb\n")
        with zf.open("weights.bin", "w", force_zip64=True) as out:
            for _ in range(uncompressed_mib):
                out.write(chunk)
    return path


def tar_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return path


def tar_file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def tar_special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3  # /dev/null
    return info, None


def tar_bomb(path: Path, uncompressed_mib: int = 120) -> Path:
    """A .tar.gz holding ``uncompressed_mib`` MiB of zeros in one member."""

    class Zeros(io.RawIOBase):
        def __init__(self, n: int) -> None:
            self.left = n

        def readinto(self, buffer):  # type: ignore[no-untyped-def]
            n = min(len(buffer), self.left)
            buffer[:n] = bytes(n)
            self.left -= n
            return n

        def readable(self) -> bool:
            return True

    size = uncompressed_mib * 1024 * 1024
    with tarfile.open(path, "w:gz", compresslevel=9) as tf:
        tf.addfile(*tar_file("submission.yaml", b"name: bomb\n"))
        info = tarfile.TarInfo("weights.bin")
        info.size = size
        tf.addfile(info, io.BufferedReader(Zeros(size)))
    return path


def many_members_zip(path: Path, n: int) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(n):
            zf.writestr(f"f{i}.txt", b"")
    return path


def package_archive(tmp_path: Path, fmt: str, *, wrap: bool = True) -> Path:
    """An honest archive of the ESZSL package (inside a top folder when ``wrap``)."""
    src = copy_eszsl(tmp_path / "src")
    prefix = "eszsl/" if wrap else ""
    files = {prefix + p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*")}
    if fmt == "zip":
        return zip_of(tmp_path / "eszsl.zip", files)
    return tar_of(tmp_path / "eszsl.tar.gz", [tar_file(n, d) for n, d in files.items()])
