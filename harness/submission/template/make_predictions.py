"""Write this package's prediction files from a task bundle.

Usage: python make_predictions.py BUNDLE_DIR OUT_DIR  (run by `zsl submission generate`)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model import RidgeToEmbedding

from harness.bundles import Bundle
from harness.submission.predictions import write_predictions


def main(bundle_dir: str, out_dir: str) -> None:
    bundle = Bundle(Path(bundle_dir))
    # One fresh model per fit: the validation fit (training classes only) predicts the
    # validation settings, the main fit the test settings.
    for fit in bundle.fits:
        model = RidgeToEmbedding()
        model.fit(bundle.train_task(fit=fit))
        for setting in bundle.settings_of(fit):
            features, candidates = bundle.test(setting)
            write_predictions(
                Path(out_dir) / f"{setting}.safetensors",
                model.predict(features, candidates),
                benchmark_hash=bundle.info["benchmark_hash"],
                class_order_hash=bundle.info["class_order_hashes"][setting],
                setting=setting,
            )


if __name__ == "__main__":
    main(*sys.argv[1:3])
