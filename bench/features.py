"""Feature extraction speed: `zsl features extract`'s engine with ResNet-101 at 224 px.

Generated JPEGs of 500 x 375 (CUB's and AWA2's typical size) in 8 class folders, ResNet-101 with
random weights (the speed is the weights' shape, not their values; no ImageNet weights can be
downloaded here), torchvision's ImageNet evaluation transform (resize 256, centre crop 224),
fp32, batch 32, decoding in worker processes. Reported:

- ``end_to_end``: images/s of :func:`harness.features.extract.extract_features` (decode,
  preprocess, forward, chunk saving, sealing excluded from the rate but timed apart);
- ``forward_only``: images/s of the backbone alone on ready tensors (the ceiling);
- the GPU, with ``--gpu-images`` (default 20,000) generated images, when torch sees one;
  otherwise "not measured" and why.

Run alone: ``python bench/features.py [--images N]`` prints the JSON; ``bench/run.py`` includes it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BATCH = 32


def make_jpegs(root: Path, n: int, seed: int = 0) -> None:
    from PIL import Image

    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, size=(375, 500, 3), dtype=np.uint8)
    for i in range(n):
        folder = root / f"class{i % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        shifted = np.roll(base, shift=int(rng.integers(0, 500)), axis=1)
        tint = (shifted.astype(np.int16) + (i % 8) * 20).clip(0, 255).astype(np.uint8)
        Image.fromarray(tint).save(folder / f"{i:06d}.jpg", quality=90)


def _forward_only(device: str, repeats: int = 3) -> float:
    import torch
    import torchvision

    model = torchvision.models.resnet101().eval().to(device)
    model.fc = torch.nn.Identity()
    batch = torch.randn(BATCH, 3, 224, 224, device=device)
    with torch.inference_mode():
        model(batch)  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            model(batch)
        if device == "cuda":
            torch.cuda.synchronize()
    return repeats * BATCH / (time.perf_counter() - start)


def _extract(work: Path, n_images: int, device: str, workers: int) -> dict[str, object]:
    import torch
    import torchvision
    from safetensors.torch import save_file

    from harness.features.backbones import resolve_weights
    from harness.features.extract import ExtractionRequest, extract_features
    from harness.features.images import read_images
    from harness.features.preprocess import preset
    from harness.spec import PretrainedOn

    images = work / f"images-{n_images}"
    start = time.perf_counter()
    if not images.exists():
        make_jpegs(images, n_images)
    generate_seconds = time.perf_counter() - start
    weights = work / "resnet101-random.safetensors"
    if not weights.exists():
        torch.manual_seed(0)
        state = torchvision.models.resnet101().state_dict()
        save_file({k: v.contiguous() for k, v in state.items()}, str(weights))
    request = ExtractionRequest(
        images=read_images(images),
        backbone="resnet101",
        layer=None,
        weights=resolve_weights("resnet101", str(weights)),
        pretrained_on=PretrainedOn(class_set="none"),
        preprocessing=preset("imagenet-eval"),
        batch_size=BATCH,
        chunk_images=BATCH * 32,
    )
    out = work / f"features-{device}-{n_images}"
    start = time.perf_counter()
    result = extract_features(request, out, workers=workers, device=device, quiet=True)
    total = time.perf_counter() - start
    return {
        "images": n_images,
        "image_size": "500x375 JPEG",
        "preprocessing": "resize 256, centre crop 224",
        "precision": "fp32",
        "batch_size": BATCH,
        "workers": workers,
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "images_per_second": round(result.images_per_second, 2),
        "extract_seconds": round(result.seconds, 2),
        "seconds_with_load_and_seal": round(total, 2),
        "generate_images_seconds": round(generate_seconds, 2),
        "dim": result.feature_set.entries["features"].shape[1],
    }


def measure(work: Path, n_images: int = 256, gpu_images: int = 20_000) -> dict[str, object]:
    import torch

    work.mkdir(parents=True, exist_ok=True)
    workers = min(4, os.cpu_count() or 1)
    cpu = _extract(work, n_images, "cpu", workers)
    cpu["forward_only_images_per_second"] = round(_forward_only("cpu"), 2)
    report: dict[str, object] = {"backbone": "resnet101", "cpu": cpu}
    if torch.cuda.is_available():
        gpu = _extract(work, gpu_images, "cuda", max(workers, 8))
        gpu["forward_only_images_per_second"] = round(_forward_only("cuda"), 2)
        gpu["name"] = torch.cuda.get_device_name()
        report["gpu"] = gpu
    else:
        report["gpu"] = {"not_measured": "torch sees no CUDA device on this machine"}
    report["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--gpu-images", type=int, default=20_000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="zsl-bench-features-") as work:
        print(json.dumps(measure(Path(work), args.images, args.gpu_images), indent=1))


if __name__ == "__main__":
    main()
