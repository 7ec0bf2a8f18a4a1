"""The metric record is the only description of a metric (issue 28, item 1).

Every registered metric carries each fact the site, the glossary, the CSV tables and
``zsl metrics`` need (group, figure, direction, averaging unit, formula, reference, ...), and
the site reads those facts from the registry: a metric registered with group "darts" files its
column under DARTS, one registered with a figure kind is drawn, with no site edit.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from harness.metrics import Metric, metrics, register_metric
from harness.metrics.base import AVERAGING_TEXT, FIGURE_KINDS, METRIC_GROUPS
from harness.scoring import chance_checked
from harness.site import cross
from harness.site.model import functions_drawn_as, registered_metric
from harness.site.pages.benchmark import COLUMN_GROUPS, column_group

#: Text fields a metric may leave empty: a note only where the unit alone does not say enough,
#: a short header only where the literature's tables have one. Every other text field of
#: :class:`Metric` must be filled by every registration (a new field joins this set or is
#: required of every metric).
OPTIONAL_TEXT = {"averaging_note", "short_name", "short_description"}

SITE = Path(cross.__file__).parent


def _registered(registered: str, **changes: object) -> Metric:
    """A copy of metric ``registered`` with ``changes`` (for a monkeypatched registry)."""
    return dataclasses.replace(metrics.get(registered), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(metrics))
def test_every_registered_metric_has_every_field(name: str) -> None:
    metric = metrics.get(name)
    for field in dataclasses.fields(Metric):
        value = getattr(metric, field.name)
        if field.type == "str" and field.name not in OPTIONAL_TEXT:
            assert value.strip(), f"metric '{name}' lacks `{field.name}`"
    assert metric.group in METRIC_GROUPS
    assert metric.averaged_over in AVERAGING_TEXT
    assert metric.figure is None or metric.figure in FIGURE_KINDS
    assert bool(metric.short_name) == bool(metric.short_description)
    assert metric.bounds[0] < metric.bounds[1]


def test_group_is_required_of_every_registration() -> None:
    assert inspect.signature(register_metric).parameters["group"].default is inspect._empty
    with pytest.raises(TypeError, match="group"):
        register_metric("toy", version="1", averaged_over="images")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"`group` of metric 'toy'.*'other'"):
        register_metric("toy", version="1", averaged_over="images", group="other")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`figure` of metric 'toy'"):
        register_metric(
            "toy",
            version="1",
            averaged_over="images",
            group="flat",
            figure="pie",  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="`short_name` and `short_description`"):
        register_metric("toy", version="1", averaged_over="images", group="flat", short_name="t")
    assert "toy" not in metrics


def test_every_figure_kind_and_group_is_held_by_a_registered_metric() -> None:
    assert {m.figure for _, m in metrics.items()} - {None} == set(FIGURE_KINDS)
    assert {m.group for _, m in metrics.items()} == set(METRIC_GROUPS)
    # Every group the registry can hold has a place (and a label) in the site's chooser.
    assert set(METRIC_GROUPS) | {"other"} == set(COLUMN_GROUPS)


def test_column_group_comes_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    assert column_group("darts_area") == "darts"
    assert column_group("toy_reward") == "other"  # an old record's unknown function
    monkeypatch.setitem(
        metrics._items, "toy_reward", _registered("darts_reward", name="toy_reward")
    )
    assert column_group("toy_reward") == "darts"
    monkeypatch.setitem(
        metrics._items, "darts_area", _registered("darts_area", group="hierarchical")
    )
    assert column_group("darts_area") == "hierarchical"


def test_figures_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    assert functions_drawn_as("darts_curve", "darts_operating_point") == (
        "darts_area",
        "darts_reward",
    )
    assert functions_drawn_as("top_k_curve") == ("per_class_top_k_accuracy",)
    monkeypatch.setitem(metrics._items, "a_toy_area", _registered("darts_area", name="a_toy_area"))
    # In the order of the kinds asked for, then by name.
    assert functions_drawn_as("darts_curve", "darts_operating_point") == (
        "a_toy_area",
        "darts_area",
        "darts_reward",
    )
    assert functions_drawn_as("seen_unseen_curve") == ("ausuc",)
    monkeypatch.setitem(metrics._items, "ausuc", _registered("ausuc", figure=None))
    assert functions_drawn_as("seen_unseen_curve") == ()


def test_unregistered_function_keeps_todays_behaviour() -> None:
    assert registered_metric("removed_metric") is None
    assert column_group("removed_metric") == "other"
    assert not chance_checked("removed_metric")
    assert "removed_metric" not in functions_drawn_as(*FIGURE_KINDS)


def test_cross_table_columns_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cross.gzsl_functions() == {
        "gzsl_unseen_accuracy": ("u", "accuracy on the unseen classes' test images"),
        "gzsl_seen_accuracy": ("s", "accuracy on the seen classes' test images"),
        "gzsl_harmonic_mean": ("H", "harmonic mean of u and s"),
    }
    monkeypatch.setitem(
        metrics._items, "gzsl_harmonic_mean", _registered("gzsl_harmonic_mean", short_name="")
    )
    monkeypatch.setitem(
        metrics._items,
        "calibrated_harmonic_mean",
        _registered("calibrated_harmonic_mean", short_name="H", short_description="calibrated H"),
    )
    assert list(cross.gzsl_functions().items())[-1] == (
        "calibrated_harmonic_mean",
        ("H", "calibrated H"),
    )


def test_chance_check_comes_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = {name for name in metrics if chance_checked(name)}
    assert checked == {"per_class_top_k_accuracy", "gzsl_unseen_accuracy", "gzsl_harmonic_mean"}
    monkeypatch.setitem(
        metrics._items,
        "gzsl_seen_accuracy",
        _registered("gzsl_seen_accuracy", checked_against_chance=True),
    )
    assert chance_checked("gzsl_seen_accuracy")


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module's code (docstrings left out: they may name examples)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    }


@pytest.mark.parametrize(
    "module", sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.py"))
)
def test_the_site_names_no_metric(module: str) -> None:
    """What the site knows of a metric it reads from the registry, never from a name list."""
    named = _string_constants(SITE / module) & set(metrics)
    assert not named, f"harness/site/{module} names metrics {sorted(named)}: register the fact"
