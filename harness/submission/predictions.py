"""Prediction files: write and read predictions without pickle.

Contents: dense ``scores [n_test, n_candidates]``, or top-K ``topk_indices [n_test, K]`` (candidate
columns) with ``topk_scores [n_test, K]`` for huge label spaces. Formats: ``.safetensors`` (the
default: a JSON header and raw bytes, no code; top-K files are validated and scored in streamed
row chunks) and ``.npz`` loaded with ``allow_pickle=False``. A file carries, as string
metadata, the benchmark hash, the setting and the hash of the column (candidate class) order it
was made for; the reader refuses a file without them (naming the missing keys), made for another
benchmark or class order, a wrong shape or dtype, NaN/inf, out-of-range or repeated top-K
entries (naming the first bad row). Rows are in the frozen test order of the setting; columns
in the spec's candidate order.

See docs/submission.md; docs/guides/prediction-files.md writes them without the harness.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import numpy as np

from harness.core.errors import PredictionError
from harness.core.hashing import array_sha256

FORMAT = "zsl-predictions/1"
FLOAT_DTYPES = (np.float16, np.float32, np.float64)


CHUNK_ROWS = 100_000
#: What a missing prediction file is told (after its path): how such files come to exist.
MISSING = (
    "prediction file not found; a predictions package's generator writes its files:"
    " `zsl submission generate PACKAGE --spec SPEC`"
)


@dataclass(frozen=True)
class Predictions:
    """Checked predictions: dense ``scores``, or a top-K file read in row chunks."""

    benchmark_hash: str
    class_order_hash: str
    setting: str
    sha256: str
    scores: np.ndarray | None = None
    topk_path: Path | None = None
    n_rows: int = 0

    def topk_chunks(
        self, chunk_rows: int = CHUNK_ROWS
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first row, indices, scores) per chunk, each row sorted by decreasing score."""
        assert self.topk_path is not None
        for start, indices, scores in _iter_topk(self.topk_path, chunk_rows):
            yield start, *_sort_rows(indices, scores)


def top_k_from_scores(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of every row and their scores, best first; a tie at the cut is
    refused.

    See docs/submission.md, `top_k_from_scores`.
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise PredictionError(f"top-K lists: K must be an integer >= 1; got {k!r}")
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise PredictionError(
            f"top-K lists: scores must be 2D (n_rows, n_candidates); got shape {scores.shape}"
        )
    n_rows, n_candidates = scores.shape
    cut = int(k) < n_candidates
    width = int(k) + 1 if cut else n_candidates
    negated = -scores
    part = (
        np.argpartition(negated, width - 1, axis=1)[:, :width]
        if width < n_candidates
        else np.broadcast_to(np.arange(n_candidates), (n_rows, n_candidates))
    )
    top = np.take_along_axis(scores, part, 1)
    order = np.lexsort((part, -top.astype(np.float64)), axis=1)
    indices = np.take_along_axis(part, order, 1).astype(np.int64)
    top = np.take_along_axis(top, order, 1)
    if cut:
        tied = top[:, k - 1] == top[:, k]
        if tied.any():
            row = int(np.argmax(tied))
            raise PredictionError(
                f"top-{k} lists: row {row}'s {_ordinal(k)} and {_ordinal(k + 1)} best scores tie"
                f" ({top[row, k - 1].item()!r}), so the list would depend on which tied class it"
                " keeps; break ties in the scores (e.g. add a tiny class-dependent offset) or"
                " choose another K"
            )
        indices, top = indices[:, :k], top[:, :k]
    return np.ascontiguousarray(indices), np.ascontiguousarray(top)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def write_predictions(
    path: Path,
    scores: np.ndarray | None = None,
    *,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
    topk_indices: np.ndarray | None = None,
    topk_scores: np.ndarray | None = None,
    top_k: int | None = None,
) -> Path:
    """Write dense ``scores`` (or ``topk_indices`` + ``topk_scores``) with the hashes they were
    made for; the format follows the suffix.

    With ``top_k`` and dense ``scores``, write the top-K lists cut from the scores by
    :func:`top_k_from_scores`, which refuses a row whose K-th and (K+1)-th scores tie. Top-K
    lists given directly must follow the same rule (docs/submission.md); nothing here can check
    it.
    """
    if top_k is not None:
        if scores is None or topk_indices is not None or topk_scores is not None:
            raise PredictionError(f"{path}: top_k cuts dense scores; give scores only")
        try:
            topk_indices, topk_scores = top_k_from_scores(scores, top_k)
        except PredictionError as err:
            raise PredictionError(f"{path}: {err}") from None
        scores = None
    if scores is not None:
        tensors = {"scores": np.ascontiguousarray(scores)}
    elif topk_indices is not None and topk_scores is not None:
        tensors = {
            "topk_indices": np.ascontiguousarray(topk_indices),
            "topk_scores": np.ascontiguousarray(topk_scores),
        }
    else:
        raise PredictionError(f"{path}: give scores, or topk_indices and topk_scores")
    meta = {
        "format": FORMAT,
        "benchmark_hash": benchmark_hash,
        "class_order_hash": class_order_hash,
        "setting": setting,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".safetensors":
        from safetensors.numpy import save

        tmp.write_bytes(_canonical_safetensors(save(tensors, metadata=meta)))
    elif path.suffix == ".npz":
        with tmp.open("wb") as handle:
            arrays = {**tensors, **{k: np.array(v) for k, v in meta.items()}}
            np.savez(handle, **arrays)  # type: ignore[arg-type]
    else:
        raise PredictionError(f"{path}: prediction files end in .safetensors or .npz")
    tmp.replace(path)
    return path


def _canonical_safetensors(data: bytes) -> bytes:
    """``data`` with its JSON header's metadata in sorted key order.

    safetensors keeps the metadata in a hash map whose order changes from process to process,
    so the same predictions would give files of different bytes, and a prediction-file package
    (hashed with its files) a different hash on every generation. The header is rewritten in
    place: reordering keys keeps its length, so the tensor offsets stay valid.
    """
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length], object_pairs_hook=dict)
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (length - len(text))  # safetensors pads the header with spaces
    if len(text) != length:  # never: same keys and values, other order
        raise PredictionError("safetensors header changed length when its keys were sorted")
    return data[:8] + text + data[8 + length :]


TENSORS = {"dense": ("scores",), "topk": ("topk_indices", "topk_scores")}
META_KEYS = ("benchmark_hash", "class_order_hash", "setting")

# Bounds checked before a byte of array data is read (a prediction file is untrusted input).
#: the largest float a score may be stored as (float64)
MAX_ITEMSIZE = 8
#: a .npy header; numpy's own reader refuses headers over 10000 bytes
NPY_HEADER_MAX = 16 * 1024
#: a metadata member: one string (a hash is 71 characters) in a .npy file
META_MEMBER_MAX = 4 * 1024
#: a zip's central directory: five members need a few hundred bytes
ZIP_DIRECTORY_MAX = 64 * 1024
#: a safetensors JSON header: a few tensors and four metadata strings
SAFETENSORS_HEADER_MAX = 64 * 1024
READ_CHUNK = 1 << 24
#: The members of a .npz prediction file, as ``write_predictions`` (``np.savez``) names them.
NPZ_MEMBERS = ("scores.npy", "format.npy", *(f"{key}.npy" for key in META_KEYS))
_SAFETENSORS_DTYPES = {
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "I8": "int8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
    "U8": "uint8",
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "BOOL": "bool",
}
_PICKLE_REFUSAL = (
    "refused (Object arrays cannot be loaded when allow_pickle=False);"
    " object arrays and pickles are never loaded"
)


#: Where the guide to writing prediction files elsewhere lives (messages point there).
GUIDE = "docs/guides/prediction-files.md"
#: Where each file format keeps its metadata, as the missing-metadata message says it.
META_PLACES = {
    ".safetensors": "from the safetensors header's __metadata__",
    ".npz": "from the .npz, whose metadata are one-string members named <key>.npy",
}


def _check_meta(path: Path, meta: Mapping[str, object], expected: dict[str, str]) -> None:
    """The file's metadata against the run's: every key of :data:`META_KEYS` present (all
    missing ones named), ``format``, when given, this contract's, then each value the run's.
    Other keys are the writer's own and ignored."""
    missing = [key for key in META_KEYS if key not in meta]
    if missing:
        raise PredictionError(
            f"{path}: metadata {', '.join(map(repr, missing))} missing"
            f" ({META_PLACES[path.suffix]}); every prediction file carries"
            f" {', '.join(META_KEYS[:-1])} and {META_KEYS[-1]} as strings, copied from the"
            f" task.json of its task bundle (`zsl data bundle SPEC --out DIR`); see {GUIDE}"
        )
    found = meta.get("format", FORMAT)
    if found != FORMAT:
        raise PredictionError(
            f"{path}: metadata 'format' is {found!r}, not {FORMAT!r}, the prediction-file"
            f" format this harness reads (write {FORMAT!r} or leave the key out); see {GUIDE}"
        )
    for key, want in expected.items():
        got = meta.get(key)
        if got != want:
            raise PredictionError(
                f"{path}: made for {key} {got!r}, but this run needs {want!r}."
                " Regenerate the file from the current task bundle."
            )


def _check_scores_header(
    path: Path, dtype: np.dtype | str, got_shape: tuple[int, ...], shape: tuple[int, int]
) -> None:
    """Dense scores' dtype and shape, from the file's header: checked before any data is read."""
    if not isinstance(dtype, np.dtype) or dtype.type not in FLOAT_DTYPES:
        raise PredictionError(f"{path}: scores must be float16/32/64; got dtype {dtype}")
    if tuple(got_shape) != shape:
        raise PredictionError(
            f"{path}: scores must have shape (n_test, n_candidates) = {shape};"
            f" got {tuple(got_shape)}"
        )


def _read_safetensors(
    path: Path, kind: str, expected: dict[str, str], shape: tuple[int, int], topk: int | None
) -> np.ndarray | None:
    """Check the header's size and the file's size before safetensors parses or maps it, then
    the keys, the metadata and (dense) the dtype and shape before the tensor is copied out.
    Top-K tensors are not read here: :func:`_check_topk` streams them."""
    from safetensors import SafetensorError, safe_open

    with path.open("rb") as handle:
        head = handle.read(8)
    if len(head) < 8:
        raise PredictionError(f"{path}: not a valid safetensors file (shorter than 8 bytes)")
    header_bytes = struct.unpack("<Q", head)[0]
    if header_bytes > SAFETENSORS_HEADER_MAX:
        raise PredictionError(
            f"{path}: not a valid safetensors file (its header claims {header_bytes} bytes,"
            f" more than the {SAFETENSORS_HEADER_MAX} a prediction file needs)"
        )
    n_rows, n_cols = shape
    cells = n_rows * n_cols if topk is None else 2 * n_rows * topk
    limit = 8 + header_bytes + cells * MAX_ITEMSIZE
    size = path.stat().st_size
    if size > limit:
        raise PredictionError(
            f"{path}: {size} bytes, more than {kind} predictions for shape {shape} can take"
            f" ({limit}); refused"
        )
    meta = _safetensors_metadata(path, header_bytes)
    wanted = TENSORS[kind]
    try:
        with safe_open(str(path), framework="numpy") as handle:
            keys = sorted(handle.keys())
            if keys != sorted(wanted):
                raise PredictionError(
                    f"{path}: expected tensors {list(wanted)} for {kind} predictions, found {keys}"
                )
            _check_meta(path, meta, expected)
            if kind == "topk":
                return None
            found = handle.get_slice("scores")
            name = _SAFETENSORS_DTYPES.get(found.get_dtype())
            _check_scores_header(
                path,
                np.dtype(name) if name else found.get_dtype().lower(),
                tuple(found.get_shape()),
                shape,
            )
            scores: np.ndarray = handle.get_tensor("scores")
            return scores
    except SafetensorError as err:
        raise PredictionError(f"{path}: not a valid safetensors file ({err})") from None


def _safetensors_metadata(path: Path, header_bytes: int) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors header (``header_bytes`` long, already bounded),
    read here rather than by safetensors, whose refusal of a value that is not a string is
    "invalid JSON in header" without the key; empty when the header has none."""
    with path.open("rb") as handle:
        handle.seek(8)
        text = handle.read(header_bytes)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:  # nesting: RecursionError
        raise PredictionError(
            f"{path}: not a valid safetensors file (its header is not JSON: {err})"
        ) from None
    if not isinstance(header, dict):
        raise PredictionError(
            f"{path}: not a valid safetensors file (its header is {_json_kind(header)},"
            " not a JSON object)"
        )
    meta = header.get("__metadata__")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise PredictionError(
            f"{path}: the safetensors header's __metadata__ is {_json_kind(meta)}; it must be"
            f" an object of strings (key -> value); see {GUIDE}"
        )
    for key, value in meta.items():
        if not isinstance(value, str):
            raise PredictionError(
                f"{path}: metadata {key!r} is {_json_kind(value)} ({json.dumps(value)[:80]});"
                f" safetensors metadata values are strings; see {GUIDE}"
            )
    return meta


def _json_kind(value: object) -> str:
    """What a JSON value is, for messages: ``a number``, ``a list``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


class _CappedReads:
    """A file whose single reads may not exceed ``cap`` bytes while the cap is set.

    ``zipfile`` reads the whole central directory in one ``read(size)``, with ``size`` taken
    from the archive's end record (or a zip64 record that overrides it): capping that read is
    what bounds the memory the directory can take, whatever the records claim.
    """

    def __init__(self, raw: BinaryIO, cap: int) -> None:
        self.raw = raw
        self.cap: int | None = cap

    def read(self, size: int = -1) -> bytes:
        if self.cap is not None:
            if size is None or size < 0:  # "to the end": that many bytes
                here = self.raw.tell()
                size = self.raw.seek(0, 2) - here
                self.raw.seek(here)
            if size > self.cap:
                raise _DirectoryTooLarge(size)
        return self.raw.read(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _DirectoryTooLarge(Exception):
    pass


def _npy_header(
    path: Path, name: str, handle: IO[bytes]
) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header length) of one .npy member: no data is read."""
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle, NPY_HEADER_MAX)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle, NPY_HEADER_MAX)
        else:
            raise PredictionError(
                f"{path}: member '{name}' is a .npy file of format version {version};"
                " only versions 1.0 and 2.0 are read"
            )
    except ValueError as err:
        raise PredictionError(f"{path}: member '{name}' is not a valid .npy file ({err})") from None
    if dtype.hasobject:
        raise PredictionError(f"{path}: {_PICKLE_REFUSAL}")
    return tuple(int(n) for n in shape), bool(fortran), dtype, handle.tell()


def _read_npz(path: Path, expected: dict[str, str], shape: tuple[int, int]) -> np.ndarray:
    """Read ``scores`` from a .npz, touching only the members the contract names.

    Before any array data is decompressed: the zip directory is bounded, every member name is
    one the writer makes (unknown ones are listed and refused, repeated ones refused), every
    member is stored or deflated, its declared uncompressed size is bounded by what it can
    legitimately hold, and its .npy header (no object dtype) must describe exactly that many
    bytes. Then the metadata is compared, then the scores' dtype and shape, and only then are
    the scores read, in chunks, into an array of the size the header (now known to match)
    gives. ``zipfile`` stops each member at its declared size and checks its CRC, so a member
    that decompresses to more than it declares is refused as corrupt without being inflated.
    """
    n_rows, n_cols = shape
    scores_max = NPY_HEADER_MAX + n_rows * n_cols * MAX_ITEMSIZE
    limits = {name: META_MEMBER_MAX for name in NPZ_MEMBERS} | {"scores.npy": scores_max}
    try:
        with path.open("rb") as raw:
            capped = _CappedReads(raw, ZIP_DIRECTORY_MAX)
            try:
                archive = zipfile.ZipFile(cast(IO[bytes], capped))
            except _DirectoryTooLarge as err:
                raise PredictionError(
                    f"{path}: its zip directory is {err.args[0]} bytes, more than the"
                    f" {ZIP_DIRECTORY_MAX} a prediction file's few members need; refused"
                ) from None
            capped.cap = None
            with archive:
                infos = archive.infolist()
                seen: set[str] = set()
                for info in infos:
                    # zipfile cuts a name at a NUL byte; the original name shows the trick
                    if info.orig_filename in seen:
                        raise PredictionError(
                            f"{path}: member '{info.orig_filename}' appears twice; refused"
                        )
                    seen.add(info.orig_filename)
                unknown = sorted(seen - set(NPZ_MEMBERS))
                if unknown:
                    raise PredictionError(
                        f"{path}: unexpected member(s) {', '.join(map(repr, unknown))}; a .npz"
                        f" prediction file holds only {', '.join(NPZ_MEMBERS)}; refused"
                    )
                if "scores.npy" not in seen:
                    found = sorted(name.removesuffix(".npy") for name in seen)
                    raise PredictionError(f"{path}: no 'scores' array (found {found})")
                headers = {}
                for info in infos:
                    headers[info.filename] = _npz_member_header(
                        path, archive, info, limits[info.filename]
                    )
                meta = {}
                for name, (member_shape, _, dtype, _) in headers.items():
                    if name == "scores.npy":
                        continue
                    if dtype.kind != "U" or member_shape != ():
                        raise PredictionError(
                            f"{path}: member '{name}' must hold one string; got dtype {dtype},"
                            f" shape {member_shape}"
                        )
                    with archive.open(name) as handle:
                        handle.seek(headers[name][3])
                        text = handle.read(dtype.itemsize)
                    meta[name.removesuffix(".npy")] = str(np.frombuffer(text, dtype)[0])
                _check_meta(path, meta, expected)
                got_shape, fortran, dtype, header_end = headers["scores.npy"]
                _check_scores_header(path, dtype, got_shape, shape)
                with archive.open("scores.npy") as handle:
                    handle.seek(header_end)
                    return _read_array_data(path, handle, got_shape, fortran, dtype)
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError, RuntimeError) as err:
        raise PredictionError(f"{path}: not a valid .npz file ({err})") from None


def _npz_member_header(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int
) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    name = info.filename
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise PredictionError(
            f"{path}: member '{name}' uses zip compression method {info.compress_type}; only"
            " stored and deflated members (what numpy.savez and savez_compressed write) are read"
        )
    if info.file_size > limit:
        raise PredictionError(
            f"{path}: member '{name}' declares {info.file_size} bytes uncompressed, more than"
            f" it can hold ({limit} bytes); refused"
        )
    with archive.open(info) as handle:
        shape, fortran, dtype, header_end = _npy_header(path, name, handle)
    described = header_end + math.prod(shape) * dtype.itemsize
    if described != info.file_size:
        raise PredictionError(
            f"{path}: member '{name}' holds {info.file_size} bytes, but its .npy header"
            f" describes {described} (shape {shape}, dtype {dtype}); refused"
        )
    return shape, fortran, dtype, header_end


def _read_array_data(
    path: Path, handle: IO[bytes], shape: tuple[int, ...], fortran: bool, dtype: np.dtype
) -> np.ndarray:
    flat = np.empty(math.prod(shape), dtype=dtype)
    buffer = flat.view(np.uint8).data  # writable, no copy
    done = 0
    while done < len(buffer):
        chunk = handle.read(min(READ_CHUNK, len(buffer) - done))
        if not chunk:
            raise PredictionError(f"{path}: member 'scores.npy' ends before its data does")
        buffer[done : done + len(chunk)] = chunk
        done += len(chunk)
    if fortran:
        return np.ascontiguousarray(flat.reshape(shape[::-1]).T)
    return flat.reshape(shape)


def read_predictions(
    path: Path,
    *,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
    shape: tuple[int, int],
    topk: int | None = None,
    name: str | None = None,
) -> Predictions:
    """Read and check one prediction file for (benchmark, setting).

    ``shape`` is (n_test, n_candidates); ``topk`` is K for top-K files (None: dense). Only the
    members the contract names are read, each bounded by the size ``shape`` allows before it
    is read; see :func:`_read_npz` and :func:`_read_safetensors`. ``name``: what messages call
    the file (a package's files by their path in the package,
    :meth:`harness.submission.package.Package.display_name`); default: ``path``.
    """
    try:
        return _read_predictions(path, benchmark_hash, class_order_hash, setting, shape, topk)
    except PredictionError as err:
        text = str(err)
        if name is None or not text.startswith(f"{path}: "):
            raise
        raise PredictionError(name + text[len(str(path)) :]) from None


def _read_predictions(
    path: Path,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
    shape: tuple[int, int],
    topk: int | None,
) -> Predictions:
    expected = {
        "benchmark_hash": benchmark_hash,
        "class_order_hash": class_order_hash,
        "setting": setting,
    }
    kind = "dense" if topk is None else "topk"
    if not path.is_file():
        raise PredictionError(f"{path}: {MISSING}")
    if path.suffix == ".safetensors":
        scores = _read_safetensors(path, kind, expected, shape, topk)
    elif path.suffix == ".npz":
        if topk is not None:
            raise PredictionError(f"{path}: top-K predictions are read from .safetensors files")
        scores = _read_npz(path, expected, shape)
    else:
        raise PredictionError(f"{path}: prediction files end in .safetensors or .npz")
    if topk is not None:
        return _check_topk(path, expected, shape, topk)
    assert scores is not None
    if not np.isfinite(scores.sum(dtype=np.float64)):
        bad_rows = np.flatnonzero(~np.isfinite(scores).all(axis=1))
        if len(bad_rows):
            row = int(bad_rows[0])
            col = int(np.flatnonzero(~np.isfinite(scores[row]))[0])
            raise PredictionError(
                f"{path}: setting {setting}, row {row}, column {col}: score"
                f" {scores[row, col].item()} is not finite ({len(bad_rows)} row(s) hold NaN or"
                " inf); scores must be finite numbers (rows in the setting's frozen test order,"
                " columns in its candidate order)"
            )
    return Predictions(
        benchmark_hash,
        class_order_hash,
        setting,
        array_sha256(scores),
        scores=scores,
        n_rows=shape[0],
    )


def _iter_topk(path: Path, chunk_rows: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        indices, scores = handle.get_slice("topk_indices"), handle.get_slice("topk_scores")
        n_rows = indices.get_shape()[0]
        for start in range(0, n_rows, chunk_rows):
            stop = min(start + chunk_rows, n_rows)
            yield start, indices[start:stop], scores[start:stop]


def _sort_rows(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order each row by decreasing score; equal scores keep the smaller column first."""
    order = np.lexsort((indices, -scores.astype(np.float64)), axis=1)
    return np.take_along_axis(indices, order, 1), np.take_along_axis(scores, order, 1)


def _check_topk(path: Path, meta: dict[str, str], shape: tuple[int, int], k: int) -> Predictions:
    """One streamed pass: shapes, dtypes, range, duplicates, finiteness; hash of the content."""
    from safetensors import safe_open

    n_rows, n_candidates = shape
    with safe_open(str(path), framework="numpy") as handle:
        got = {
            name: (handle.get_slice(name).get_shape(), handle.get_slice(name).get_dtype())
            for name in ("topk_indices", "topk_scores")
        }
    for name, (got_shape, _dtype) in got.items():
        if tuple(got_shape) != (n_rows, k):
            raise PredictionError(
                f"{path}: {name} must have shape (n_test, K) = {(n_rows, k)};"
                f" got {tuple(got_shape)}"
            )
    if not got["topk_indices"][1].startswith(("I", "U")):
        raise PredictionError(
            f"{path}: topk_indices must be integers; got {got['topk_indices'][1]}"
        )
    if got["topk_scores"][1] not in ("F16", "F32", "F64"):
        raise PredictionError(f"{path}: topk_scores must be floats; got {got['topk_scores'][1]}")
    digest = hashlib.sha256(f"topk;{n_rows};{k}".encode())
    for start, indices, scores in _iter_topk(path, CHUNK_ROWS):
        bad = (indices < 0) | (indices >= n_candidates)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            raise PredictionError(
                f"{path}: topk_indices out of range [0, {n_candidates}) first at row"
                f" {start + row}: {indices[row][bad[row]][0]}"
            )
        ordered = np.sort(indices, axis=1)
        dup = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if dup.any():
            row = int(np.flatnonzero(dup)[0])
            raise PredictionError(
                f"{path}: topk_indices repeat a candidate in row {start + row}"
                f" ({int(dup.sum())} row(s) in this chunk)"
            )
        finite = np.isfinite(scores).all(axis=1)
        if not finite.all():
            row = int(np.flatnonzero(~finite)[0])
            place = int(np.flatnonzero(~np.isfinite(scores[row]))[0])
            raise PredictionError(
                f"{path}: setting {meta['setting']}, row {start + row}, column"
                f" {int(indices[row, place])}: topk_scores holds {scores[row, place].item()},"
                f" which is not finite (place {place} of the row's top-{k} list); scores must"
                " be finite numbers"
            )
        sorted_indices, sorted_scores = _sort_rows(indices.astype(np.int64), scores)
        digest.update(sorted_indices.tobytes())
        digest.update(sorted_scores.astype("<f4").tobytes())
    return Predictions(
        meta["benchmark_hash"],
        meta["class_order_hash"],
        meta["setting"],
        "sha256:" + digest.hexdigest(),
        topk_path=path,
        n_rows=n_rows,
    )
