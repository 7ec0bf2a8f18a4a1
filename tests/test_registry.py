from __future__ import annotations

import pytest

from harness.core.registry import Registry, RegistryError


def test_register_get_and_did_you_mean() -> None:
    reg = Registry[int]("widget")
    reg.add("alpha", 1)

    @reg.register("beta")
    def _beta() -> None: ...

    assert reg.get("alpha") == 1
    assert list(reg) == ["alpha", "beta"] and "beta" in reg and len(reg) == 2
    with pytest.raises(
        RegistryError,
        match=r"unknown widget 'alhpa'\. Did you mean 'alpha'\? Available: alpha, beta",
    ):
        reg.get("alhpa")


def test_conflicts_and_freeze() -> None:
    reg = Registry[object]("widget")
    item = object()
    reg.add("a", item)
    reg.add("a", item)  # same target again is fine
    with pytest.raises(RegistryError, match="already registered"):
        reg.add("a", object())
    reg.freeze()
    with pytest.raises(RegistryError, match="frozen"):
        reg.add("b", object())
    reg._clear()
    assert len(reg) == 0 and not reg.frozen
