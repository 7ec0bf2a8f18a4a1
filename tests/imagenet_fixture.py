"""Tiny user feature directories in the documented ImageNet format (specs/imagenet/README.md).

``write_user_features`` writes ``features.npy`` (float16 by default), ``labels.npy`` (int32),
``wnids.txt`` and ``class_embeddings.npy`` for a few images of a few classes, with labels
indexing a class list that covers every class the ImageNet splits can name (fall 2011 plus the
ILSVRC-2012 classes), so the splits keep their full sizes while only a handful of classes have
images. Rows are sorted by class, as real extraction scripts often write them, so tests can
check that the adapter shuffles them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
#: The shared ImageNet lists directory and the files the ImageNet tests read from it.
SHARED_LISTS = SHARED_DATA / "imagenet"
LIST_FILES = (
    "ilsvrc2012_synsets.txt",
    "fall11_wnids.txt",
    "goz_v1_test_wnids.txt",
    "wordnet.is_a.txt",
    "words.txt",
)


def shared_lists() -> Path:
    """The shared ImageNet lists directory; the calling test skips, naming what is missing."""
    missing = [f for f in LIST_FILES if not (SHARED_LISTS / f).is_file()]
    if missing:
        pytest.skip(
            f"ImageNet lists not found under {SHARED_LISTS} ({', '.join(missing)});"
            " set ZSL_SHARED_DATA"
        )
    return SHARED_LISTS


def all_wnids(lists_dir: Path) -> list[str]:
    """Every wnid of ``fall11_wnids.txt`` and ``ilsvrc2012_synsets.txt``, sorted."""
    fall11 = (lists_dir / "fall11_wnids.txt").read_text().split()
    ilsvrc = [
        line.split()[0]
        for line in (lists_dir / "ilsvrc2012_synsets.txt").read_text().splitlines()
        if line.strip()
    ]
    return sorted({*fall11, *ilsvrc})


def write_user_features(
    root: Path,
    wnids: Sequence[str],
    image_classes: Sequence[str],
    *,
    images_per_class: int = 5,
    dim: int = 8,
    embedding_dim: int = 4,
    dtype: Any = np.float16,
    seed: int = 0,
    extra_embeddings: Iterable[str] = (),
) -> dict[str, Any]:
    """Write a feature directory at ``root``; return what was written.

    ``wnids`` is the class list (``wnids.txt``); ``image_classes`` the classes that get
    ``images_per_class`` images each. Features are a per-class prototype plus noise.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    position = {w: i for i, w in enumerate(wnids)}
    labels = np.repeat([position[w] for w in image_classes], images_per_class).astype(np.int32)
    prototypes = rng.normal(size=(len(wnids), dim))
    features = prototypes[labels] + 0.1 * rng.normal(size=(labels.size, dim))
    np.save(root / "features.npy", features.astype(dtype))
    np.save(root / "labels.npy", labels)
    (root / "wnids.txt").write_text("".join(f"{w}\n" for w in wnids))
    embeddings = rng.normal(size=(len(wnids), embedding_dim)).astype(np.float32)
    np.save(root / "class_embeddings.npy", embeddings)
    for name in extra_embeddings:
        np.save(root / f"class_embeddings.{name}.npy", embeddings[:, ::-1].copy())
    return {
        "features": features.astype(dtype).astype(np.float32),
        "labels": labels,
        "embeddings": embeddings,
        "position": position,
    }


def write_counts(path: Path, counts: Mapping[str, int]) -> Path:
    """A ``wnid<TAB>count`` file with a comment line."""
    lines = ["# wnid\tcount"] + [f"{w}\t{c}" for w, c in counts.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def spec_copy(
    tmp_path: Path,
    name: str,
    *,
    params: Mapping[str, Any],
    dim: int = 8,
    embedding_dim: int = 4,
    drop: Iterable[str] = (),
    edit: Mapping[str, Any] | None = None,
) -> Path:
    """``specs/imagenet/<name>.yaml`` with the fixture's dimensions and ``params`` merged in."""
    data = yaml.safe_load((REPO / "specs" / "imagenet" / f"{name}.yaml").read_text())
    data["data"]["params"].update(params)
    data["features"]["dim"] = dim
    data["class_embeddings"][0]["dim"] = embedding_dim
    for key in drop:
        data["splits"].pop(key, None)
    for key, value in (edit or {}).items():
        data[key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
