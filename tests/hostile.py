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

from harness.data.prepare import PreparedBenchmark
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
    tmp_path: Path,
    bench: PreparedBenchmark,
    setting_to_break: str,
    write_bad: Mutator,
    suffix: str = "npz",
) -> tuple[Path, Path]:
    """A predictions package whose files are honest except ``setting_to_break``'s.

    ``write_bad(path, setting, honest_kwargs)`` writes the broken file. Returns (package, bad).
    """
    root = tmp_path / "hostile"
    (root / "predictions").mkdir(parents=True)
    (root / "submission.yaml").write_text(PREDICTIONS_MANIFEST.format(suffix=suffix))
    bad = root / "predictions" / f"demo.{setting_to_break}.{suffix}"
    for setting in bench.spec.prediction_settings():
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


# --- code that would run instead of the hashed source ---------------------------------------

SOURCE_MODEL_MANIFEST = """name: {name}
version: "1.0"
authors: [Mallory]
kind: model
model:
  entrypoint: {entrypoint}
resources:
  memory_gb: 2
  time_s: 300
"""

#: The honest source a reviewer reads: zero scores, through a helper in a subpackage.
BENIGN_MODEL = """import numpy as np

from helpers.scale import SCALE


class Model:
    def fit(self, task):
        pass

    def save(self, directory):
        (directory / "state.json").write_text("{}")

    @classmethod
    def load(cls, directory):
        return cls()

    def predict(self, features, candidates):
        return np.full((len(features), len(candidates)), SCALE, np.float32)
"""
BENIGN_HELPERS = {"helpers/__init__.py": "", "helpers/scale.py": "SCALE = 0.0\n"}

#: What the byte-code does instead: leaves a mark in $HOME (the run's output folder) where it can,
#: then fails the run loudly, so a run that succeeds is one where the source ran.
MALICIOUS_MODULE = """import os
import pathlib

try:
    pathlib.Path(os.environ.get("HOME", "/tmp"), "pwned").write_text("hidden byte-code ran")
except OSError:
    pass
raise RuntimeError("hidden byte-code ran")
"""


def source_model_package(tmp_path: Path, name: str = "source-only") -> Path:
    """A model package of honest ``.py`` source only: ``model.py`` plus ``helpers/scale.py``."""
    root = tmp_path / name
    root.mkdir(parents=True)
    (root / "submission.yaml").write_text(
        SOURCE_MODEL_MANIFEST.format(name=name, entrypoint="model:Model")
    )
    (root / "model.py").write_text(BENIGN_MODEL)
    for rel, text in BENIGN_HELPERS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def cache_path(source: Path) -> Path:
    """Where this interpreter looks for the byte-code of ``source``
    (``__pycache__/<stem>.cpython-311.pyc`` on CPython 3.11)."""
    import importlib.util

    return Path(importlib.util.cache_from_source(str(source)))


def malicious_pyc(target: Path, source: str = MALICIOUS_MODULE) -> Path:
    """Compile ``source`` to ``target`` as an *unchecked-hash* pyc: Python runs it in place of
    the ``.py`` beside it without comparing the two. The malicious source itself is written to
    a scratch file next to the package, never into it."""
    import py_compile
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        src = Path(scratch) / "malicious.py"
        src.write_text(source)
        py_compile.compile(
            str(src),
            cfile=str(target),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    return target


def archive_of_folder(folder: Path, path: Path) -> Path:
    """``folder`` as a .zip or .tar.gz (by ``path``'s suffix), every file under ``pkg/``."""
    files = {
        "pkg/" + p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
    if path.name.endswith(".zip"):
        return zip_of(path, files)
    return tar_of(path, [tar_file(n, d) for n, d in files.items()])


# --- prediction files that cost more to read than they are worth ----------------------------


def npz_members(
    path: Path,
    members: list[tuple[str, np.ndarray]],
    *,
    compression: int = zipfile.ZIP_STORED,
) -> Path:
    """A .npz written member by member, so names may repeat or be anything (and object arrays
    are pickled, as ``np.save(allow_pickle=True)`` would)."""
    import warnings

    with zipfile.ZipFile(path, "w", compression) as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a repeated name: that is the point
        for name, array in members:
            with zf.open(name, "w", force_zip64=True) as out:
                np.lib.format.write_array(out, np.asanyarray(array), allow_pickle=True)
    return path


def meta_members(meta: dict[str, object]) -> list[tuple[str, np.ndarray]]:
    return [(f"{k}.npy", np.array(v)) for k, v in meta.items() if k != "shape"]


def npz_with_zero_member(
    path: Path, honest: list[tuple[str, np.ndarray]], name: str, n_bytes: int
) -> Path:
    """The honest members plus ``name``: a float32 .npy of ``n_bytes`` zeros, deflated while
    streamed in 16 MiB chunks (2 GiB of zeros is ~9 MB on disk, nothing is held in memory)."""
    chunk = bytes(16 * 1024 * 1024)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for member, array in honest:
            with zf.open(member, "w") as out:
                np.lib.format.write_array(out, array, allow_pickle=False)
        with zf.open(name, "w", force_zip64=True) as out:
            header = {"descr": "<f4", "fortran_order": False, "shape": (n_bytes // 4,)}
            np.lib.format.write_array_header_1_0(out, header)
            left = n_bytes
            while left:
                out.write(chunk[: min(len(chunk), left)])
                left -= min(len(chunk), left)
    return path


def npy_bytes(array: np.ndarray, *, header_shape: tuple[int, ...] | None = None) -> bytes:
    """``array`` as .npy bytes; ``header_shape`` makes the header claim another shape."""
    out = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(array)
    if header_shape is not None:
        header["shape"] = header_shape
    np.lib.format.write_array_header_1_0(out, header)
    out.write(np.ascontiguousarray(array).tobytes())
    return out.getvalue()


def npz_raw(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A .npz from raw member bytes (deflated): the .npy inside may say anything."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def understate_member_size(path: Path, member: str, claimed: int) -> Path:
    """Rewrite the zip's local and central headers of ``member`` to claim ``claimed``
    uncompressed bytes (its data and CRC are left as they are)."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    assert info.file_size < 0xFFFFFFFF, "zip64 sizes live in an extra field"
    local = info.header_offset
    assert raw[local : local + 4] == b"PK\x03\x04"
    struct.pack_into("<L", raw, local + 22, claimed)
    central = raw.find(b"PK\x01\x02")
    while central >= 0:
        name_len = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + name_len] == member.encode():
            struct.pack_into("<L", raw, central + 24, claimed)
            break
        central = raw.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(raw))
    return path


# --- YAML bombs ------------------------------------------------------------------------------


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """Anchors whose aliases nest ``levels`` deep, ``width`` wide: ~600 bytes that expand to
    ``width ** levels`` scalars. Line ``i + 1`` defines level ``i``."""
    lines = [f"lol0: &lol0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def first_level_over(limit: int, width: int = 10) -> int:
    """The first level of :func:`billion_laughs` whose expanded node count exceeds ``limit``."""
    size, level = 1 + width, 0
    while size <= limit:
        size, level = 1 + width * size, level + 1
    return level


def deep_nesting(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth + "\n"
