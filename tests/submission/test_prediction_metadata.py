"""Prediction files made without the harness (issue 29, item 4): a file lacking the harness's
metadata, or holding it in another form, is refused with the keys it lacks and the file's name,
never "made for benchmark_hash None"."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from harness.core.errors import PredictionError
from harness.submission.predictions import read_predictions, write_predictions
from tests import hostile

META = {"benchmark_hash": "sha256:b", "class_order_hash": "sha256:c", "setting": "zsl"}
SCORES = np.zeros((4, 3), np.float32)
HOW = (
    "every prediction file carries benchmark_hash, class_order_hash and setting as strings,"
    " copied from the task.json of its task bundle (`zsl data bundle SPEC --out DIR`); see"
    " docs/guides/prediction-files.md"
)
IN_SAFETENSORS = "from the safetensors header's __metadata__"
IN_NPZ = "from the .npz, whose metadata are one-string members named <key>.npy"


def _refusal(path: Path) -> str:
    with pytest.raises(PredictionError) as info:
        read_predictions(path, shape=(4, 3), **META)
    return str(info.value)


def _header_file(path: Path, metadata: object) -> Path:
    """A safetensors file of SCORES whose header's ``__metadata__`` is ``metadata`` as given
    (safetensors' own writer takes strings only)."""
    header = {
        "__metadata__": metadata,
        "scores": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, SCORES.nbytes]},
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + SCORES.tobytes())
    return path


@pytest.mark.parametrize(
    ("metadata", "missing"),
    [
        (None, "'benchmark_hash', 'class_order_hash', 'setting'"),  # a plain safetensors file
        ({"format": "pt"}, "'benchmark_hash', 'class_order_hash', 'setting'"),
        ({"setting": "zsl"}, "'benchmark_hash', 'class_order_hash'"),
        ({k: v for k, v in META.items() if k != "class_order_hash"}, "'class_order_hash'"),
    ],
)
def test_safetensors_without_the_metadata_names_the_missing_keys(
    tmp_path: Path, metadata: dict[str, str] | None, missing: str
) -> None:
    path = tmp_path / "demo.zsl.safetensors"
    save_file({"scores": SCORES}, str(path), metadata=metadata)
    assert _refusal(path) == f"{path}: metadata {missing} missing ({IN_SAFETENSORS}); {HOW}"


def test_npz_without_the_metadata_names_the_missing_members(tmp_path: Path) -> None:
    bare = tmp_path / "bare.npz"
    np.savez(bare, scores=SCORES)
    assert _refusal(bare) == (
        f"{bare}: metadata 'benchmark_hash', 'class_order_hash', 'setting' missing ({IN_NPZ});"
        f" {HOW}"
    )
    partial = hostile.npz_members(
        tmp_path / "partial.npz",
        [("scores.npy", SCORES), *hostile.meta_members({"setting": "zsl"})],
    )
    assert _refusal(partial) == (
        f"{partial}: metadata 'benchmark_hash', 'class_order_hash' missing ({IN_NPZ}); {HOW}"
    )


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            {**META, "setting": 5},
            "metadata 'setting' is a number (5); safetensors metadata values are strings; see"
            " docs/guides/prediction-files.md",
        ),
        (
            {**META, "benchmark_hash": None},
            "metadata 'benchmark_hash' is null (null); safetensors metadata values are strings;"
            " see docs/guides/prediction-files.md",
        ),
        (
            ["benchmark_hash", "sha256:b"],
            "the safetensors header's __metadata__ is a list; it must be an object of strings"
            " (key -> value); see docs/guides/prediction-files.md",
        ),
    ],
)
def test_metadata_that_are_not_strings_are_named(
    tmp_path: Path, metadata: object, message: str
) -> None:
    path = _header_file(tmp_path / "p.safetensors", metadata)
    assert _refusal(path) == f"{path}: {message}"


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_wrong_metadata_values_name_the_value(tmp_path: Path, suffix: str) -> None:
    path = write_predictions(tmp_path / f"p{suffix}", SCORES, **{**META, "setting": "gzsl"})
    assert _refusal(path) == (
        f"{path}: made for setting 'gzsl', but this run needs 'zsl'. Regenerate the file from"
        " the current task bundle."
    )
    other_format = tmp_path / "other.safetensors"
    save_file({"scores": SCORES}, str(other_format), metadata={**META, "format": "pt"})
    assert _refusal(other_format) == (
        f"{other_format}: metadata 'format' is 'pt', not 'zsl-predictions/1', the"
        " prediction-file format this harness reads (write 'zsl-predictions/1' or leave the"
        " key out); see docs/guides/prediction-files.md"
    )
    # ``format`` is optional, and keys of the writer's own are ignored
    mine = tmp_path / "mine.safetensors"
    save_file({"scores": SCORES}, str(mine), metadata={**META, "model": "ridge, lambda=1"})
    np.testing.assert_array_equal(read_predictions(mine, shape=(4, 3), **META).scores, SCORES)


def test_files_that_are_not_safetensors_are_named(tmp_path: Path) -> None:
    npy = tmp_path / "scores.safetensors"  # a .npy under the wrong name
    with npy.open("wb") as handle:
        np.save(handle, SCORES)
    claimed = struct.unpack("<Q", npy.read_bytes()[:8])[0]
    assert _refusal(npy) == (
        f"{npy}: not a valid safetensors file (its header claims {claimed} bytes, more than the"
        " 65536 a prediction file needs)"
    )
    text = tmp_path / "text.safetensors"
    text.write_bytes(struct.pack("<Q", 16) + b"zsl top1 = 0.97\n")
    assert _refusal(text).startswith(
        f"{text}: not a valid safetensors file (its header is not JSON: "
    )
    nested = tmp_path / "nested.safetensors"  # deeper than the JSON decoder recurses
    nested.write_bytes(struct.pack("<Q", 60_000) + b"[" * 60_000)
    assert _refusal(nested).startswith(
        f"{nested}: not a valid safetensors file (its header is not JSON: "
    )
    array = tmp_path / "array.safetensors"
    array.write_bytes(struct.pack("<Q", 8) + b"[1, 2]  ")
    assert _refusal(array) == (
        f"{array}: not a valid safetensors file (its header is a list, not a JSON object)"
    )
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"zsl")
    assert _refusal(short) == f"{short}: not a valid safetensors file (shorter than 8 bytes)"
    torch_like = tmp_path / "scores.pt"
    torch_like.write_bytes(b"PK\x03\x04")
    assert _refusal(torch_like) == f"{torch_like}: prediction files end in .safetensors or .npz"
