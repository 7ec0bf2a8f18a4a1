"""Leaderboard-site benchmark (not a test): build the site for 50 submissions × 12 benchmarks.

The records are synthetic but shaped like real ones (``zsl demo`` records scaled up): per
benchmark 50–200 unseen and 50–200 seen classes; every score with a bootstrap interval and, where
the scorer keeps them, per-class values (so every column gets its paired tests and every pair of
submissions its comparison page); DARTS curves, the 400-point seen–unseen curve, hp@k for two k,
prediction relation shares, per-class accuracies in the details, leakage audits, declarations
(some transductive, some with extra data), logs, structure diagnostics, the named test classes
with their nearest training class, and the hyperparameters a model chose. DARTS area and AUSUC
keep their per-class curve shares, mistake severity its ratio of class means, as the scorer does
(issue 14 item 6), so they are paired like every other column.

The records are made first; then :func:`harness.site.build_site` is timed alone (imports of the
site modules included, nothing warmed up before). Target: < 10 s on 2 cores.

Run: ``.venv/bin/python bench/site_scale.py [--submissions 50] [--benchmarks 12] [--out FILE]``;
prints a JSON report (``bench/run.py`` runs it in a fresh process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.audit import ClassAudit, LeakageAudit, Relation, Relative  # noqa: E402
from harness.records import (  # noqa: E402
    BenchmarkInfo,
    ClassCurve,
    ClassValues,
    Interval,
    RunRecord,
    ScoredClass,
    ScoreEntry,
    SubmissionInfo,
)

TARGET_SECONDS = 10.0
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
ZSL_METRICS = (  # key, function, combine, higher is better
    ("top1", "per_class_top_k_accuracy", "class_mean", True),
    ("top5", "per_class_top_k_accuracy", "class_mean", True),
    ("hp@2", "hierarchical_precision_at_k", "image_mean", True),
    ("hp@5", "hierarchical_precision_at_k", "image_mean", True),
    ("hcost", "hierarchical_cost", "class_mean", False),
    ("severity", "mistake_severity", "ratio_of_means", False),
    ("ahd@5", "average_hierarchical_distance_at_k", "image_mean", False),
    ("hret@5", "hierarchical_retrieval_precision_at_k", "image_mean", True),
    ("semantic", "prediction_relation_share", "image_mean", True),
    ("darts", "darts_area", "darts_area", True),
    ("darts@val90", "darts_reward", "image_mean", True),
)
GZSL_METRICS = (
    ("top1", "per_class_top_k_accuracy", "class_mean", True),
    ("seen", "gzsl_seen_accuracy", "class_mean", True),
    ("unseen", "gzsl_unseen_accuracy", "class_mean", True),
    ("H", "gzsl_harmonic_mean", "harmonic_of_groups", True),
    ("AUSUC", "ausuc", "seen_unseen_area", True),
    ("cH", "calibrated_harmonic_mean", "harmonic_of_groups", True),
)


def _interval(value: float, rng: np.random.Generator, scale: float = 0.02) -> Interval:
    lo = value - scale * (0.5 + rng.random())
    hi = value + scale * (0.5 + rng.random())
    if 0.0 <= value <= 1.0:
        lo, hi = max(0.0, lo), min(1.0, hi)
    return Interval(lo=lo, hi=hi, scheme="images_within_class", n_boot=1000)


def _class_means(
    rng: np.random.Generator, skill: float, difficulty: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Per-class accuracies as a run would have them: binomial hits over the class's images."""
    p = 1.0 / (1.0 + np.exp(-(skill + difficulty)))
    return rng.binomial(counts, p) / counts


def _reduce(combine: str, means: np.ndarray, counts: np.ndarray, groups: np.ndarray) -> float:
    if combine == "class_mean":
        return float(means.mean())
    if combine == "image_mean":
        return float((means * counts).sum() / counts.sum())
    group_means = [means[groups == g].mean() for g in (0, 1)]
    return float(0.0 if min(group_means) == 0 else 2 / (1 / group_means[0] + 1 / group_means[1]))


def _values(
    combine: str, classes: np.ndarray, counts: np.ndarray, groups: np.ndarray, means: np.ndarray
) -> ClassValues:
    return ClassValues(
        combine=combine,  # type: ignore[arg-type]
        classes=classes.tolist(),
        counts=counts.tolist(),
        groups=groups.tolist(),
        means=means.tolist(),
    )


def _curve_rows(
    rng: np.random.Generator, counts: np.ndarray, n_points: int, *, rising: bool
) -> list[str]:
    """Per class a text row of its correct images at each curve point (as ClassCurve keeps)."""
    shares = np.sort(rng.random((len(counts), n_points)), axis=1)
    hits = np.floor((shares if rising else shares[:, ::-1]) * counts[:, None]).astype(int)
    return [" ".join(map(str, row)) for row in hits]


def _curve_values(
    combine: str,
    rng: np.random.Generator,
    classes: np.ndarray,
    counts: np.ndarray,
    groups: np.ndarray,
) -> ClassValues:
    """Class values of a curve area as the scorer keeps them: DARTS at its reached targets
    (hits rising, mean gains falling), AUSUC at ``clip(32768 // classes, 16, 128)`` points
    (seen classes' hits falling, unseen ones' rising)."""
    if combine == "darts_area":
        n_points = 8
        gains = np.sort(rng.random((len(counts), n_points)), axis=1)[:, ::-1]
        curve = ClassCurve(
            hits=_curve_rows(rng, counts, n_points, rising=True),
            gains=[" ".join(f"{g:.10f}" for g in row) for row in gains],
            n_points=n_points,
        )
    else:
        n_points = int(np.clip(32768 // len(counts), 16, 128))
        seen = groups == 0
        rows = np.empty(len(counts), dtype=object)
        rows[seen] = _curve_rows(rng, counts[seen], n_points, rising=False)
        rows[~seen] = _curve_rows(rng, counts[~seen], n_points, rising=True)
        curve = ClassCurve(hits=list(rows), n_points=2000)
    return ClassValues(
        combine=combine,  # type: ignore[arg-type]
        classes=classes.tolist(),
        counts=counts.tolist(),
        groups=groups.tolist(),
        curve=curve,
    )


def _zsl_values(
    combine: str,
    rng: np.random.Generator,
    classes: np.ndarray,
    counts: np.ndarray,
    groups: np.ndarray,
    means: np.ndarray,
    costs: np.ndarray,
    mistakes: np.ndarray,
) -> ClassValues:
    if combine == "darts_area":
        return _curve_values(combine, rng, classes, counts, groups)
    if combine == "ratio_of_means":
        values = _values(combine, classes, counts, groups, costs)
        return values.model_copy(update={"denominators": mistakes.tolist()})
    return _values(combine, classes, counts, groups, means)


def _zsl_details(
    key: str,
    function: str,
    value: float,
    rng: np.random.Generator,
    ids: np.ndarray,
    means: np.ndarray,
    n_images: int,
) -> tuple[dict[str, Any], float]:
    """A ZSL score's ``details`` as its metric stores them, and its value (DARTS recomputes it)."""
    details: dict[str, Any] = {}
    if key in ("top1", "top5"):
        details = {
            "k": int(key[3:]),
            "per_class": {str(c): float(m) for c, m in zip(ids, means, strict=True)},
            "excluded_classes": [],
            "n_images": n_images,
        }
    elif key.startswith("hp@"):
        details = {"k": int(key[3:]), "valid": "all", "mean_hcorrect_size": 5.5}
    elif key == "semantic":
        a, d = 0.1 * rng.random(), 0.05 * rng.random()
        details = {
            "relation": "semantic_upper",
            "correct": value,
            "ancestor": a,
            "descendant": d,
            "unrelated": max(0.0, 1 - value - a - d),
        }
    elif function.startswith("darts"):
        acc = np.linspace(value, 1.0, 13)
        gain = np.clip(0.9 * value - (acc - value) * 0.8, 0.0, 1.0)
        details = {
            "temperature": 0.65,
            "lambda_chosen_on": "validation",
            "curve": [
                {
                    "target": t / 12,
                    "lambda": 0.5 * t,
                    "accuracy": float(x),
                    "info_gain": float(g),
                    "share_leaf": 0.9,
                    "share_internal": 0.1,
                    "share_root": 0.0,
                }
                for t, (x, g) in enumerate(zip(acc, gain, strict=True))
            ],
        }
        if key == "darts":
            value = float(np.trapezoid(gain, acc) / max(1e-9, 1.0 - value) if value < 1 else 0.5)
            value = min(1.0, max(0.0, value))
    return details, value


def make_records(n_submissions: int = 50, n_benchmarks: int = 12, seed: int = 0) -> list[RunRecord]:
    """``n_submissions`` × ``n_benchmarks`` synthetic run records (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    skills = rng.normal(0.0, 0.8, n_submissions)
    records = []
    for b in range(n_benchmarks):
        n_unseen, n_seen = (int(v) for v in rng.integers(50, 201, 2))
        unseen_counts = rng.integers(20, 80, n_unseen)
        seen_counts = rng.integers(5, 30, n_seen)
        difficulty_u = rng.normal(0.0, 1.0, n_unseen)
        difficulty_s = rng.normal(1.5, 1.0, n_seen)
        info = BenchmarkInfo(
            id=f"bench-{b:02d}",
            version=1 + b % 2,
            title=f"Synthetic benchmark {b:02d} ({n_seen} seen / {n_unseen} unseen classes)",
            hash="sha256:" + f"{b:02d}" * 32,
            spec_hash="sha256:" + f"{b + 50:02d}" * 32,
            primary={"zsl": "top1", "gzsl": "H"},
            n_classes=n_seen + n_unseen,
            n_seen=n_seen,
            n_unseen=n_unseen,
            structure={
                "structural_ratio": {
                    "value": 0.6 + 0.05 * b,
                    "n_included": n_unseen,
                    "excluded": 0,
                },
                "hops_to_train": {
                    "2": n_unseen // 2,
                    "3": n_unseen // 3,
                    "4": n_unseen - n_unseen // 2 - n_unseen // 3,
                },
                "mutual_exclusivity_violations": {"unseen": [], "all": 0},
            },
            test_classes=[
                ScoredClass(
                    id=f"n{b:02d}{c:05d}",
                    name=f"class {c} of benchmark {b}",
                    unseen=c >= n_seen,
                    columns={"zsl": c - n_seen, "gzsl": c} if c >= n_seen else {"gzsl": c},
                    nearest=f"n{b:02d}{c % n_seen:05d}" if c >= n_seen else None,
                    nearest_name=f"class {c % n_seen} of benchmark {b}" if c >= n_seen else None,
                    hops=2 + c % 3 if c >= n_seen else None,
                    relation=("sibling", "relative", "ancestor")[c % 3] if c >= n_seen else None,
                )
                for c in range(n_seen + n_unseen)
            ],
        )
        unseen_ids = np.arange(n_seen, n_seen + n_unseen)
        zsl_classes = np.arange(n_unseen)
        gzsl_classes = np.arange(n_seen + n_unseen)
        gzsl_counts = np.concatenate([seen_counts, unseen_counts])
        gzsl_groups = np.concatenate([np.zeros(n_seen, int), np.ones(n_unseen, int)])
        leakage = LeakageAudit(source="ilsvrc2012", n_test=n_unseen)
        if b % 4 == 0:
            leakage = leakage.model_copy(
                update={
                    "classes": [
                        ClassAudit(
                            class_id=f"n0{2100000 + i}",
                            name=f"class {i}",
                            wordnet_id=f"n0{2100000 + i}",
                            mapping="id",
                            counts={Relation.HYPONYM: 2},
                            relatives=[
                                Relative(
                                    wordnet_id=f"n0{2200000 + 2 * i + j}",
                                    name=f"pre-training class {2 * i + j}",
                                    relation=Relation.HYPONYM,
                                    hops=1,
                                )
                                for j in range(2)
                            ],
                        )
                        for i in range(3)
                    ]
                }
            )
        for s in range(n_submissions):
            skill = float(skills[s]) + rng.normal(0.0, 0.2)
            scores = []
            zeros = np.zeros(n_unseen, int)
            for key, function, combine, higher in ZSL_METRICS:
                shift = {"top5": 1.5, "hcost": -0.5, "hret@5": 1.0}.get(key, 0.0)
                means = _class_means(rng, skill + shift, difficulty_u, unseen_counts)
                classes, counts, groups = zsl_classes, unseen_counts, zeros
                costs = mistakes = means  # only severity's class values use them
                if key == "severity":  # mean cost over mistakes: a ratio of class means
                    mistakes = 1.0 - means
                    costs = mistakes * (1.0 + 6.0 * rng.random(n_unseen))
                elif key in ("hcost", "ahd@5"):
                    means = (1.0 - means) * (6.0 if key == "ahd@5" else 1.0)
                if key == "severity":
                    value = float((costs * counts).sum() / max((mistakes * counts).sum(), 1e-9))
                else:  # DARTS: a placeholder, _zsl_details recomputes it from the curve
                    value = _reduce(
                        "class_mean" if key == "darts" else combine, means, counts, groups
                    )
                details, value = _zsl_details(
                    key, function, value, rng, unseen_ids, means, int(unseen_counts.sum())
                )
                scores.append(
                    ScoreEntry(
                        setting="zsl",
                        metric=key,
                        function=function,
                        version="1",
                        value=value,
                        higher_is_better=higher,
                        details=details,
                        interval=_interval(value, rng),
                        class_values=_zsl_values(
                            combine, rng, classes, counts, groups, means, costs, mistakes
                        ),
                    )
                )
            seen_means = _class_means(rng, skill + 0.5, difficulty_s, seen_counts)
            unseen_means = _class_means(rng, skill - 1.0, difficulty_u, unseen_counts)
            all_means = np.concatenate([seen_means, unseen_means])
            for key, function, combine, higher in GZSL_METRICS:
                if key == "seen":
                    cv = (np.arange(n_seen), seen_counts, np.zeros(n_seen, int), seen_means)
                elif key == "unseen":
                    cv = (np.arange(n_unseen), unseen_counts, np.zeros(n_unseen, int), unseen_means)
                elif key == "cH":
                    shifted = np.concatenate(
                        [seen_means * 0.9, np.minimum(1.0, unseen_means * 1.3)]
                    )
                    cv = (gzsl_classes, gzsl_counts, gzsl_groups, shifted)
                elif key == "H":
                    cv = (gzsl_classes, gzsl_counts, gzsl_groups, all_means)
                else:
                    cv = (gzsl_classes, gzsl_counts, np.zeros(len(gzsl_classes), int), all_means)
                details = {}
                if combine != "seen_unseen_area":
                    value = _reduce(combine, cv[3], cv[1], cv[2])
                else:  # AUSUC: the stored 400-point curve and its area
                    u = np.sort(rng.random(400)) * unseen_means.mean() * 1.6
                    seen_curve = np.clip(seen_means.mean() * (1 - (u / u.max()) ** 3), 0, 1)
                    details = {
                        "curve": {
                            "seen": np.round(seen_curve, 6).tolist(),
                            "unseen": np.round(np.minimum(u, 1), 6).tolist(),
                            "n_points": 2000,
                        }
                    }
                    value = float(np.trapezoid(seen_curve, np.minimum(u, 1)))
                scores.append(
                    ScoreEntry(
                        setting="gzsl",
                        metric=key,
                        function=function,
                        version="1",
                        value=value,
                        higher_is_better=higher,
                        details=details,
                        interval=_interval(value, rng),
                        class_values=_curve_values(
                            combine, rng, gzsl_classes, gzsl_counts, gzsl_groups
                        )
                        if combine == "seen_unseen_area"
                        else _values(combine, *cv),
                    )
                )
            kind = "predictions" if s % 9 == 4 else "model"
            records.append(
                RunRecord(
                    benchmark=info,
                    submission=SubmissionInfo(
                        name=f"method-{s:02d}",
                        version="1.0",
                        kind=kind,
                        package_hash="sha256:" + f"{s:02d}" * 32,
                        authors=[f"Author {s}-{i}" for i in range(1 + s % 4)],
                        paper=f"https://arxiv.org/abs/2401.{10000 + s}",
                        description=f"Method {s}: a synthetic submission for the site benchmark. "
                        * 3,
                        declarations={
                            "class_embedding": "default",
                            "features": "benchmark",
                            "backbone_pretrained_on": None,
                            "extra_data": s % 7 == 5,
                            "transductive": s % 10 == 3,
                        },
                    ),
                    predictions_hashes={"zsl": "sha256:" + "d" * 64, "gzsl": "sha256:" + "e" * 64},
                    harness_version="0.1.0",
                    runner="sandbox" if kind == "model" else "predictions",
                    environment={"python": "3.11.7", "numpy": "2.4.6", "platform": "Linux-x86_64"},
                    timings={"prepare": 0.04, "validate": 0.01, "run": 12.5 + s, "score": 0.8},
                    logs={
                        "reason": "ok",
                        "stdout": "epoch 1 loss 0.5\n" * 60,
                        "stderr": "warn\n" * 40,
                    }
                    if kind == "model"
                    else {},
                    leakage=leakage,
                    hyperparameters={
                        "main": {"lambda": 10.0 ** (s % 5 - 2), "epochs": 20 + s % 3},
                        "validation": {"lambda": 10.0 ** (s % 4 - 2), "epochs": 20},
                    }
                    if kind == "model"
                    else {},
                    scores=scores,
                    created_at=T0 + timedelta(minutes=s + 60 * b),
                )
            )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=50)
    parser.add_argument("--benchmarks", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("--keep", type=Path, default=None, help="build the site here and keep it")
    args = parser.parse_args()

    start = time.perf_counter()
    records = make_records(args.submissions, args.benchmarks)
    generate_seconds = time.perf_counter() - start
    work = Path(tempfile.mkdtemp(prefix="zsl-site-bench-"))
    out = args.keep or work / "site"
    try:
        start = time.perf_counter()
        from harness.site import build_site

        build_site(records, out)
        seconds = time.perf_counter() - start
        files = [p for p in out.rglob("*") if p.is_file()]
        report = {
            "submissions": args.submissions,
            "benchmarks": args.benchmarks,
            "records": len(records),
            "generate_seconds": round(generate_seconds, 3),
            "seconds": round(seconds, 3),
            "target_seconds": TARGET_SECONDS,
            "targets_met": seconds < TARGET_SECONDS,
            "files": len(files),
            "pair_pages": len(list((out / "compare").glob("*.html"))),
            "site_mib": round(sum(p.stat().st_size for p in files) / 2**20, 1),
            "results_json_mib": round((out / "results.json").stat().st_size / 2**20, 1),
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "cpus": os.cpu_count() or 0,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=1, sort_keys=True)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
