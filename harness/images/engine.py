"""What the image builder and the container runner ask a docker/podman engine: one module.

Every call is an argv list (never a shell), with the image reference after ``--`` where the
command takes one, and a time limit. An engine that cannot be reached is an :class:`ImageError`
saying what to start or set; an image that is not there is ``None``, for the caller to explain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import HarnessError

__all__ = [
    "ENGINES",
    "LABEL_INPUTS",
    "LABEL_REQUIREMENTS",
    "LABEL_VERSION",
    "ImageError",
    "ImageInfo",
    "engine_path",
    "inspect_image",
]

ENGINES = ("docker", "podman")
# Labels ``zsl image build`` puts on its images (read back by the runner and by the builder).
LABEL_VERSION = "org.zsl-harness.version"
LABEL_REQUIREMENTS = "org.zsl-harness.requirements"  # JSON list, normalised PEP 508 strings
LABEL_INPUTS = "org.zsl-harness.inputs"  # sha256 of everything the image was built from
INSPECT_TIMEOUT_S = 60


class ImageError(HarnessError):
    """A worker image cannot be built or found; the message says what to do."""


@dataclass(frozen=True)
class ImageInfo:
    """An image in the engine's store: its id (the content digest, ``sha256:…``) and labels."""

    reference: str
    id: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def pinned(self) -> str:
        """``reference@id``: what a run record says it ran in."""
        return f"{self.reference}@{self.id}"

    @property
    def requirements(self) -> list[str] | None:
        """The requirements a harness-built image was built with; None for any other image."""
        raw = self.labels.get(LABEL_REQUIREMENTS)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return [str(v) for v in value] if isinstance(value, list) else None


def engine_path(engine: str | None = None) -> str:
    """The engine's executable: ``engine``, else ``ZSL_CONTAINER_ENGINE``, else ``docker``,
    which must be docker or podman and on PATH."""
    name = engine or os.environ.get("ZSL_CONTAINER_ENGINE") or "docker"
    if os.path.basename(name) not in ENGINES:
        raise ImageError(
            f"container engine '{name}' is not supported: set ZSL_CONTAINER_ENGINE to one of"
            f" {', '.join(ENGINES)}"
        )
    path = shutil.which(name)
    if path is None:
        raise ImageError(
            f"'{name}' is not on PATH: install docker or podman (Debian: `apt-get install"
            " docker.io`), or set ZSL_CONTAINER_ENGINE to the one you have"
        )
    return path


def _unreachable(engine: str, stderr: str) -> ImageError:
    detail = stderr.strip().splitlines()[-1][:300] if stderr.strip() else "no answer"
    return ImageError(
        f"{engine}: the container engine does not answer ({detail}): start its daemon"
        " (`dockerd`, or `systemctl start docker`) or point DOCKER_HOST at it"
    )


def inspect_image(engine: str, reference: str) -> ImageInfo | None:
    """The image ``reference`` as the engine stores it, or None when it has no such image."""
    argv = [engine, "image", "inspect", "--format", "{{json .}}", "--", reference]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=INSPECT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise ImageError(f"{engine}: cannot ask the engine about '{reference}' ({err})") from None
    if done.returncode != 0:
        text = done.stderr.lower()
        if "no such" in text or "not found" in text or "unknown image" in text:
            return None
        raise _unreachable(engine, done.stderr)
    try:
        data = json.loads(done.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        raise ImageError(
            f"{engine} image inspect {reference}: unreadable answer {done.stdout[:200]!r}"
        ) from None
    if isinstance(data, list):  # podman answers a list
        data = data[0] if data else {}
    image_id = str(data.get("Id") or data.get("ID") or "")
    if not image_id:
        raise ImageError(f"{engine} image inspect {reference}: no image id in the answer")
    if ":" not in image_id:
        image_id = f"sha256:{image_id}"  # podman's ids are bare hex
    labels = (data.get("Config") or {}).get("Labels") or data.get("Labels") or {}
    return ImageInfo(reference, image_id, {str(k): str(v) for k, v in labels.items()})


def engine_name(engine: str) -> str:
    """``docker`` or ``podman`` for an executable path."""
    return Path(engine).name
