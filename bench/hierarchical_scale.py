"""Hierarchical metrics at ImageNet-21K scale (a benchmark, not a test).

Loads the real ImageNet is-a hierarchy (``imagenet/wordnet.is_a.txt``, lines ``parent child``;
node ids = every wnid in an edge plus every id of ``imagenet/fall11_wnids.txt``), takes the
21,843 fall11 wnids as candidates, draws ``n_images`` test images with random true classes and
semi-realistic top-20 rankings (true class at rank 0 for 20% of the images, otherwise distinct
random candidates), and scores them in chunks of ``chunk`` rows: hp@k for k = 1, 2, 5, 10, 20,
the hierarchical cost and the relation breakdown. Target: well under 40 s wall and under 3 GiB
peak RSS on a 2-core machine. It also times a plain-Python hp@k (per image: BFS outward from
the true class until enough valid labels, then count) on a subsample and reports the per-image
speed ratio, after checking that both give the same values there.

The shared data are read in place (never copied): ``data_dir`` defaults to the environment
variable ``ZSL_SHARED_DATA``, else ``../shared/data`` relative to the repository.

Run: ``.venv/bin/python bench/hierarchical_scale.py [--n-images N] [--chunk M] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.hierarchy import Hierarchy
from harness.metrics.hierarchical import (
    RELATIONS,
    hierarchical_cost,
    hierarchical_precision_at_k,
    prediction_relations,
)

REPO = Path(__file__).resolve().parents[1]
KS = (1, 2, 5, 10, 20)
K_RANKED = 20
P_TRUE_AT_TOP = 0.2


def default_data_dir() -> Path:
    """``$ZSL_SHARED_DATA``, else ``../shared/data`` next to the repository."""
    return Path(os.environ.get("ZSL_SHARED_DATA", REPO.parent / "shared" / "data"))


def load_imagenet(data_dir: Path) -> tuple[Hierarchy, npt.NDArray[np.int64]]:
    """The ImageNet is-a hierarchy and the node index of each fall11 candidate wnid."""
    folder = data_dir / "imagenet"
    edges = []
    for line in (folder / "wordnet.is_a.txt").read_text().splitlines():
        parts = line.split()
        if parts:
            edges.append((parts[0], parts[1]))
    wnids = [line.strip() for line in (folder / "fall11_wnids.txt").read_text().splitlines()]
    wnids = [w for w in wnids if w]
    ids = sorted(set(wnids).union(*edges))
    hierarchy = Hierarchy(ids, edges, source="imagenet wordnet.is_a.txt + fall11_wnids.txt")
    return hierarchy, hierarchy.indices(wnids)


def make_chunk(
    rng: np.random.Generator, n: int, n_candidates: int, k: int = K_RANKED
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Random true classes and rankings of ``k`` distinct columns per row (20% correct at top)."""
    y_true = rng.integers(0, n_candidates, n)
    ranked = rng.integers(0, n_candidates, (n, k))
    while True:
        ordered = np.sort(ranked, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        ranked[bad] = rng.integers(0, n_candidates, (bad.size, k))
    top = np.flatnonzero(rng.random(n) < P_TRUE_AT_TOP)
    rows = ranked[top]
    where = rows == y_true[top, None]
    has = where.any(axis=1)
    position = np.argmax(where, axis=1)
    # The true class already ranked: swap it to the top; otherwise overwrite rank 0 with it.
    rows[has, position[has]] = rows[has, 0]
    rows[:, 0] = y_true[top]
    ranked[top] = rows
    return y_true, ranked


def neighbour_lists(hierarchy: Hierarchy) -> list[list[int]]:
    """Undirected adjacency lists (setup of the plain-Python hp@k, not timed per image)."""
    neighbours: list[list[int]] = [[] for _ in range(hierarchy.n_nodes)]
    for parent, child in hierarchy.edges.tolist():
        neighbours[parent].append(child)
        neighbours[child].append(parent)
    return neighbours


def python_loop_hp(
    neighbours: list[list[int]],
    valid: set[int],
    true_nodes: Sequence[int],
    ranked_nodes: Sequence[Sequence[int]],
    ks: Sequence[int],
) -> list[list[float]]:
    """Straightforward hp@k: per image a Python BFS from the true node, then a count."""
    out = []
    for true, preds in zip(true_nodes, ranked_nodes, strict=True):
        distance = {true: 0}
        frontier = [true]
        count = 1 if true in valid else 0
        radius = {k: 0 for k in ks if count >= k}
        level = 0
        while len(radius) < len(ks) and frontier:
            level += 1
            nxt = []
            for node in frontier:
                for other in neighbours[node]:
                    if other not in distance:
                        distance[other] = level
                        nxt.append(other)
                        count += other in valid
            frontier = nxt
            for k in ks:
                if k not in radius and count >= k:
                    radius[k] = level
        for k in ks:
            radius.setdefault(k, level)
        row = []
        for k in ks:
            hits = sum(1 for p in preds[:k] if p in valid and distance.get(p, 1 << 30) <= radius[k])
            row.append(hits / k)
        out.append(row)
    return out


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(
    n_images: int = 1_000_000,
    chunk: int = 100_000,
    data_dir: Path | str | None = None,
    *,
    loop_images: int = 2_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Time the hierarchical metrics on ImageNet-21K; return timings (s) and peak memory."""
    folder = Path(data_dir) if data_dir is not None else default_data_dir()
    wall = time.perf_counter()
    start = time.perf_counter()
    hierarchy, candidate_nodes = load_imagenet(folder)
    # Derived arrays the metrics need; built once per benchmark (docs/design.md, "Hierarchy").
    _ = hierarchy.ancestor_matrix, hierarchy.height
    timings = {"load_hierarchy": time.perf_counter() - start}
    n_candidates = candidate_nodes.size
    classes = np.arange(n_candidates)
    rng = np.random.default_rng(seed)
    totals = dict.fromkeys(("generate", "hp_at_k", "hierarchical_cost", "relations"), 0.0)
    hp_sum = np.zeros(len(KS))
    size_sum = np.zeros(len(KS))
    cost_sum = 0.0
    relation_counts = dict.fromkeys(RELATIONS, 0)
    first_chunk_hp = 0.0
    sample: tuple[Any, Any, Any] | None = None
    for offset in range(0, n_images, chunk):
        m = min(chunk, n_images - offset)
        t = time.perf_counter()
        y_true, ranked = make_chunk(rng, m, n_candidates)
        totals["generate"] += time.perf_counter() - t

        t = time.perf_counter()
        hp = hierarchical_precision_at_k(
            y_true, ranked, hierarchy=hierarchy, candidate_nodes=candidate_nodes, ks=KS
        )
        elapsed = time.perf_counter() - t
        totals["hp_at_k"] += elapsed
        if offset == 0:
            first_chunk_hp = elapsed
            sample = (y_true[:loop_images], ranked[:loop_images], hp.per_image[:loop_images])
        hp_sum += hp.per_image.sum(axis=0)
        size_sum += np.array([hp.mean_hcorrect_size[k] for k in KS]) * m

        t = time.perf_counter()
        cost = hierarchical_cost(
            y_true, ranked, hierarchy=hierarchy, candidate_nodes=candidate_nodes, classes=classes
        )
        totals["hierarchical_cost"] += time.perf_counter() - t
        cost_sum += float(cost.per_image.sum())

        t = time.perf_counter()
        relations = prediction_relations(
            y_true, ranked, hierarchy=hierarchy, candidate_nodes=candidate_nodes
        )
        totals["relations"] += time.perf_counter() - t
        for name in relation_counts:
            relation_counts[name] += relations.counts[name]
    timings.update(totals)
    timings["first_chunk_hp_at_k"] = first_chunk_hp
    timings["total_wall"] = time.perf_counter() - wall
    timings["total_without_generation"] = timings["total_wall"] - totals["generate"]
    peak = peak_rss_gib()

    assert sample is not None
    y_sample, ranked_sample, vectorized = sample
    valid = set(candidate_nodes.tolist())
    neighbours = neighbour_lists(hierarchy)
    t = time.perf_counter()
    looped = python_loop_hp(
        neighbours,
        valid,
        candidate_nodes[y_sample].tolist(),
        candidate_nodes[ranked_sample].tolist(),
        KS,
    )
    loop_seconds = time.perf_counter() - t
    agree = bool(np.array_equal(np.asarray(looped), vectorized))
    per_image_loop = loop_seconds / len(looped)
    per_image_vectorized = totals["hp_at_k"] / n_images
    return {
        "n_images": n_images,
        "chunk": chunk,
        "n_candidates": int(n_candidates),
        "n_nodes": hierarchy.n_nodes,
        "ks": list(KS),
        "seconds": {key: round(value, 3) for key, value in timings.items()},
        "peak_rss_gib": round(peak, 3),
        "targets": {"total_wall_s": 40.0, "peak_rss_gib": 3.0},
        "targets_met": timings["total_wall"] < 40.0 and peak < 3.0,
        "values": {
            "hp_at_k": {k: float(hp_sum[j] / n_images) for j, k in enumerate(KS)},
            "mean_hcorrect_size": {k: float(size_sum[j] / n_images) for j, k in enumerate(KS)},
            "mean_cost_per_image": cost_sum / n_images,
            "relation_shares": {name: c / n_images for name, c in relation_counts.items()},
        },
        "python_loop": {
            "images": len(looped),
            "seconds": round(loop_seconds, 3),
            "per_image_us": round(per_image_loop * 1e6, 2),
            "vectorized_per_image_us": round(per_image_vectorized * 1e6, 3),
            "speed_ratio": round(per_image_loop / per_image_vectorized, 1),
            "agrees_with_vectorized": agree,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-images", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    report = run(args.n_images, args.chunk, args.data_dir)
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
