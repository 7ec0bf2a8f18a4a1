from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path

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


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry[int]:
    """A registry, and modules ``widgets_one`` and ``widgets_two`` that register into it."""
    reg = Registry[int]("widget")
    home = types.ModuleType("widget_registry")
    home.widgets = reg  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "widget_registry", home)
    (tmp_path / "widgets_one.py").write_text(
        "from widget_registry import widgets\n"
        "widgets.add('one', 1)\n"
        "SEEN = sorted(widgets)  # a read while loading sees what is registered so far\n"
        "widgets.add('uno', 1)\n",
        encoding="utf-8",
    )
    (tmp_path / "widgets_two.py").write_text(
        "from widget_registry import widgets\nwidgets.add('two', 2)\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("widgets_one", "widgets_two"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return reg


@pytest.mark.parametrize(
    "read",
    [
        lambda reg: reg.get("two"),
        lambda reg: "two" in reg,
        lambda reg: list(reg),
        lambda reg: len(reg),
        lambda reg: reg.items(),
        lambda reg: reg.freeze(),
    ],
    ids=["get", "in", "iter", "len", "items", "freeze"],
)
def test_the_modules_of_a_registry_register_at_its_first_read(
    widgets: Registry[int], read: Callable[[Registry[int]], object]
) -> None:
    widgets.add_modules("widgets_one", "widgets_two")
    assert "widgets_one" not in sys.modules and not widgets.is_loaded("one")
    read(widgets)
    assert widgets.items() == [("one", 1), ("two", 2), ("uno", 1)]
    assert sys.modules["widgets_one"].SEEN == ["one"]


def test_modules_are_named_before_freeze_and_a_failed_import_is_tried_again(
    widgets: Registry[int],
) -> None:
    widgets.add_modules("widgets_missing", "widgets_two")
    with pytest.raises(ModuleNotFoundError):
        len(widgets)
    with pytest.raises(ModuleNotFoundError):
        widgets.get("two")
    widgets._clear()
    widgets.add_modules("widgets_two")
    widgets.freeze()
    assert list(widgets) == ["two"]
    with pytest.raises(RegistryError, match="frozen; add modules at import"):
        widgets.add_modules("widgets_one")
