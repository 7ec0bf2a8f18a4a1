"""Imported at first use (issue 28): a module bound now, a ``"module:object"`` target.

The CLI's command modules bind their implementation modules with :func:`lazy_module`, so that
defining the commands (and printing a command's ``--help``) imports none of them; the first
``pipeline.run_submission(...)`` in a command body imports ``harness.pipeline`` for real.
:func:`import_target` is what a registry's lazy entry and a text model's embed function are
resolved with.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["import_target", "lazy_module"]


class _LazyModule(ModuleType):
    """Stands for the module of its name; every attribute is read from the real module.

    Not ``importlib.util.LazyLoader``, whose spec lookup executes a submodule's package: see
    docs/core.md, ``lazy_module``.
    """

    def __getattr__(self, attribute: str) -> Any:
        # Called only for what the proxy itself lacks: every attribute of the real module.
        return getattr(importlib.import_module(self.__name__), attribute)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for the module ``name`` that imports it at its first attribute access.

    A name that names no module fails loudly there: :class:`ModuleNotFoundError` from the
    command that first uses it (and ``tests/cli/test_cli_startup.py`` imports every name
    the CLI binds, so a typo fails the tests before any user runs the command).
    """
    return _LazyModule(name)


def import_target(target: str) -> Any:
    """What ``target`` names, imported now: ``"module:object"`` the object, ``"module"`` the
    module (:class:`ModuleNotFoundError` or :class:`AttributeError` for a name that is not there).
    """
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module
