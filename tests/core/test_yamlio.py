"""The YAML + pydantic loader's pieces: documents with lines, problems at their file and line."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, model_validator

from harness.core import yamlio
from harness.core.errors import HarnessError


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["fast", "slow"]
    inner: _Inner = _Inner()

    @model_validator(mode="after")
    def _slow_is_small(self) -> _Doc:
        if self.mode == "slow" and self.inner.size > 1:
            raise ValueError("inner.size: a slow document holds size 1")
        return self


def test_a_document_and_the_line_of_every_key_path() -> None:
    data, lines = yamlio.load_document("mode: fast\ninner:\n  size: 2\n", "d.yaml")
    assert data == {"mode": "fast", "inner": {"size": 2}}
    assert lines == {(): 1, ("mode",): 1, ("inner",): 2, ("inner", "size"): 3}
    assert yamlio.load_document("", "d.yaml") == (None, {})


@pytest.mark.parametrize(
    ("key_paths", "message"),
    [
        (False, "d.yaml:4: duplicate key 'size' (first at line 3); refused"),
        (True, "d.yaml:4: inner.size: duplicate key (first at line 3)"),
    ],
)
def test_the_first_repeated_key_in_document_order(key_paths: bool, message: str) -> None:
    text = "mode: fast\ninner:\n  size: 2\n  size: 3\nmode: slow\n"
    with pytest.raises(HarnessError) as info:
        yamlio.load_document(text, "d.yaml", key_paths=key_paths)
    assert str(info.value) == message


def test_invalid_yaml_and_unsafe_tags_name_the_line() -> None:
    with pytest.raises(HarnessError, match=r"^d\.yaml:2: not valid YAML: mapping values"):
        yamlio.load_document("mode: fast\ninner: a: b\n", "d.yaml")
    with pytest.raises(HarnessError, match=r"^d\.yaml:1: not valid YAML: could not determine"):
        yamlio.load_document("mode: !!python/object/apply:os.system ['true']\n", "d.yaml")


def test_problems_across_two_files_are_listed_the_document_first() -> None:
    where: dict[yamlio.Loc, Any] = {(): ("d.yaml", 1), ("mode",): ("d.yaml", 2)}
    where[("inner",)] = ("_base.yaml", 1)
    where[("inner", "size")] = ("_base.yaml", 2)
    inner: dict[str, Any] = {"size": 2, "colour": "red"}
    data: dict[str, Any] = {"mode": "slow", "inner": inner, "extends": "_base.yaml"}
    with pytest.raises(HarnessError) as info:
        yamlio.validate_model(data, _Doc, "d.yaml", where)
    assert str(info.value) == (
        "2 problems in d.yaml:\n"
        "  d.yaml:1: extends: unknown key 'extends'. Allowed keys: inner, mode\n"
        "  _base.yaml:1: inner.colour: unknown key 'colour'. Allowed keys: size"
    )
    del data["extends"], inner["colour"]
    with pytest.raises(HarnessError) as info:
        yamlio.validate_model(
            data, _Doc, "d.yaml", where, also_allowed=["extends"], checks=lambda d: [((), "odd")]
        )
    assert str(info.value) == (  # a whole-document check is placed at the key it names
        "2 problems in d.yaml:\n"
        "  d.yaml:1: (top level): odd\n"
        "  _base.yaml:2: inner.size: a slow document holds size 1"
    )


def test_a_literal_names_its_choices_and_what_it_got() -> None:
    with pytest.raises(HarnessError) as info:
        yamlio.load_model("mode: quick\n", "d.yaml", _Doc)
    assert str(info.value) == (
        "1 problem in d.yaml:\n  d.yaml:1: mode: must be one of 'fast', 'slow'; got 'quick'"
    )
    with pytest.raises(HarnessError) as info:
        yamlio.load_model("mode: flow\n", "d.yaml", _Doc)
    assert str(info.value) == (
        "1 problem in d.yaml:\n"
        "  d.yaml:1: mode: must be one of 'fast', 'slow'; got 'flow'. Did you mean 'slow'?"
    )


class _Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class _Format(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["dense", "topk"] = "dense"
    k: int | None = None

    @model_validator(mode="after")
    def _k_for_topk(self) -> _Format:
        if self.format == "topk" and self.k is None:
            raise ValueError("format 'topk' needs 'k'")
        if self.format == "dense" and self.k is not None:
            raise ValueError("'k' is only for format 'topk'")
        return self


class _Choices(BaseModel):
    model_config = ConfigDict(extra="forbid")

    colour: _Colour | None = None
    primary: dict[Literal["zsl", "gzsl"], str] = {}
    predictions: _Format = _Format()


def test_an_enum_and_a_mapping_key_list_their_choices_at_their_own_line() -> None:
    text = "colour: blue\nprimary:\n  zsl: top1\n  gzls: H\n"
    with pytest.raises(HarnessError) as info:
        yamlio.load_model(text, "c.yaml", _Choices)
    assert str(info.value) == (
        "2 problems in c.yaml:\n"
        "  c.yaml:1: colour: must be one of 'red', 'green'; got 'blue'\n"
        "  c.yaml:4: primary.gzls: key must be one of 'zsl', 'gzsl'; got 'gzls'."
        " Did you mean 'gzsl'?"
    )
    assert yamlio.allowed_values(_Choices, ("colour",)) == ["red", "green"]
    assert yamlio.allowed_values(_Choices, ("primary",), key=True) == ["zsl", "gzsl"]
    assert yamlio.allowed_values(_Choices, ("predictions", "k")) is None
    # Where the annotation says nothing, pydantic's own list is used.
    assert yamlio.allowed_values(_Doc, ("nowhere",), expected={"expected": "'a', 'b' or 'c'"}) == [
        "a",
        "b",
        "c",
    ]


def test_a_nested_check_is_placed_at_the_key_it_names() -> None:
    text = "colour: red\npredictions:\n  format: topk\n"
    with pytest.raises(HarnessError) as info:
        yamlio.load_model(text, "c.yaml", _Choices)
    assert str(info.value) == (
        "1 problem in c.yaml:\n  c.yaml:3: predictions.format: format 'topk' needs 'k'"
    )
    text = "predictions:\n  format: dense\n  k: 5\n"
    with pytest.raises(HarnessError) as info:
        yamlio.load_model(text, "c.yaml", _Choices)
    assert str(info.value) == (
        "1 problem in c.yaml:\n  c.yaml:3: predictions.k: 'k' is only for format 'topk'"
    )
    # 'format' is named first but not written (its default applies): placed at 'k'.
    text = "predictions:\n\n  k: 5\n"
    with pytest.raises(HarnessError, match=r"c\.yaml:3: predictions\.k: 'k' is only for"):
        yamlio.load_model(text, "c.yaml", _Choices)
