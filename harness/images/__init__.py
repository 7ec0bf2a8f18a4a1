"""Worker images for the container runner: built by ``zsl image build``, found by the runner.

:mod:`~harness.images.build` (the inputs, the online ``ENGINE build`` of the shipped
``Containerfile``), :mod:`~harness.images.rootfs` (the offline build from a Debian root file
system), :mod:`~harness.images.engine` (what is asked of docker/podman).
"""

from __future__ import annotations

from harness.images.build import (
    CONTAINER_UID,
    BuildInputs,
    build_command,
    build_image,
    collect_requirements,
)
from harness.images.engine import ImageError, ImageInfo, engine_path, inspect_image

__all__ = [
    "CONTAINER_UID",
    "BuildInputs",
    "ImageError",
    "ImageInfo",
    "build_command",
    "build_image",
    "collect_requirements",
    "engine_path",
    "inspect_image",
]
