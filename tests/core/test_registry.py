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


def test_a_lazy_entry_is_listed_without_import_and_resolved_on_get() -> None:
    reg = Registry[object]("widget")
    reg.add_lazy("join", "os.path:join")
    assert "join" in reg and list(reg) == ["join"] and not reg.is_loaded("join")
    reg.add_lazy("join", "os.path:join")  # announcing the same target again is fine
    with pytest.raises(RegistryError, match="already registered"):
        reg.add_lazy("join", "os.path:split")
    import os.path

    assert reg.get("join") is os.path.join and reg.is_loaded("join")


def test_a_lazy_module_entry_must_be_registered_by_its_module() -> None:
    reg = Registry[object]("widget")
    reg.add_lazy("missing", "json")
    with pytest.raises(RegistryError, match="importing json did not register widget 'missing'"):
        reg.get("missing")


def test_a_lazy_entry_may_be_registered_by_its_module_after_freeze() -> None:
    reg = Registry[object]("widget")
    reg.add_lazy("late", "some.module")
    reg.freeze()
    item = object()
    assert reg.add("late", item) is item  # what an imported family module does
    with pytest.raises(RegistryError, match="frozen"):
        reg.add("other", object())
    with pytest.raises(RegistryError, match="frozen"):
        reg.add_lazy("other", "some.module")
