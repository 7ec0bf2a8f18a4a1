"""Row access to the compressed sparse rows (CSR) the hierarchy keeps its edges and ancestors in.

Shared by the DAG's own construction (levels, ancestor matrix) and its LCA queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["gather_rows"]

IntArray = npt.NDArray[np.int64]


def gather_rows(
    indptr: IntArray, indices: npt.NDArray[Any], rows: IntArray
) -> tuple[IntArray, IntArray]:
    """Concatenate CSR rows ``rows``: return ``(owner, values)`` where owner[k] is the position in
    ``rows`` the k-th value came from (owners ascend, so each row's values are contiguous)."""
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    total = int(lengths.sum())
    owner = np.repeat(np.arange(rows.size, dtype=np.int64), lengths)
    offsets = np.cumsum(lengths) - lengths
    values = indices[np.arange(total, dtype=np.int64) - offsets[owner] + starts[owner]]
    return owner, values.astype(np.int64, copy=False)
