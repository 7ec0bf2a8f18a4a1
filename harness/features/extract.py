"""`zsl features extract`: images → a frozen, hashed feature set, resumable after a kill.

The work is cut into chunks of ``chunk_images`` consecutive images (a whole number of batches).
Each finished chunk is saved beside the output, in ``.<out>.partial/`` (its features, then a
JSON file that commits it, both by rename), with the request that made it; a run that finds a
partial folder made by the *same* request (images, backbone, weights hash, preprocessing,
precision, batching, device kind) extracts only the chunks that are missing. A different
request is refused rather than mixed in. Batches never cross chunks, so a resumed run computes
every batch exactly as an uninterrupted one and the set hash is the same.

See docs/features.md.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from harness.core.errors import HarnessError
from harness.core.hashing import json_sha256
from harness.features.backbones import (
    Backbone,
    WeightsRef,
    load_backbone,
    open_clip_arch,
    resolve_weights,
)
from harness.features.images import ImageList, read_image, read_images
from harness.features.preprocess import Preprocessing, preset, transform
from harness.features.sets import MANIFEST, ArtifactSet, write_set

if TYPE_CHECKING:  # annotations only: the spec's schema sits above the feature extractors
    from harness.spec import ExtractSpec, PretrainedOn

__all__ = [
    "ExtractionRequest",
    "extract_features",
    "partial_dir",
    "plan_extraction",
    "weights_preprocessing",
]

Precision = Literal["fp32", "fp16", "bf16"]
BAD_IMAGES_SHOWN = 20


@dataclass(frozen=True)
class BadImage:
    index: int
    path: str
    reason: str


@dataclass(frozen=True)
class Extraction:
    """A finished extraction: the sealed set, and how many images this call ran through the
    backbone in how many seconds (0 when the set was already there; fewer when resumed)."""

    feature_set: ArtifactSet
    images_extracted: int
    seconds: float
    already_there: bool = False

    @property
    def images_per_second(self) -> float:
        return self.images_extracted / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class ExtractionRequest:
    """Everything that decides the features (and so the set hash)."""

    images: ImageList
    backbone: str
    layer: str | None
    weights: WeightsRef
    pretrained_on: PretrainedOn
    preprocessing: Preprocessing
    precision: Precision = "fp32"
    batch_size: int = 64
    chunk_images: int = 2048

    def __post_init__(self) -> None:
        if self.batch_size <= 0 or self.chunk_images <= 0:
            raise HarnessError("batch size and chunk size must be positive")
        if self.chunk_images % self.batch_size:
            raise HarnessError(
                f"chunk size {self.chunk_images} is not a multiple of the batch size"
                f" {self.batch_size} (batches never cross chunks, so a resumed run batches as"
                " an uninterrupted one)"
            )

    def key(self, device_kind: str) -> dict[str, Any]:
        return {
            "images": self.images.listing_sha256,
            "backbone": self.backbone,
            "layer": self.layer,
            "weights_sha256": self.weights.sha256,
            "preprocessing": self.preprocessing.model_dump(mode="json"),
            "precision": self.precision,
            "batch_size": self.batch_size,
            "chunk_images": self.chunk_images,
            "device": device_kind,
        }


def weights_preprocessing(backbone: str, weights: str) -> Preprocessing:
    """torchvision's own evaluation transform for the named ``weights`` (resize, crop, mean,
    std, interpolation), as a declared :class:`Preprocessing`."""
    from torchvision.models import get_model_weights

    entry = get_model_weights(backbone)[weights.rsplit(".", 1)[-1]]  # DEFAULT: an alias
    steps = entry.transforms()
    interpolation = str(getattr(steps, "interpolation", "bilinear")).rsplit(".", 1)[-1].lower()
    resize = list(steps.resize_size)
    return Preprocessing(
        resize=resize[0] if len(resize) == 1 else (resize[0], resize[1]),
        crop=int(steps.crop_size[0]),
        interpolation=interpolation,
        mean=tuple(steps.mean),
        std=tuple(steps.std),
    )


def plan_extraction(
    extract: ExtractSpec,
    base: Path,
    *,
    chunk_images: int = 2048,
    download: bool = False,
) -> ExtractionRequest:
    """The request an :class:`~harness.spec.ExtractSpec` describes, paths relative to ``base``:
    images listed, weights found and hashed (a declared sha256 that differs is refused),
    preprocessing resolved (a preset, the steps, or the named weights' own transform)."""
    images = read_images(base / extract.images)
    arch = open_clip_arch(extract.backbone)
    if arch is not None:
        # open_clip is imported only when a CLIP backbone is asked for
        from harness.features import clip

        if download:
            raise HarnessError(
                "--download fetches torchvision weights; open_clip weights are never downloaded"
                " by the harness (give a file, or a pretrained tag already in the open_clip"
                " cache)"
            )
        weights = clip.resolve_clip_weights(
            arch, extract.weights, expected_sha256=extract.weights_sha256, base=base
        )
    else:
        weights = resolve_weights(
            extract.backbone,
            extract.weights,
            expected_sha256=extract.weights_sha256,
            download=download,
            base=base,
        )
    if isinstance(extract.preprocessing, Preprocessing):
        preprocessing = extract.preprocessing
    elif isinstance(extract.preprocessing, str):
        preprocessing = preset(extract.preprocessing)
    elif arch is not None:
        preprocessing = clip.clip_preprocessing(arch, weights)  # the model's own transform
    elif weights.source == "torchvision":
        preprocessing = weights_preprocessing(extract.backbone, extract.weights)
    else:
        preprocessing = preset("imagenet-eval")
    if preprocessing.box and images.boxes is None:
        raise HarnessError(
            f"preprocessing crops to bounding boxes, but {images.source} gives none (an image"
            " list with 'path<TAB>class_id<TAB>x1,y1,x2,y2' lines)"
        )
    batch = extract.batch_size
    return ExtractionRequest(
        images=images,
        backbone=extract.backbone,
        layer=extract.layer,
        weights=weights,
        pretrained_on=extract.weights_pretrained_on(),
        preprocessing=preprocessing,
        precision=extract.precision,
        batch_size=batch,
        chunk_images=max(batch, chunk_images // batch * batch),
    )


def partial_dir(out: Path) -> Path:
    """Where the finished chunks of an extraction into ``out`` wait for the rest."""
    return out.parent / f".{out.name}.partial"


# -- the dataset (runs in DataLoader worker processes) ------------------------------------------


class _Images:
    """``dataset[i] -> (i, tensor or None, sha256, reason)``; the transform is built lazily in
    each worker process."""

    def __init__(self, images: ImageList, preprocessing: Preprocessing) -> None:
        self.files = images.files
        self.boxes = images.boxes
        self.preprocessing = preprocessing
        self._apply: Any = None

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[int, Any, str, str]:
        if self._apply is None:
            self._apply = transform(self.preprocessing)
        digest = ""
        try:
            image, digest = read_image(self.files[index])
            box = None if self.boxes is None else tuple(float(v) for v in self.boxes[index])
            return index, self._apply(image, box), digest, ""
        except ValueError as err:
            return index, None, digest, str(err)


def _collate(items: list[tuple[int, Any, str, str]]) -> tuple[list[int], Any, list[str], list[str]]:
    import torch

    good = [item for item in items if item[1] is not None]
    stacked = torch.stack([item[1] for item in good]) if good else None
    indices, digests, reasons = zip(*((item[0], item[2], item[3]) for item in items), strict=True)
    return list(indices), stacked, list(digests), list(reasons)


def _worker_init(_: int) -> None:
    import torch

    torch.set_num_threads(1)  # decoding processes: one thread each, the model gets the cores


# -- chunks on disk ----------------------------------------------------------------------------


@dataclass
class _Chunk:
    number: int
    start: int
    stop: int
    rows: list[int] = field(default_factory=list)
    features: list[np.ndarray] = field(default_factory=list)
    digests: dict[int, str] = field(default_factory=dict)
    bad: list[tuple[int, str]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.digests) == self.stop - self.start


def _chunk_files(partial: Path, number: int) -> tuple[Path, Path]:
    return partial / f"chunk-{number:06d}.npy", partial / f"chunk-{number:06d}.json"


def _write_chunk(partial: Path, chunk: _Chunk, dim: int) -> None:
    array_file, commit_file = _chunk_files(partial, chunk.number)
    features = np.concatenate(chunk.features) if chunk.features else np.zeros((0, dim), np.float32)
    fd, tmp = tempfile.mkstemp(prefix=".chunk.", suffix=".npy", dir=partial)
    with os.fdopen(fd, "wb") as handle:
        np.save(handle, features.astype(np.float32, copy=False), allow_pickle=False)
    os.replace(tmp, array_file)
    record = {
        "start": chunk.start,
        "stop": chunk.stop,
        "rows": chunk.rows,
        "sha256": [chunk.digests[i] for i in range(chunk.start, chunk.stop)],
        "bad": chunk.bad,
        "dim": dim,
    }
    fd, tmp = tempfile.mkstemp(prefix=".chunk.", suffix=".json", dir=partial)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    os.replace(tmp, commit_file)  # the chunk exists from here on


def _read_chunk(partial: Path, number: int) -> tuple[dict[str, Any], np.ndarray] | None:
    array_file, commit_file = _chunk_files(partial, number)
    if not commit_file.is_file():
        return None
    try:
        record = json.loads(commit_file.read_text())
        features = np.load(array_file, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise HarnessError(
            f"{partial}: chunk {number} is damaged ({err}); delete {partial} to start over"
        ) from None
    if features.shape[0] != len(record["rows"]):
        raise HarnessError(f"{partial}: chunk {number} is damaged; delete {partial} to start over")
    return record, features


def _open_partial(partial: Path, key: dict[str, Any]) -> None:
    request_file = partial / "request.json"
    if partial.is_dir() and request_file.is_file():
        try:
            recorded = json.loads(request_file.read_text())
        except (OSError, ValueError):
            recorded = None
        if recorded != key:
            raise HarnessError(
                f"{partial} holds the chunks of a different extraction (other images, weights,"
                " preprocessing, batching or device) into the same output; delete it to start"
                " over, or choose another --out"
            )
        return
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "request.json").write_text(json.dumps(key, sort_keys=True))


# -- the run -----------------------------------------------------------------------------------


def _device(name: str | None) -> Any:
    import torch

    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise HarnessError(f"device {name!r} asked for, but torch sees no CUDA device")
    return torch.device(name)


def _batches(chunks: list[_Chunk], batch_size: int) -> list[list[int]]:
    return [
        list(range(start, min(start + batch_size, chunk.stop)))
        for chunk in chunks
        for start in range(chunk.start, chunk.stop, batch_size)
    ]


def _versions(*libraries: str) -> dict[str, str]:
    found = {}
    for dist in ("torch", "torchvision", "pillow", "numpy", *libraries):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


class _Progress:
    """A rich progress bar with images/s, or nothing when quiet."""

    def __init__(self, total: int, done: int, quiet: bool) -> None:
        self.quiet = quiet
        if quiet:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("extracting"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            transient=False,
        )
        self.task = self.progress.add_task("extract", total=total, completed=done, rate="")
        self.start = time.perf_counter()
        self.counted = 0
        self.progress.start()

    def advance(self, n: int) -> None:
        if self.quiet:
            return
        self.counted += n
        rate = self.counted / max(time.perf_counter() - self.start, 1e-9)
        self.progress.update(self.task, advance=n, rate=f"{rate:,.1f} images/s")

    def close(self) -> None:
        if not self.quiet:
            self.progress.stop()


def _run_chunks(
    request: ExtractionRequest,
    backbone: Backbone,
    todo: list[_Chunk],
    partial: Path,
    device: Any,
    workers: int,
    progress: _Progress,
) -> float:
    """Extract the chunks ``todo``, saving each as it completes; returns the seconds spent."""
    import torch
    from torch.utils.data import DataLoader

    loader: Any = DataLoader(
        _Images(request.images, request.preprocessing),  # type: ignore[arg-type]
        batch_sampler=_batches(todo, request.batch_size),
        num_workers=workers,
        collate_fn=_collate,
        worker_init_fn=_worker_init if workers else None,
        pin_memory=device.type == "cuda",
    )
    module = backbone.module.to(device)
    autocast: dict[str, Any] = {"enabled": request.precision != "fp32"}
    if request.precision != "fp32":
        autocast["dtype"] = torch.float16 if request.precision == "fp16" else torch.bfloat16
    by_start = {chunk.start: chunk for chunk in todo}
    started = time.perf_counter()
    current: _Chunk | None = None
    with torch.inference_mode(), torch.autocast(device.type, **autocast):
        for indices, batch, digests, reasons in loader:
            if current is None or indices[0] >= current.stop:
                current = by_start[indices[0]]
            good = [i for i, reason in zip(indices, reasons, strict=True) if not reason]
            if batch is not None:
                out = module(batch.to(device, non_blocking=True)).float().cpu().numpy()
                current.features.append(out)
                current.rows.extend(good)
            for i, digest, reason in zip(indices, digests, reasons, strict=True):
                current.digests[i] = digest
                if reason:
                    current.bad.append((i, reason))
            progress.advance(len(indices))
            if current.done:
                _write_chunk(partial, current, backbone.dim)
                current.features.clear()
    return time.perf_counter() - started


def _load_backbone(request: ExtractionRequest) -> Backbone:
    """A torchvision backbone cut at its layer, or an open_clip image tower."""
    input_size = request.preprocessing.output_size()
    if open_clip_arch(request.backbone) is not None:
        # open_clip is imported only when a CLIP backbone is asked for
        from harness.features.clip import load_image_tower

        return load_image_tower(request.backbone, request.weights, request.layer, input_size)
    return load_backbone(request.backbone, request.weights, request.layer, input_size)


def _existing(out: Path, key: dict[str, Any]) -> ArtifactSet | None:
    if not out.exists():
        return None
    if not (out / MANIFEST).is_file():
        raise HarnessError(f"{out} exists and is not a feature set; choose another --out")
    found = ArtifactSet(out, kind="features")
    if found.provenance.get("request") != json_sha256(key):
        raise HarnessError(
            f"{out} already holds a feature set made by another extraction"
            f" ({found.hash}); choose another --out or delete it"
        )
    found.verify()
    return found


def _bad_message(bad: list[BadImage], partial: Path, n_images: int) -> str:
    shown = "; ".join(f"{b.path}: {b.reason}" for b in bad[:BAD_IMAGES_SHOWN])
    more = f" (and {len(bad) - BAD_IMAGES_SHOWN} more)" if len(bad) > BAD_IMAGES_SHOWN else ""
    return (
        f"{len(bad)} of {n_images} image(s) could not be read: {shown}{more}. Nothing was"
        " sealed. Fix or remove them, or run again with --skip-bad to leave them out (they are"
        f" recorded in the feature set); the other images' features are kept in {partial}, so"
        " the rerun extracts nothing again"
    )


def extract_features(
    request: ExtractionRequest,
    out: Path,
    *,
    skip_bad: bool = False,
    workers: int = 0,
    device: str | None = None,
    quiet: bool = False,
) -> Extraction:
    """Extract ``request`` into the feature set ``out`` (or resume it, or return it when it is
    already there, made by the same request)."""
    import torch

    torch_device = _device(device)
    key = request.key(torch_device.type)
    existing = _existing(out, key)
    if existing is not None:
        return Extraction(existing, 0, 0.0, already_there=True)
    if torch_device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    backbone = _load_backbone(request)
    partial = partial_dir(out)
    _open_partial(partial, key)
    n = len(request.images)
    chunks = [
        _Chunk(k, start, min(start + request.chunk_images, n))
        for k, start in enumerate(range(0, n, request.chunk_images))
    ]
    todo = [chunk for chunk in chunks if _read_chunk(partial, chunk.number) is None]
    progress = _Progress(n, n - sum(c.stop - c.start for c in todo), quiet)
    try:
        seconds = _run_chunks(request, backbone, todo, partial, torch_device, workers, progress)
    finally:
        progress.close()
    extracted = sum(c.stop - c.start for c in todo)
    feature_set = _seal(request, backbone, chunks, partial, out, key, torch_device, skip_bad)
    return Extraction(feature_set, extracted, seconds)


def _seal(
    request: ExtractionRequest,
    backbone: Backbone,
    chunks: list[_Chunk],
    partial: Path,
    out: Path,
    key: dict[str, Any],
    device: Any,
    skip_bad: bool,
) -> ArtifactSet:
    images = request.images
    records = []
    for chunk in chunks:
        found = _read_chunk(partial, chunk.number)
        if found is None:
            raise HarnessError(f"{partial}: chunk {chunk.number} is missing; run again")
        records.append(found)
    bad = [
        BadImage(int(i), images.paths[int(i)], str(reason))
        for record, _ in records
        for i, reason in record["bad"]
    ]
    if bad and not skip_bad:
        raise HarnessError(_bad_message(bad, partial, len(images)))
    rows = np.array([r for record, _ in records for r in record["rows"]], dtype=np.int64)
    if rows.size == 0:
        raise HarnessError("no image could be read; nothing to seal")
    digests = [d for record, _ in records for d in record["sha256"]]
    dim = int(records[0][0]["dim"])

    def write_features(folder: Path) -> list[str]:
        # assembled chunk by chunk in a memory-mapped file: never all in memory
        features = np.lib.format.open_memmap(
            folder / "features.npy", mode="w+", dtype=np.float32, shape=(rows.size, dim)
        )
        offset = 0
        for _, block in records:
            features[offset : offset + block.shape[0]] = block
            offset += block.shape[0]
        features.flush()
        del features
        return ["features"]

    arrays: dict[str, np.ndarray] = {
        "labels": images.labels[rows].astype(np.int64),
        "class_ids": np.array(images.class_ids),
        "paths": np.array([images.paths[i] for i in rows.tolist()]),
        "image_sha256": np.array([digests[i] for i in rows.tolist()]),
    }
    if images.boxes is not None:
        arrays["boxes"] = images.boxes[rows].astype(np.float32)
    provenance = _provenance(request, backbone, key, device, bad, rows.size, digests)
    feature_set = write_set(out, arrays, "features", provenance, write_more=write_features)
    shutil.rmtree(partial, ignore_errors=True)
    return feature_set


def _provenance(
    request: ExtractionRequest,
    backbone: Backbone,
    key: dict[str, Any],
    device: Any,
    bad: list[BadImage],
    n_extracted: int,
    digests: list[str],
) -> dict[str, Any]:
    images = request.images
    return {
        "request": json_sha256(key),
        "backbone": backbone.describe(),
        "weights": request.weights.to_json(),
        "pretrained_on": request.pretrained_on.model_dump(mode="json", exclude_none=True),
        "preprocessing": request.preprocessing.model_dump(mode="json"),
        "preprocessing_summary": request.preprocessing.describe(),
        "precision": request.precision,
        "device": device.type,
        "batch_size": request.batch_size,
        "chunk_images": request.chunk_images,
        "deterministic": True,
        "images": {
            "n_listed": len(images),
            "n_extracted": n_extracted,
            "n_classes": len(images.class_ids),
            "listing_sha256": images.listing_sha256,
            "content_sha256": images.content_sha256(digests),
        },
        "skipped": [{"path": b.path, "reason": b.reason} for b in bad],
        "versions": _versions(*backbone.libraries),
    }
