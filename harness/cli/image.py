"""``zsl image``: build the worker images the container runner runs packages in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import reports_errors, stdout
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    from harness import images
else:
    # The implementation, imported when the command runs: its --help must not import it.
    images = lazy_module("harness.images")

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)


@app.command()
@reports_errors
def build(
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            help="base image with Python 3.11 and pip (default: python:3.11-slim); not used"
            " with --rootfs",
            show_default=False,
        ),
    ] = None,
    gpu: Annotated[
        bool, typer.Option("--gpu", help="the GPU image: torch with CUDA, tag suffix -gpu")
    ] = False,
    tag: Annotated[
        str | None,
        typer.Option(
            help="image tag (default: zsl-worker:<harness version>[-gpu], the image of packages"
            " that name none)",
            show_default=False,
        ),
    ] = None,
    rootfs: Annotated[
        Path | None,
        typer.Option(
            help="build offline from the Debian root file system in this folder (made with"
            " debootstrap when missing or empty): no registry needed",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    package: Annotated[
        list[Path] | None,
        typer.Option(
            help="install this package's model.requirements too (a submission folder, or a"
            " folder of them; repeatable)",
            exists=True,
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="docker or podman (default: ZSL_CONTAINER_ENGINE, else docker)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Build the worker image: this harness at its version, the packages' requirements, byte-code
    compiled, a non-root user. Prints TAG@DIGEST."""
    info, built = images.build_image(
        tag=tag, base=base_image, gpu=gpu, rootfs=rootfs, packages=package or [], engine=engine
    )
    stdout.print(f"{info.pinned}{'' if built else ' (up to date)'}", soft_wrap=True)
