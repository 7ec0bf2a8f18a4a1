"""harness.core.lazy: a module bound now, imported at its first attribute; a target resolved
(issue 28)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.lazy import import_target, lazy_module


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_binding_imports_nothing_until_an_attribute_is_used() -> None:
    out = _run(
        "import sys\n"
        "from harness.core.lazy import lazy_module\n"
        "specs = lazy_module('harness.spec')\n"
        "print('harness.spec' in sys.modules, 'harness' + '.spec' in repr(specs))\n"
        "load = specs.load_spec\n"
        "import harness.spec\n"
        "print('harness.spec' in sys.modules, load is harness.spec.load_spec)\n"
    )
    assert out.splitlines() == ["False True", "True True"]


def test_a_submodule_binds_without_importing_its_package() -> None:
    # LazyLoader's find_spec would execute harness.data (NumPy, pydantic) right away.
    out = _run(
        "import sys\n"
        "from harness.core.lazy import lazy_module\n"
        "lazy_module('harness.data.prepare')\n"
        "print(sorted(m for m in sys.modules if m.startswith('harness.data') or m == 'numpy'))\n"
    )
    assert out == "[]"


def test_a_typo_fails_loudly_at_first_use() -> None:
    # Binding finds nothing, so a misspelt name binds; its first attribute raises what an
    # import would. tests/cli/test_cli_startup.py imports every name the CLI binds.
    misspelt = lazy_module("harness.no_such_module")
    with pytest.raises(ModuleNotFoundError, match=r"harness\.no_such_module"):
        misspelt.anything  # noqa: B018


def test_a_missing_attribute_is_the_modules_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        lazy_module("harness.core.hashing").no_such_name  # noqa: B018


def test_a_monkeypatched_module_is_seen_through_the_binding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness.core.hashing as hashing

    bound = lazy_module("harness.core.hashing")
    monkeypatch.setattr(hashing, "file_sha256", lambda path: "patched")
    assert bound.file_sha256("x") == "patched"


def test_a_target_names_an_object_or_a_module() -> None:
    from harness.core import textio

    assert import_target("harness.core.textio:read_text_file") is textio.read_text_file
    assert import_target("harness.core.textio") is textio
    with pytest.raises(AttributeError):
        import_target("harness.core.textio:no_such_function")
    with pytest.raises(ModuleNotFoundError):
        import_target("harness.core.no_such_module:anything")


def _lazy_packages() -> list[str]:
    """Every harness package whose ``__init__`` calls ``lazy_attributes``."""
    return sorted(
        ".".join(path.parent.parts)
        for path in Path("harness").rglob("__init__.py")
        if "lazy_attributes(" in path.read_text(encoding="utf-8")
    )


def _type_checking_imports(package: str) -> set[tuple[str, str]]:
    """``(module, name)`` of each name the package imports under ``if TYPE_CHECKING:``."""
    path = Path(*package.split("."), "__init__.py")
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                found |= {(statement.module, alias.name) for alias in statement.names}
    return found


def test_the_lazy_packages_are_found() -> None:
    assert {"harness.store", "harness.runners"} <= set(_lazy_packages())


@pytest.mark.parametrize("package", _lazy_packages())
def test_what_mypy_reads_of_a_lazy_package_is_what_it_imports(package: str) -> None:
    # The names are written twice (for mypy, for lazy_attributes): they must agree.
    imported = _type_checking_imports(package)
    module = importlib.import_module(package)
    # __all__: the lazy names, after any the package defines itself (the runners' BACKENDS)
    lazy = sorted(name for _, name in imported)
    own = [name for name in module.__all__ if name not in lazy]
    assert all(name in vars(module) for name in own)
    assert module.__all__ == own + lazy
    for source, name in sorted(imported):
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
        assert name in vars(module)  # kept: the next read skips __getattr__
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_importing_a_lazy_package_imports_none_of_its_modules() -> None:
    out = _run(
        "import sys, harness.store, harness.runners\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('sqlalchemy', 'sqlmodel', 'alembic', 'numpy')"
        " or m.startswith(('harness.store.', 'harness.runners.'))))\n"
        "from harness.store import db\n"  # a submodule is still importable from it
        "from harness.runners import runners\n"
        "print(db.__name__, list(runners))\n"
    )
    assert out.splitlines() == ["[]", "harness.store.db ['container', 'local', 'sandbox']"]
