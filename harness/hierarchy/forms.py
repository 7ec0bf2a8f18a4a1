"""The stored forms of a :class:`~harness.hierarchy.dag.Hierarchy`: its JSON file, its arrays,
and its content hash.

The JSON file is what a spec freezes (``specs/*/hierarchy.json``): nodes sorted by id, edges
sorted, one-space indent and sorted keys, so that diffs review well. The arrays are plain numpy
arrays (no object dtype), safe for ``np.save`` without pickle. The content hash leaves the
provenance (``source``) out, so the same graph built by another tool version hashes the same.
Each reader checks the shape of what it reads and says what is wrong where; the graph itself is
checked by the :class:`Hierarchy` these forms are handed to.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from harness.core.atomic import write_text_atomic
from harness.core.errors import HierarchyError
from harness.core.textio import read_text_file

if TYPE_CHECKING:
    from harness.hierarchy.dag import Hierarchy

__all__ = [
    "FORMAT",
    "content_hash",
    "parse_arrays",
    "parse_dict",
    "read_json",
    "save_json",
    "to_arrays",
    "to_dict",
    "to_json",
]

#: The ``format`` tag of a hierarchy JSON file.
FORMAT = "zsl-hierarchy/1"


def to_dict(hierarchy: Hierarchy) -> dict[str, Any]:
    """The JSON-ready form: ``{"format", "source", "nodes", "edges"}``."""
    ids = hierarchy.node_ids.tolist()
    return {
        "format": FORMAT,
        "source": hierarchy.source,
        "nodes": [
            {"id": i, "name": nm} for i, nm in zip(ids, hierarchy.names.tolist(), strict=True)
        ],
        "edges": [[ids[p], ids[c]] for p, c in hierarchy.edges.tolist()],
    }


def parse_dict(d: Any, where: str) -> tuple[list[str], list[tuple[str, str]], list[str], str]:
    """Node ids, edges, names and source of a :func:`to_dict` form, its shape checked (errors
    start with ``where``)."""
    if not isinstance(d, Mapping):
        raise HierarchyError(f"{where}: expected a JSON object; got {type(d).__name__}")
    expected = {"format", "source", "nodes", "edges"}
    missing = sorted(expected - set(d))
    extra = sorted(set(d) - expected)
    if missing or extra:
        parts = [f"missing key(s) {missing}"] if missing else []
        parts += [f"unknown key(s) {extra}"] if extra else []
        raise HierarchyError(f"{where}: {' and '.join(parts)}; expected keys {sorted(expected)}")
    if d["format"] != FORMAT:
        raise HierarchyError(f"{where}: format is {d['format']!r}; this harness reads {FORMAT!r}")
    if not isinstance(d["source"], str):
        raise HierarchyError(f"{where}: source must be a string; got {d['source']!r}")
    nodes, edges = d["nodes"], d["edges"]
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise HierarchyError(f"{where}: nodes and edges must be lists")
    ids: list[str] = []
    names: list[str] = []
    for pos, node in enumerate(nodes):
        if (
            not isinstance(node, Mapping)
            or set(node) != {"id", "name"}
            or not isinstance(node["id"], str)
            or not isinstance(node["name"], str)
        ):
            raise HierarchyError(
                f'{where}: nodes[{pos}] must be {{"id": str, "name": str}}; got {node!r}'
            )
        ids.append(node["id"])
        names.append(node["name"])
    for pos, edge in enumerate(edges):
        if (
            not isinstance(edge, list)
            or len(edge) != 2
            or not all(isinstance(x, str) for x in edge)
        ):
            raise HierarchyError(
                f"{where}: edges[{pos}] must be [parent_id, child_id]; got {edge!r}"
            )
    return ids, [(p, c) for p, c in edges], names, d["source"]


def to_json(hierarchy: Hierarchy) -> str:
    """The file text of :func:`save_json` (indent 1, sorted keys, final newline)."""
    return json.dumps(to_dict(hierarchy), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def save_json(hierarchy: Hierarchy, path: str | os.PathLike[str]) -> None:
    """Write :func:`to_json` to ``path`` atomically (temporary file, then rename)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise HierarchyError(
            f"cannot write {target}: directory {target.parent} does not exist; create it first"
        )
    write_text_atomic(target, to_json(hierarchy), make_parents=False)


def read_json(path: Path) -> Any:
    """The parsed JSON of a hierarchy file; errors name the file and the problem."""
    text = read_text_file(
        path,
        HierarchyError,
        missing=f"{path}: no such hierarchy file",
        unreadable=lambda err: f"{path}: cannot read it ({err})",
    )
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise HierarchyError(
            f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None


def to_arrays(hierarchy: Hierarchy) -> dict[str, npt.NDArray[Any]]:
    """``node_ids`` and ``names`` (unicode, sorted by id) and ``edges`` (int64 ``[E, 2]``)."""
    return {
        "node_ids": hierarchy.node_ids.copy(),
        "names": hierarchy.names.copy(),
        "edges": hierarchy.edges.copy(),
    }


def parse_arrays(
    arrays: Mapping[str, npt.NDArray[Any]],
) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
    """Node ids, ``(parent_id, child_id)`` edges and names of a :func:`to_arrays` form, its
    dtypes, shapes and edge indices checked."""
    missing = sorted({"node_ids", "names", "edges"} - set(arrays))
    if missing:
        raise HierarchyError(f"hierarchy arrays lack {missing}; expected node_ids, names, edges")
    ids = np.asarray(arrays["node_ids"])
    names = np.asarray(arrays["names"])
    edges = np.asarray(arrays["edges"])
    for key, arr in (("node_ids", ids), ("names", names)):
        if arr.dtype.kind != "U" or arr.ndim != 1:
            raise HierarchyError(
                f"hierarchy array {key!r} must be a 1-D unicode array; got dtype "
                f"{arr.dtype}, shape {arr.shape}"
            )
    if edges.size == 0:
        edges = np.zeros((0, 2), dtype=np.int64)
    if edges.dtype.kind not in "iu" or edges.ndim != 2 or edges.shape[1] != 2:
        raise HierarchyError(
            "hierarchy array 'edges' must be integers of shape [E, 2]; got dtype "
            f"{edges.dtype}, shape {edges.shape}"
        )
    bad = np.flatnonzero(((edges < 0) | (edges >= ids.size)).any(axis=1))
    if bad.size:
        raise HierarchyError(
            f"hierarchy array 'edges' row {int(bad[0])} {edges[bad[0]].tolist()} indexes "
            f"past node_ids (size {ids.size})"
        )
    return ids, ids[edges], names


def content_hash(hierarchy: Hierarchy) -> str:
    """``"sha256:<hex>"`` of the canonical JSON of the format, nodes and edges (no source)."""
    d = to_dict(hierarchy)
    del d["source"]
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
