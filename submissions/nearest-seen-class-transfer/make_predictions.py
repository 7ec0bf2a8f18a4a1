"""Write the prediction files of the nearest-seen-class transfer baseline from a task bundle.

Usage: python make_predictions.py BUNDLE_DIR OUT_DIR

Baseline: a nearest-centroid classifier over the seen classes (training + validation images)
assigns each test image to one seen class; every candidate class then scores the cosine
similarity between its embedding and that seen class's embedding. This is ConSE (Norouzi et al.,
2014) with T = 1: all semantic transfer goes through a single hard decision.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.neighbors import NearestCentroid

from harness.bundles import Bundle
from harness.submission.predictions import write_predictions


def main(bundle_dir: str, out_dir: str) -> None:
    bundle = Bundle(Path(bundle_dir))
    # The validation fit (training classes only) predicts the validation settings.
    for fit in bundle.fits:
        write_fit(bundle, fit, bundle.settings_of(fit), Path(out_dir))


def write_fit(bundle: Bundle, fit: str, settings: list[str], out_dir: Path) -> None:
    task = bundle.train_task(fit=fit)
    x = np.concatenate([task.train_features, task.val_features])
    y = np.concatenate([task.train_labels, task.val_labels])
    classifier = NearestCentroid().fit(x, y)
    emb = task.embedding / np.linalg.norm(task.embedding, axis=1, keepdims=True)
    for setting in settings:
        features, candidates = bundle.test(setting)
        seen_guess = classifier.predict(features)
        write_predictions(
            out_dir / f"{setting}.safetensors",
            (emb[seen_guess] @ emb[candidates].T).astype(np.float32),
            benchmark_hash=bundle.info["benchmark_hash"],
            class_order_hash=bundle.info["class_order_hashes"][setting],
            setting=setting,
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
