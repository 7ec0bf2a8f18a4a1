"""One generic name → implementation registry.

The spec refers to metrics, data adapters and runners by name; this module is the one place where
a name becomes code. A duplicate name with a different target fails loudly, an unknown name gets a
"did you mean" hint, and ``freeze_all()`` makes every registry read-only before a run.

Two ways to register without importing yet. :meth:`Registry.add_lazy` records a name with a
``"module:object"`` string, imported when the name is first looked up, not when the registry is
listed (``zsl --help`` imports no command): for tables that are the name's one definition. And
:meth:`Registry.add_modules` names modules that register their entries themselves (a decorator
or call beside each implementation), all imported the first time the registry is read: each name
is then written once, where its implementation is (the metric families). See docs/core.md.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from harness.core.errors import HarnessError
from harness.core.lazy import import_target

__all__ = [
    "Lazy",
    "Registry",
    "RegistryError",
    "T",
    "freeze_all",
]

T = TypeVar("T")

_ALL: list[Registry[object]] = []


class RegistryError(HarnessError, KeyError):
    """An unknown or conflicting registry name."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Lazy:
    """A registered name's implementation, not imported yet: ``"module:object"``, or ``"module"``
    when importing the module registers the name (see :meth:`Registry.add_lazy`)."""

    target: str

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def attribute(self) -> str:
        return self.target.partition(":")[2]


class Registry(Generic[T]):
    """A named, lockable mapping from names to implementations.

    >>> colours = Registry[str]("colour")
    >>> colours.add("red", "#f00")
    '#f00'
    >>> colours.get("red")
    '#f00'
    >>> colours.get("rde")
    Traceback (most recent call last):
    ...
    harness.core.registry.RegistryError: unknown colour 'rde'. Did you mean 'red'? Available: red
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T | Lazy] = {}
        self._frozen = False
        self._lock = threading.Lock()
        #: Modules that register entries when imported, not imported yet (see add_modules).
        self._modules: list[str] = []
        # Reentrant: a module being loaded may read its own registry while it registers.
        self._loading = threading.RLock()
        self._loading_now = False
        _ALL.append(self)  # type: ignore[arg-type]

    def add(self, name: str, item: T) -> T:
        with self._lock:
            existing = self._items.get(name)
            # A lazy entry's module registers the name when it is imported, which may be after
            # freeze_all(): the name was announced before, so the registry's contents are unchanged.
            if self._frozen and not isinstance(existing, Lazy):
                raise RegistryError(
                    f"the {self.kind} registry is frozen; register '{name}' at import"
                )
            if existing is not None and not isinstance(existing, Lazy) and existing is not item:
                raise RegistryError(f"{self.kind} '{name}' is already registered to {existing!r}")
            self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def decorate(item: T) -> T:
            return self.add(name, item)

        return decorate

    def add_lazy(self, name: str, target: str) -> None:
        """Register ``name`` to ``target`` (``"module:object"``, or ``"module"`` whose import
        registers ``name``), imported on the first :meth:`get` of ``name``."""
        with self._lock:
            if self._frozen:
                raise RegistryError(
                    f"the {self.kind} registry is frozen; register '{name}' at import"
                )
            existing = self._items.get(name)
            if existing is not None and existing != Lazy(target):
                raise RegistryError(f"{self.kind} '{name}' is already registered to {existing!r}")
            self._items[name] = Lazy(target)

    def add_modules(self, *modules: str) -> None:
        """Name ``modules`` whose import registers entries here; all are imported the first time
        the registry is read (:meth:`get`, ``in``, iteration, ``len``, :meth:`items`)."""
        with self._lock:
            if self._frozen:
                raise RegistryError(f"the {self.kind} registry is frozen; add modules at import")
            self._modules.extend(m for m in modules if m not in self._modules)

    def _load_modules(self) -> None:
        # Emptied only once every module has registered: another thread waits on the lock.
        if not self._modules:
            return
        with self._loading:
            if self._loading_now:  # a read from a module being loaded: what is registered so far
                return
            self._loading_now = True
            try:
                while self._modules:
                    import_target(self._modules[0])
                    del self._modules[0]
            finally:
                self._loading_now = False

    def get(self, name: str) -> T:
        self._load_modules()
        try:
            item = self._items[name]
        except KeyError:
            raise RegistryError(self.unknown_message(name)) from None
        return self._resolve(name, item) if isinstance(item, Lazy) else item

    def _resolve(self, name: str, lazy: Lazy) -> T:
        # Outside the lock: importing the module may register names (add takes the lock).
        found = import_target(lazy.target)
        with self._lock:
            current = self._items[name]
            if lazy.attribute:
                item = cast(T, found)
                if not isinstance(current, Lazy) and current is not item:
                    raise RegistryError(
                        f"{self.kind} '{name}' is registered to {current!r}, not {lazy.target}"
                    )
                self._items[name] = item
                return item
            if isinstance(current, Lazy):
                raise RegistryError(
                    f"importing {lazy.module} did not register {self.kind} '{name}'"
                )
            return current

    def is_loaded(self, name: str) -> bool:
        """Whether ``name``'s implementation is imported (a test of what a command imports)."""
        return name in self._items and not isinstance(self._items[name], Lazy)

    def unknown_message(self, name: str) -> str:
        self._load_modules()
        names = sorted(self._items)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"unknown {self.kind} '{name}'.{hint} Available: {', '.join(names) or '(none)'}"

    def __contains__(self, name: object) -> bool:
        self._load_modules()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load_modules()
        return iter(sorted(self._items))

    def __len__(self) -> int:
        self._load_modules()
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        """Every entry, lazy ones imported."""
        return [(name, self.get(name)) for name in self]

    def freeze(self) -> None:
        """Make the registry read-only, once the modules of :meth:`add_modules` have registered."""
        self._load_modules()
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def _clear(self) -> None:
        """Tests only: forget everything and unfreeze."""
        with self._lock:
            self._items.clear()
            self._modules.clear()
            self._frozen = False


def freeze_all() -> None:
    """Make every registry read-only; called once the built-ins are imported, before any run."""
    for registry in _ALL:
        registry.freeze()
