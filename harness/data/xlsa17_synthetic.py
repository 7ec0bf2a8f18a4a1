"""Synthetic ``res101.mat`` features for the real xlsa17 split files: try the GBU benchmarks
end to end without the 1 GB release.

The xlsa17 release (Xian et al., GBU) pairs ``att_splits.mat`` (class attributes, split index
vectors) and class lists with ``res101.mat`` (ResNet-101 features of every image). The split
files are small; the features are what takes the download. :func:`write_synthetic_res101`
writes a ``res101.mat`` in exactly the release's layout — MATLAB 5 file, ``features`` D×N
double, ``labels`` N×1 double (1-based class numbers into ``allclasses_names``), ``image_files``
N×1 cell of strings — that fits the *real* ``att_splits.mat`` and class lists beside it.

See docs/data.md.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.io as sio

from harness.core.errors import HarnessError
from harness.data.xlsa17 import DATASETS, SYNTHETIC_PREFIX

__all__ = [
    "copy_split_files",
    "synthetic_release",
    "write_synthetic_res101",
]


def _class_list(dataset_dir: Path, name: str, index: dict[str, int]) -> list[int]:
    lines = (dataset_dir / name).read_text().splitlines()
    return [index[line.strip()] for line in lines if line.strip()]


def _deal(n: int, classes: list[int], rng: np.random.Generator) -> np.ndarray:
    """Classes of ``n`` images: dealt round-robin over ``classes``, both in seeded orders."""
    order = rng.permutation(np.asarray(classes, dtype=np.int64))
    return order[rng.permutation(n) % len(order)]


def _labels(att: dict, dataset_dir: Path, rng: np.random.Generator) -> np.ndarray:
    """0-based class of every image, consistent with the loc vectors and class lists."""
    names = [str(np.asarray(n).squeeze()) for n in np.atleast_1d(att["allclasses_names"])]
    index = {n: i for i, n in enumerate(names)}
    locs = {k: np.atleast_1d(att[k]).astype(np.int64) - 1 for k in att if k.endswith("_loc")}
    n_images = int(max(v.max() for v in locs.values())) + 1
    labels = np.full(n_images, -1, np.int64)
    unseen = _class_list(dataset_dir, "testclasses.txt", index)
    trainval = _class_list(dataset_dir, "trainvalclasses.txt", index)
    is_trainval = np.zeros(n_images, bool)
    is_trainval[locs["trainval_loc"]] = True
    seen_images = np.union1d(locs["trainval_loc"], locs["test_seen_loc"])
    groups: list[tuple[np.ndarray, list[int]]] = []
    if "train_loc" in locs and "val_loc" in locs:
        for loc, name in (("train_loc", "trainclasses1.txt"), ("val_loc", "valclasses1.txt")):
            groups.append(
                (np.intersect1d(locs[loc], seen_images), _class_list(dataset_dir, name, index))
            )
        covered = np.union1d(locs["train_loc"], locs["val_loc"])
        rest = np.setdiff1d(seen_images, covered)
        if rest.size:
            groups.append((rest, trainval))
    else:
        groups.append((seen_images, trainval))
    for images, classes in groups:
        for part in (images[is_trainval[images]], images[~is_trainval[images]]):
            if part.size:
                labels[part] = _deal(part.size, classes, rng)
    labels[locs["test_unseen_loc"]] = _deal(locs["test_unseen_loc"].size, unseen, rng)
    unused = np.flatnonzero(labels < 0)
    if unused.size:  # indices no loc vector names (none in the real release)
        labels[unused] = rng.integers(0, len(names), unused.size)
    return labels


def write_synthetic_res101(
    dataset_dir: str | os.PathLike[str],
    dataset: str,
    seed: int = 0,
    dim: int = 2048,
    *,
    noise: float | None = None,
    dtype: str = "float64",
    path: str | os.PathLike[str] | None = None,
) -> Path:
    """Write a **synthetic** ``res101.mat`` for the ``att_splits.mat`` and class lists in
    ``dataset_dir`` (the release's layout; see docs/data.md).

    See docs/data.md, `write_synthetic_res101`.
    """
    dataset_dir = Path(dataset_dir)
    att = sio.loadmat(dataset_dir / "att_splits.mat", squeeze_me=True)
    rng = np.random.Generator(np.random.PCG64(seed))
    labels = _labels(att, dataset_dir, rng)
    names = [str(np.asarray(n).squeeze()) for n in np.atleast_1d(att["allclasses_names"])]
    attributes = np.asarray(att["att"], dtype=np.float64)  # dims × C
    w = rng.standard_normal((dim, attributes.shape[0]))
    bias = 0.5 * rng.standard_normal((dim, 1))
    prototypes = w @ attributes + bias  # D × C
    sigma = 0.5 * np.sqrt(dim / 64) if noise is None else noise
    n = len(labels)
    features = np.empty((dim, n), dtype=dtype)
    block = 4096
    for start in range(0, n, block):
        stop = min(n, start + block)
        x = prototypes[:, labels[start:stop]] + sigma * rng.standard_normal((dim, stop - start))
        features[:, start:stop] = np.maximum(x, 0.0)
    image_files = np.empty((n, 1), dtype=object)
    counters: dict[int, int] = {}
    for i, c in enumerate(labels.tolist()):
        counters[c] = counters.get(c, 0) + 1
        image_files[i, 0] = (
            f"{SYNTHETIC_PREFIX}/{dataset}/JPEGImages/{names[c]}/{names[c]}_{counters[c]:05d}.jpg"
        )
    out = Path(path) if path is not None else dataset_dir / "res101.mat"
    sio.savemat(
        out,
        {
            "features": features,
            "labels": (labels + 1).astype(np.float64).reshape(n, 1),
            "image_files": image_files,
        },
        format="5",
        do_compression=False,
    )
    return out


def copy_split_files(
    source: str | os.PathLike[str], out: str | os.PathLike[str], dataset: str
) -> Path:
    """Copy ``att_splits.mat`` and the class lists of ``dataset`` from ``source/dataset`` to
    ``out/dataset``.

    Raises
    ------
    HarnessError
        ``source/dataset`` has no ``att_splits.mat``.
    """
    src = Path(source) / dataset
    if not (src / "att_splits.mat").is_file():
        raise HarnessError(
            f"{src / 'att_splits.mat'} not found: --source must be a folder holding the xlsa17"
            f" release's split files ({dataset}/att_splits.mat and the class lists), e.g. the"
            " unpacked xlsa17.zip without res101.mat"
        )
    dst = Path(out) / dataset
    dst.mkdir(parents=True, exist_ok=True)
    for item in sorted(src.iterdir()):
        if item.name == "att_splits.mat" or item.suffix == ".txt":
            shutil.copyfile(item, dst / item.name)
    return dst


def synthetic_release(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    datasets: Sequence[str] = DATASETS,
    *,
    dim: int = 2048,
    seed: int = 0,
) -> list[Path]:
    """``out/<dataset>`` for each of ``datasets``: the real split files from ``source`` and a
    synthetic ``res101.mat`` (``dim``-d: the shipped specs declare the release's 2048), plus
    ``out/SYNTHETIC.txt`` saying what they are.

    Point ``ZSL_XLSA17_DIR`` at ``out`` to run the ``specs/xlsa17/*`` benchmarks on them.
    """
    unknown = [d for d in datasets if d not in DATASETS]
    if unknown:
        raise HarnessError(
            f"unknown xlsa17 dataset {', '.join(unknown)}; choose from {', '.join(DATASETS)}"
        )
    if dim < 1:
        raise HarnessError(f"--dim must be at least 1, not {dim}")
    made = []
    for dataset in datasets:
        folder = copy_split_files(source, out, dataset)
        write_synthetic_res101(folder, dataset, seed=seed, dim=dim)
        made.append(folder)
    (Path(out) / "SYNTHETIC.txt").write_text(
        "The res101.mat files here are SYNTHETIC features written by `zsl data synthetic-xlsa17`"
        f" (dimension {dim}, seed {seed}) for the real xlsa17 split files beside them.\n"
        "They show that a pipeline runs end to end; their scores say nothing about a method.\n",
        encoding="utf-8",
    )
    return made
