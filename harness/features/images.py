"""Which images to extract: a folder of class folders, or an image list.

- A **folder** ``DIR/<class_id>/<image>``: every file with an image suffix
  (:data:`IMAGE_SUFFIXES`) in each class folder, classes and files in sorted order; hidden
  files and folders are left out.
- A **list** (a text file): one image per line, ``path<TAB>class_id`` or
  ``path<TAB>class_id<TAB>x1,y1,x2,y2`` (a bounding box in pixels, for box preprocessing);
  paths relative to the list's folder; ``#`` comments and blank lines skipped. Class order is
  sorted, image order is the list's.

Problems in the list itself (a bad line, an image listed twice) stop here with ``file:line``;
images that cannot be read are found while extracting (:mod:`harness.features.extract`), where
each is listed with its reason.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import HarnessError
from harness.core.hashing import json_sha256

__all__ = ["ImageList", "read_image", "read_images"]

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
)


@dataclass(frozen=True)
class ImageList:
    """Images to extract: ``paths[i]`` (as listed, for the record), ``files[i]`` (on disk),
    ``labels[i]`` indexing ``class_ids``, and optional ``boxes[i] = (x1, y1, x2, y2)``."""

    source: Path
    paths: tuple[str, ...]
    files: tuple[Path, ...]
    class_ids: tuple[str, ...]
    labels: np.ndarray
    boxes: np.ndarray | None

    def __len__(self) -> int:
        return len(self.paths)

    @cached_property
    def listing_sha256(self) -> str:
        """Hash of what is listed (paths, classes, boxes), not of the image bytes."""
        return json_sha256(
            {
                "paths": list(self.paths),
                "classes": [self.class_ids[i] for i in self.labels.tolist()],
                "boxes": None if self.boxes is None else self.boxes.tolist(),
            }
        )

    def content_sha256(self, digests: list[str] | None = None) -> str:
        """Hash of the listing and every image file's bytes: ``digests`` (one ``sha256:…`` per
        image, ``""`` for a file that cannot be read) as extraction found them, else one pass
        over the files here."""
        if digests is None:
            digests = []
            for file in self.files:
                try:
                    with file.open("rb") as handle:
                        digest = hashlib.file_digest(handle, "sha256").hexdigest()
                    digests.append("sha256:" + digest)
                except OSError:
                    digests.append("")
        return json_sha256({"listing": self.listing_sha256, "files": digests})


def read_images(source: str | Path) -> ImageList:
    """The image list of ``source``: a folder of class folders or a list file."""
    path = Path(source)
    if path.is_dir():
        return _from_folder(path)
    if path.is_file():
        return _from_list(path)
    raise HarnessError(
        f"{path}: no such folder or image list (give a folder of class folders, or a list file"
        " of 'path<TAB>class_id' lines)"
    )


def _from_folder(root: Path) -> ImageList:
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    paths: list[str] = []
    files: list[Path] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        folder = root / name
        for file in sorted(folder.iterdir()):
            if file.name.startswith(".") or file.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            if file.is_file() or file.is_symlink():  # a dangling link is listed as unreadable
                paths.append(f"{name}/{file.name}")
                files.append(file)
                labels.append(label)
    if not paths:
        raise HarnessError(
            f"{root}: no images found; expected class folders holding image files"
            f" ({', '.join(sorted(IMAGE_SUFFIXES))})"
        )
    used = sorted(set(labels))
    if len(used) != len(classes):  # class folders without images are not classes
        remap = {old: new for new, old in enumerate(used)}
        classes = [classes[i] for i in used]
        labels = [remap[i] for i in labels]
    return ImageList(root, tuple(paths), tuple(files), tuple(classes), np.array(labels), None)


def _parse_box(text: str, where: str) -> list[float]:
    parts = text.replace(" ", ",").split(",")
    parts = [p for p in parts if p]
    try:
        box = [float(p) for p in parts]
    except ValueError:
        box = []
    if len(box) != 4 or not np.isfinite(box).all() or box[2] <= box[0] or box[3] <= box[1]:
        raise HarnessError(
            f"{where}: bounding box {text!r} is not 'x1,y1,x2,y2' with x2 > x1 and y2 > y1"
        )
    return box


def _from_list(file: Path) -> ImageList:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise HarnessError(f"{file}: cannot read the image list ({err})") from None
    base = file.parent
    rows: list[tuple[str, str, list[float] | None]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        where = f"{file}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) not in (2, 3) or not fields[0].strip() or not fields[1].strip():
            raise HarnessError(
                f"{where}: expected 'path<TAB>class_id' or 'path<TAB>class_id<TAB>x1,y1,x2,y2',"
                f" got {len(fields)} tab-separated field(s)"
            )
        path, class_id = fields[0].strip(), fields[1].strip()
        if path in seen:
            raise HarnessError(f"{where}: {path} is listed twice (first at line {seen[path]})")
        seen[path] = number
        box = _parse_box(fields[2], where) if len(fields) == 3 else None
        rows.append((path, class_id, box))
    if not rows:
        raise HarnessError(f"{file}: the image list is empty")
    with_box = sum(r[2] is not None for r in rows)
    if 0 < with_box < len(rows):
        first = next(i for i, r in enumerate(rows) if r[2] is None)
        raise HarnessError(
            f"{file}: {with_box} of {len(rows)} images have a bounding box; give one for every"
            f" image or none (first without: {rows[first][0]})"
        )
    classes = sorted({r[1] for r in rows})
    index = {c: i for i, c in enumerate(classes)}
    boxes = np.array([r[2] for r in rows], dtype=np.float32) if with_box else None
    return ImageList(
        file,
        tuple(r[0] for r in rows),
        tuple(base / r[0] for r in rows),
        tuple(classes),
        np.array([index[r[1]] for r in rows], dtype=np.int64),
        boxes,
    )


def read_image(file: Path) -> tuple[Any, str]:
    """Decode ``file`` fully as RGB; returns (PIL image, sha256 of its bytes). Raises
    ``ValueError`` with the reason when the file is missing, unreadable or not a whole image."""
    from PIL import Image, UnidentifiedImageError

    try:
        data = file.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read the file ({err.strerror})") from None
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if not data:
        raise ValueError("empty file")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()  # decode everything now: a truncated file fails here, not later
            return image.convert("RGB"), digest
    except UnidentifiedImageError:
        raise ValueError("not an image file PIL can identify") from None
    except Image.DecompressionBombError as err:
        raise ValueError(f"refused as a decompression bomb ({err})") from None
    except (OSError, SyntaxError, ValueError) as err:
        raise ValueError(f"corrupt or truncated image ({err})") from None
