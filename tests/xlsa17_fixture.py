"""xlsa17 releases for the tests: the real split files from the shared data, synthetic features.

The official ``res101.mat`` is not available to the tests, so :func:`make_release` copies the
real ``att_splits.mat`` and class lists of a dataset into a test folder and writes a synthetic
``res101.mat`` there with :mod:`harness.data.xlsa17_synthetic` — the module behind
``zsl data synthetic-xlsa17``, whose docstring says how the features are made.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.data.xlsa17 import DATASETS
from harness.data.xlsa17_synthetic import copy_split_files, write_synthetic_res101

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ZSL_SHARED_DATA", REPO.parent / "shared" / "data"))
XLSA17 = SHARED_DATA / "xlsa17"

__all__ = ["DATASETS", "XLSA17", "make_release"]


def make_release(
    root: str | os.PathLike[str], dataset: str, *, dim: int = 64, seed: int = 0
) -> Path:
    """``root/dataset`` with the real att_splits.mat + class lists and a synthetic res101.mat."""
    dataset_dir = copy_split_files(XLSA17, root, dataset)
    write_synthetic_res101(dataset_dir, dataset, seed=seed, dim=dim)
    return dataset_dir
