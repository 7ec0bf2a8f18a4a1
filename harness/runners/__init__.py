"""Isolation backends for model code, behind one interface (see ``base``).

The backends (:data:`BACKENDS`) import much of the harness (GPU leases, images, the data layer),
code that runs inside a sandbox imports modules of this package too
(:mod:`harness.runners.protocol`), and ``zsl run --help`` lists the backends, so nothing is
imported here until a name of this module is used (PEP 562,
:func:`harness.core.lazy.lazy_attributes`). Each backend registers itself when imported; the
``runners`` registry imports every backend of :data:`BACKENDS` at its first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.lazy import lazy_attributes

#: Every backend, strongest isolation first, with what ``--runner``'s help says of it: the module
#: ``harness.runners.<name>`` registers the runner ``<name>`` when imported.
BACKENDS = {
    "sandbox": "bubblewrap",
    "container": "docker/podman: model.image or the worker image `zsl image build` makes",
    "local": "no isolation: only for your own trusted code",
}
#: The runner of a run that names none, in words (:func:`harness.runners.choice.default_runner`).
DEFAULT_CHOICE = (
    "the strongest this machine offers, sandbox > container > local (with a warning); the"
    " container first where the engine holds an image made for the package (its model.image,"
    " or `zsl image build --package`)"
)

# mypy reads the names here; at run time lazy_attributes imports each at its first use (so mypy
# never sees the __getattr__, and a misspelt name is a type error). Ruff cannot see the names
# exported: hence the noqa.
if TYPE_CHECKING:
    from harness.runners.base import RunJob, Runner, RunOutcome, runners  # noqa: F401
    from harness.runners.choice import default_runner  # noqa: F401
else:
    __getattr__, __dir__, _lazy_names = lazy_attributes(
        __name__,
        {
            "harness.runners.base": ("RunJob", "RunOutcome", "Runner", "runners"),
            "harness.runners.choice": ("default_runner",),
        },
    )
    __all__ = ["BACKENDS", "DEFAULT_CHOICE", *_lazy_names]
