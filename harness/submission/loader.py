"""Import a package's model class from the package's ``.py`` source, and from nothing else.

The package hash covers the source a reviewer reads; the code that runs must be that source.
Python's default import machinery would prefer other files: an extension module
(``model.cpython-311-x86_64-linux-gnu.so``, ``model.abi3.so``, ``model.so``) beside ``model.py``
wins over it, a byte-code cache ``__pycache__/model.cpython-311.pyc`` is run instead of compiling
``model.py`` (an "unchecked-hash" pyc is never compared with the source at all), and a sourceless
``model.pyc`` imports without any source. Package validation
(:meth:`harness.submission.package.Package.files`) refuses all of these; this loader makes the
worker safe even if validation were bypassed.

See docs/submission.md.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.core.errors import SubmissionError

__all__ = [
    "ENTRYPOINT",
    "check_entrypoint",
    "import_entrypoint_module",
    "load_model_class",
]

#: ``module.path:ClassName``: dotted identifiers, one colon, one identifier.
ENTRYPOINT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*", re.ASCII)

_ROOTS: list[str] = []  # resolved package roots the hook answers for


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the ``.py`` file every time: never reads or writes cached byte-code."""

    def path_stats(self, path: str) -> dict[str, Any]:
        # get_code reads a pyc only after path_stats succeeds, and writes one only with the
        # mtime it returned; failing here switches both off (see docs/submission.md).
        raise OSError(f"{path}: byte-code caching is disabled for submission packages")

    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        # Unreachable while path_stats fails; kept inert so no future path writes into the
        # (read-only, hashed) package.
        return None


class _FindsNothing:
    """The finder for non-directory paths inside a package: nothing is importable from them."""

    def find_spec(self, fullname: str, target: ModuleType | None = None) -> None:
        return None

    def invalidate_caches(self) -> None:
        return None


def _inside_package(path: str) -> bool:
    full = os.path.realpath(path or os.getcwd())
    return any(full == root or full.startswith(root + os.sep) for root in _ROOTS)


def _path_hook(path: str) -> importlib.machinery.FileFinder | _FindsNothing:
    if not _inside_package(path):
        raise ImportError("not inside a submission package")  # the next hook decides
    if os.path.isdir(path or os.getcwd()):
        return importlib.machinery.FileFinder(
            path, (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES)
        )
    return _FindsNothing()


def install_source_only_hook(root: Path) -> str:
    """Make every import from inside ``root`` source-only; return ``root`` resolved."""
    resolved = os.path.realpath(root)
    if resolved not in _ROOTS:
        _ROOTS.append(resolved)
    if _path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _path_hook)
    # Finders made before the hook (by the default FileFinder hook) would still find .pyc/.so.
    for cached in list(sys.path_importer_cache):
        if _inside_package(cached):
            del sys.path_importer_cache[cached]
    importlib.invalidate_caches()
    return resolved


def check_entrypoint(entrypoint: str) -> tuple[str, str]:
    """``(module, class)`` of a ``module:Class`` entrypoint, or a clear :class:`SubmissionError`."""
    if not ENTRYPOINT.fullmatch(entrypoint):
        raise SubmissionError(
            f"entrypoint {entrypoint!r}: expected 'module:Class' (a dotted module path inside"
            " the package, a colon, a class name; ASCII letters, digits and _)"
        )
    module_name, class_name = entrypoint.split(":")
    return module_name, class_name


def import_entrypoint_module(package: Path, entrypoint: str) -> ModuleType:
    """The module of ``entrypoint`` (``module:Class``), imported from the ``.py`` source in
    ``package``; a :class:`SubmissionError` when there is no such source module."""
    module_name, _ = check_entrypoint(entrypoint)
    if not Path(package).is_dir():
        raise SubmissionError(f"{package}: no such package folder")
    sys.dont_write_bytecode = True  # belt and braces: SourceOnlyLoader never writes anyway
    root = install_source_only_hook(Path(package))
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        parts = module_name.split(".")
        if err.name not in {".".join(parts[: i + 1]) for i in range(len(parts))}:
            raise  # the model's own import of something missing: the model's error
        raise SubmissionError(
            f"entrypoint {entrypoint!r}: no module '{module_name}' as .py source in {package}"
            " (byte-code and compiled extension modules are never imported)"
        ) from None
    spec = module.__spec__
    origin = spec.origin if spec is not None else None
    if (
        spec is None
        or not isinstance(spec.loader, SourceOnlyLoader)
        or origin is None
        or not _inside_package(origin)
    ):
        raise SubmissionError(
            f"entrypoint {entrypoint!r}: module '{module_name}' comes from {origin or 'Python'},"
            f" not from the package's .py source; give the package's module another name"
        )
    return module


def load_model_class(package: Path, entrypoint: str) -> type:
    """Import ``entrypoint`` (``module:Class``) from the ``.py`` source in ``package``."""
    _, class_name = check_entrypoint(entrypoint)
    module = import_entrypoint_module(package, entrypoint)
    origin = module.__spec__.origin if module.__spec__ is not None else None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise SubmissionError(
            f"entrypoint {entrypoint!r}: {origin} defines no class '{class_name}'"
        )
    return found
