"""Leakage audit: overlaps come from data (class sets, WordNet), never from a hard-coded list."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.audit import leakage_audit, pretrained_classes
from harness.errors import HarnessError
from tests.conftest import SHARED_DATA

WORDNET = Path("/usr/share/wordnet")
LEXNAMES = SHARED_DATA / "wordnet" / "lexnames"


def test_exact_overlap_and_non_wordnet_classes() -> None:
    report = leakage_audit(
        ["n02084071", "n02121808", "xlsa17:AWA2:rat"],
        frozenset({"n02084071", "n99999999"}),
        names={"n02084071": "dog"},
        source="toy",
    )
    assert report["n_overlap"] == 1 and report["n_test"] == 3 and report["n_not_wordnet"] == 1
    assert report["overlap"] == [{"class": "n02084071", "name": "dog", "via": ["n02084071"]}]
    with pytest.raises(HarnessError, match="match must be one of"):
        leakage_audit([], frozenset(), match="cousins")


def test_explicit_and_empty_class_sets() -> None:
    assert pretrained_classes("none", None) == frozenset()
    assert pretrained_classes(None, ["n02084071"]) == frozenset({"n02084071"})


@pytest.mark.skipif(
    not (WORDNET.is_dir() and LEXNAMES.is_file()), reason="WordNet 3.0 (wordnet-base) not installed"
)
def test_descendants_and_ancestors_through_wordnet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(WORDNET))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(LEXNAMES))
    chihuahua, dog, canine = "n02085620", "n02084071", "n02083346"
    exact = leakage_audit([dog], frozenset({chihuahua}))
    assert exact["n_overlap"] == 0
    down = leakage_audit([dog], frozenset({chihuahua}), match="descendants")
    assert down["n_overlap"] == 1 and down["overlap"][0]["via"] == [chihuahua]
    up = leakage_audit([dog], frozenset({canine}), match="ancestors")
    assert up["overlap"][0]["via"] == [canine]
    assert leakage_audit([dog], frozenset({canine}), match="descendants")["n_overlap"] == 0
    both = leakage_audit([dog], frozenset({canine, chihuahua}), match="both")
    assert both["overlap"][0]["via"] == sorted([canine, chihuahua])
