"""Which runner a run uses when none is named: the strongest this machine offers."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING

from harness.core.errors import RunnerError
from harness.runners import container as _container
from harness.runners import sandbox as _sandbox
from harness.runners.environments import image_for_package

if TYPE_CHECKING:
    from harness.submission.package import Package

__all__ = ["default_runner"]

LOCAL_WARNING = (
    "warning: neither bubblewrap (runner 'sandbox') nor, for a package with model.image, a"
    " container engine (runner 'container') is usable here: running with runner 'local', which"
    " does not isolate the code from your files, network and user; use it only for code you"
    " trust (install bubblewrap, or pass --runner)"
)


def default_runner(package: Package | None = None) -> str:
    """The strongest runner this machine offers for ``package``: the one a run uses by default.

    ``container`` when the engine holds an image made for the package (its ``model.image``, or
    the worker image ``zsl image build --package`` built with its requirements:
    :func:`~harness.runners.environments.image_for_package`); else ``sandbox`` where bubblewrap
    can create a sandbox; else ``container`` when a docker/podman engine is on PATH and the
    package names ``model.image``; else ``local``, with a warning on stderr, since ``local`` is
    only for trusted code.
    """
    if package is not None and image_for_package(package) is not None:
        return "container"
    if _sandbox.available():
        return "sandbox"
    model = package.manifest.model if package is not None else None
    if model is not None and model.image:
        try:
            engine = _container.ContainerRunner().engine
        except RunnerError:
            engine = None
        if engine is not None and shutil.which(engine) is not None:
            return "container"
    print(LOCAL_WARNING, file=sys.stderr, flush=True)
    return "local"
