"""Isolation backends for model code, behind one interface (see ``base``).

The backends (:data:`BACKENDS`) register themselves when imported, and they import much of the
harness (GPU leases, images, the data layer). Code that runs inside a sandbox imports modules of
this package too (:mod:`harness.runners.protocol`), and ``zsl run --help`` lists the backends, so
nothing is imported here until a name of this module is used: ``runners`` and ``default_runner``
then import every backend first, so each name resolves to a registered runner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.runners.base import RunJob, Runner, RunOutcome, runners
    from harness.runners.choice import default_runner

__all__ = [
    "BACKENDS",
    "DEFAULT_CHOICE",
    "RunJob",
    "RunOutcome",
    "Runner",
    "default_runner",
    "runners",
]

#: Every backend, strongest isolation first, with what ``--runner``'s help says of it: the module
#: ``harness.runners.<name>`` registers the runner ``<name>`` when imported.
BACKENDS = {
    "sandbox": "bubblewrap",
    "container": "docker/podman: model.image or the worker image `zsl image build` makes",
    "local": "no isolation: only for your own trusted code",
}
#: The runner of a run that names none, in words (:func:`harness.runners.choice.default_runner`).
DEFAULT_CHOICE = "the strongest this machine offers, sandbox > container > local (with a warning)"

_FROM = {
    "RunJob": "harness.runners.base",
    "RunOutcome": "harness.runners.base",
    "Runner": "harness.runners.base",
    "runners": "harness.runners.base",
    "default_runner": "harness.runners.choice",
}


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module 'harness.runners' has no attribute {name!r}")
    for backend in BACKENDS:  # each registers itself
        importlib.import_module(f"harness.runners.{backend}")
    return getattr(importlib.import_module(_FROM[name]), name)
