"""One generic name → implementation registry.

The spec refers to metrics, data adapters and runners by name; this module is the one place where
a name becomes code. A duplicate name with a different target fails loudly, an unknown name gets a
"did you mean" hint, and ``freeze_all()`` makes every registry read-only before a run.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from harness.core.errors import HarnessError

__all__ = [
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
        self._items: dict[str, T] = {}
        self._frozen = False
        self._lock = threading.Lock()
        _ALL.append(self)  # type: ignore[arg-type]

    def add(self, name: str, item: T) -> T:
        with self._lock:
            if self._frozen:
                raise RegistryError(
                    f"the {self.kind} registry is frozen; register '{name}' at import"
                )
            existing = self._items.get(name)
            if existing is not None and existing is not item:
                raise RegistryError(f"{self.kind} '{name}' is already registered to {existing!r}")
            self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def decorate(item: T) -> T:
            return self.add(name, item)

        return decorate

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        names = sorted(self._items)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"unknown {self.kind} '{name}'.{hint} Available: {', '.join(names) or '(none)'}"

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

    def freeze(self) -> None:
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def _clear(self) -> None:
        """Tests only: forget everything and unfreeze."""
        with self._lock:
            self._items.clear()
            self._frozen = False


def freeze_all() -> None:
    """Make every registry read-only; called once the built-ins are imported, before any run."""
    for registry in _ALL:
        registry.freeze()
