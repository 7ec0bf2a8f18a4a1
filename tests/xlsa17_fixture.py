"""xlsa17 releases for the tests: the real split files from the shared data, synthetic features.

The official ``res101.mat`` is not available to the tests, so :func:`make_release` copies the
real ``att_splits.mat`` and class lists of a dataset into a test folder and writes a synthetic
``res101.mat`` there with :mod:`harness.data.xlsa17_synthetic` — the module behind
``zsl data synthetic-xlsa17``, whose docstring says how the features are made.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.io as sio

from harness.data.xlsa17 import DATASETS
from harness.data.xlsa17_synthetic import copy_split_files, write_synthetic_res101

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ZSL_SHARED_DATA", REPO.parent / "shared" / "data"))
XLSA17 = SHARED_DATA / "xlsa17"

__all__ = ["DATASETS", "XLSA17", "make_release"]


def make_release(
    root: str | os.PathLike[str],
    dataset: str,
    *,
    dim: int = 64,
    seed: int = 0,
    one_image_in: int = 1,
) -> Path:
    """``root/dataset`` with the real att_splits.mat + class lists and a synthetic res101.mat.

    ``one_image_in=k`` keeps every k-th image of the release only (:func:`keep_every_kth_image`):
    the same classes in the same roles, a k-th of the images, for tests whose cost grows with
    the images (the reference methods against their previous code).
    """
    dataset_dir = copy_split_files(XLSA17, root, dataset)
    if one_image_in > 1:
        keep_every_kth_image(dataset_dir / "att_splits.mat", one_image_in)
    write_synthetic_res101(dataset_dir, dataset, seed=seed, dim=dim)
    return dataset_dir


def keep_every_kth_image(att_splits: Path, k: int) -> None:
    """Rewrite ``att_splits`` with only the images 0, k, 2k, ... of the release, numbered
    1..n again in their order: each ``*_loc`` vector keeps the images it had among them, so
    every relation between the vectors (train and val make trainval, test seen and unseen are
    apart) holds as in the release."""
    att = sio.loadmat(att_splits)
    kept = {key: value for key, value in att.items() if not key.startswith("__")}
    for key in [key for key in kept if key.endswith("_loc")]:
        loc = np.asarray(kept[key]).astype(np.int64).ravel() - 1  # 0-based, as the release's
        loc = loc[loc % k == 0]
        kept[key] = (loc // k + 1).reshape(-1, 1).astype(att[key].dtype)
    sio.savemat(att_splits, kept)
