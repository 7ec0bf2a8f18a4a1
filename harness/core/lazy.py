"""Imported at first use (issue 28): a module bound now, a ``"module:object"`` target, the
public names of a package.

The CLI's command modules bind their implementation modules with :func:`lazy_module`, so that
defining the commands (and printing a command's ``--help``) imports none of them; the first
``pipeline.run_submission(...)`` in a command body imports ``harness.pipeline`` for real.
:func:`import_target` is what a registry's lazy entry and a text model's embed function are
resolved with. :func:`lazy_attributes` makes a package's names importable from it without
importing their modules until one is used (PEP 562). See docs/core.md.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["import_target", "lazy_attributes", "lazy_module"]


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


def lazy_attributes(
    package: str, names: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` of ``package`` (PEP 562), whose public names
    are ``names`` (``{module: (name, ...)}``), each imported from its module at first use.

    ``__getattr__, __dir__, __all__ = lazy_attributes(__name__, {...})`` in the package's
    ``__init__``, beside an ``if TYPE_CHECKING:`` import of the same names for mypy (a test
    checks the two agree). A name read once is kept in the package: later reads skip this.
    """
    origin = {name: module for module, listed in names.items() for name in listed}
    public = sorted(origin)

    def __getattr__(name: str) -> Any:
        if name not in origin:
            # The import system then tries a submodule: `from harness.store import db` works.
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(origin[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__, public
