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
    assert report["overlap"] == [
        {"class": "n02084071", "name": "dog", "via": ["n02084071"], "by": "id"}
    ]
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


def test_normalize_name() -> None:
    from harness.audit import normalize_name

    assert normalize_name("014.Indigo_Bunting") == "indigo bunting"
    assert normalize_name("grizzly+bear") == "grizzly bear"
    assert normalize_name("Red-breasted  Merganser") == "red breasted merganser"
    assert normalize_name("church_indoor") == "church indoor"  # a scene, not the building


def test_classes_without_wordnet_ids_are_matched_by_name_or_reported() -> None:
    pretrained = frozenset({"n01537544", "n09472597"})
    syn = {"n01537544": ("indigo bunting", "indigo finch"), "n09472597": ("volcano",)}
    ids = ["cub:14", "sun:volcano", "sun:valley", "cub:unnamed"]
    names = {"cub:14": "014.Indigo_Bunting", "sun:volcano": "volcano", "sun:valley": "valley"}
    report = leakage_audit(ids, pretrained, names=names, pretrained_synonyms=syn)
    assert [(r["class"], r["via"], r["by"]) for r in report["overlap"]] == [
        ("cub:14", ["n01537544"], "name"),
        ("sun:volcano", ["n09472597"], "name"),
    ]
    assert report["n_not_wordnet"] == 4 and report["n_not_auditable"] == 1
    blind = leakage_audit(ids, pretrained, names=names)
    assert blind["n_overlap"] == 0 and blind["n_not_auditable"] == 4


@pytest.mark.skipif(not (SHARED_DATA / "xlsa17").is_dir(), reason="xlsa17 files not in shared data")
@pytest.mark.skipif(
    not (SHARED_DATA / "imagenet").is_dir(), reason="ImageNet lists not in shared data"
)
def test_cub_and_sun_classes_seen_by_imagenet_1k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over ALL classes of CUB and SUN (not a split): what the name audit finds in ILSVRC-2012."""
    import scipy.io as sio

    from harness.audit import synonyms_for

    monkeypatch.setenv("ZSL_IMAGENET_DIR", str(SHARED_DATA / "imagenet"))
    pretrained = pretrained_classes("ilsvrc2012", None)
    syn = synonyms_for("ilsvrc2012", pretrained)
    found = {}
    for dataset in ("CUB", "SUN"):
        mat = sio.loadmat(SHARED_DATA / "xlsa17" / dataset / "att_splits.mat")
        names = [str(x[0][0]) for x in mat["allclasses_names"]]
        ids = [f"{dataset}:{i}" for i in range(len(names))]
        report = leakage_audit(
            ids, pretrained, names=dict(zip(ids, names, strict=True)), pretrained_synonyms=syn
        )
        found[dataset] = {r["name"] for r in report["overlap"]}
    assert found["CUB"] == {"014.Indigo_Bunting", "090.Red_breasted_Merganser"}
    assert {"volcano", "valley", "lighthouse", "cliff"} <= found["SUN"]
    assert len(found["SUN"]) == 31
