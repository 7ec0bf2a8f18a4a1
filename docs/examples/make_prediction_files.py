"""Write prediction files from a task bundle with NumPy and safetensors only: no harness.

Usage: python make_prediction_files.py BUNDLE OUT   (BUNDLE: from `zsl data bundle SPEC --out`)
A stand-in for your method: ridge regression from image features to the default class
embedding, scored by cosine similarity. docs/guides/prediction-files.md explains each step.
"""

import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


def predict_fit(fit: Path, task: dict, settings: list[str], emb: np.ndarray, out: Path) -> None:
    def load(name: str) -> np.ndarray:
        return np.load(fit / f"{name}.npy", allow_pickle=False)

    x = np.concatenate([load("train/features"), load("val/features")])
    y = np.concatenate([load("train/labels"), load("val/labels")])  # rows of emb
    w = np.linalg.solve(x.T @ x + np.eye(x.shape[1]), x.T @ emb[y])
    test = load("test/features")  # every test image of this fit, shuffled, no labels
    for setting in settings:
        guess = test[load(f"test/{setting}/rows")] @ w  # the file's rows, in its order
        guess /= np.linalg.norm(guess, axis=1, keepdims=True) + 1e-12
        scores = guess @ emb[load(f"test/{setting}/candidates")].T  # columns: candidates
        metadata = {
            "format": "zsl-predictions/1",
            "benchmark_hash": task["benchmark_hash"],
            "class_order_hash": task["class_order_hashes"][setting],
            "setting": setting,
        }
        name = f"{task['benchmark']}.{setting}.safetensors"
        save_file({"scores": scores.astype(np.float32)}, out / name, metadata=metadata)


def main(bundle: Path, out: Path) -> None:
    task = json.loads((bundle / "task.json").read_text())
    emb = np.load(bundle / "embeddings" / f"{task['default_embedding']}.npy")
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    out.mkdir(parents=True, exist_ok=True)
    predict_fit(bundle, task, task["settings"], emb, out)  # main fit: the test settings
    if task["validation_settings"]:  # the validation fit (training classes only): <setting>_val
        predict_fit(bundle / "validation", task, task["validation_settings"], emb, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
