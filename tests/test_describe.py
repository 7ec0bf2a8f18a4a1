"""`zsl spec describe --release-only` on the shipped specs, from the raw split files in shared data:
GBU Table I counts, the leakage audit of the standard splits, and the honest ImageNet splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.spec import load_spec_data
from tests.conftest import SHARED_DATA, SPECS

runner = CliRunner()
XLSA17 = SHARED_DATA / "xlsa17"
IMAGENET = SHARED_DATA / "imagenet"

# GBU Table I: attributes, train+val / test classes, trainval / test_seen / test_unseen images.
TABLE_I = {
    "awa1": (85, 27, 13, 10, 19_832, 4_958, 5_685),
    "awa2": (85, 27, 13, 10, 23_527, 5_882, 7_913),
    "cub": (312, 100, 50, 50, 7_057, 1_764, 2_967),
    "sun": (102, 580, 65, 72, 10_320, 2_580, 1_440),
    "apy": (64, 15, 5, 12, 5_932, 1_483, 7_924),
}


def _describe(spec: str, monkeypatch: pytest.MonkeyPatch) -> dict:  # type: ignore[type-arg]
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(XLSA17))
    monkeypatch.setenv("ZSL_IMAGENET_DIR", str(IMAGENET))
    result = runner.invoke(app, ["spec", "describe", str(SPECS / spec), "--release-only", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


@pytest.mark.skipif(not XLSA17.is_dir(), reason="xlsa17 split files not in shared data")
@pytest.mark.parametrize("dataset", sorted(TABLE_I))
def test_proposed_split_reproduces_gbu_table_1(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _describe(f"xlsa17/{dataset}-ps.yaml", monkeypatch)
    got = tuple(
        report[k]
        for k in (
            "n_attributes",
            "train_classes",
            "val_classes",
            "test_classes",
            "trainval_images",
            "test_seen_images",
            "test_unseen_images",
        )
    )
    assert got == TABLE_I[dataset]
    if dataset in ("awa1", "awa2", "apy"):
        # split diagnostics on the frozen WordNet hierarchy, without features
        assert report["structural_ratio"]["n_included"] == report["test_classes"]
        assert report["structural_ratio"]["value"] > 0
        assert report["mutual_exclusivity_violations"]["unseen"] == []


# -- the leakage audit against GBU Sec. 4.1 ------------------------------------------------------
#
# GBU names the standard-split test classes that are ILSVRC-2012 classes. The tests below derive
# the audit from the release's class lists, the committed class -> WordNet maps and WordNet, and
# compare with GBU's lists (the claims under test, so they are written here), explaining each
# class where the WordNet relation and GBU's list differ.

GBU_SS = {
    "awa1": {"chimpanzee", "giant+panda", "leopard", "persian+cat", "pig", "hippopotamus"},
    "awa2": {"chimpanzee", "giant+panda", "leopard", "persian+cat", "pig", "hippopotamus"},
    "apy": {"monkey", "wolf", "zebra", "mug", "building", "bag", "carriage"},
}


def _names_by_relation(leak: dict) -> dict[str, set[str]]:  # type: ignore[type-arg]
    out: dict[str, set[str]] = {}
    for entry in leak["classes"]:
        for relation, n in entry["counts"].items():
            if n:
                out.setdefault(relation, set()).add(entry["name"])
    return out


def _relatives(leak: dict, name: str, relation: str) -> set[str]:  # type: ignore[type-arg]
    entry = next(e for e in leak["classes"] if e["name"] == name)
    return {r["name"] for r in entry["relatives"] if r["relation"] == relation}


needs_audit_data = pytest.mark.skipif(
    not (XLSA17.is_dir() and IMAGENET.is_dir()), reason="shared data absent"
)


@needs_audit_data
@pytest.mark.usefixtures("wordnet_env")
@pytest.mark.parametrize("dataset", ["awa1", "awa2"])
def test_awa_standard_split_shows_gbus_six_ilsvrc_classes(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _describe(f"xlsa17/{dataset}-ss.yaml", monkeypatch)
    leak = report["leakage"]
    assert leak["source"] == "ilsvrc2012" and leak["n_test"] == 10
    by = _names_by_relation(leak)
    assert by["same"] == GBU_SS[dataset]  # GBU's 6 of 10, as the same class
    # Beyond GBU's list, at the hyponym level: ILSVRC's sea lion is a kind of AWA's seal.
    assert by["hyponym"] == {"seal"} and _relatives(leak, "seal", "hyponym") == {"sea lion"}
    assert _relatives(leak, "pig", "same") == {"hog"}  # ILSVRC names the pig 'hog'
    # the release flaw is reported, not hidden
    assert report["release_overlaps"]["train_or_val_loc_in_test"] > 0


@needs_audit_data
@pytest.mark.usefixtures("wordnet_env")
def test_apy_standard_split_shows_gbus_seven_with_their_ilsvrc_relatives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leak = _describe("xlsa17/apy-ss.yaml", monkeypatch)["leakage"]
    by = _names_by_relation(leak)
    counted = by["same"] | by["hyponym"]
    assert len(counted) == 7 and leak["n_test"] == 12
    assert by["same"] == {"zebra"}
    assert {"timber wolf", "coyote"} <= _relatives(leak, "wolf", "hyponym")
    assert {"macaque", "baboon"} <= _relatives(leak, "monkey", "hyponym")
    assert _relatives(leak, "mug", "hyponym") == {"coffee mug"}
    assert {"backpack", "purse"} <= _relatives(leak, "bag", "hyponym")
    assert {"library", "restaurant"} <= _relatives(leak, "building", "hyponym")
    # Where WordNet and GBU differ: WordNet files ILSVRC's ibex under goat (Capra), so goat is
    # leaked at the hyponym level; carriage (horse-drawn) has no ILSVRC relative within one hop,
    # only ILSVRC's horse cart as a far cousin under 'wheeled vehicle' (3 hops; below).
    assert counted ^ GBU_SS["apy"] == {"goat", "carriage"}
    assert _relatives(leak, "goat", "hyponym") == {"ibex"}
    assert "carriage" not in {e["name"] for e in leak["classes"]}


@needs_audit_data
@pytest.mark.usefixtures("wordnet_env")
def test_carriage_meets_ilsvrc_only_as_a_distant_cousin() -> None:
    from harness.audit import Relation, leakage_audit

    carriage, horse_cart, wheeled_vehicle = "n02968473", "n03538406", "n04576211"
    for within in (1, 2):  # carriage is 2 hops below 'wheeled vehicle', the horse cart 3
        assert (
            leakage_audit([carriage], frozenset({horse_cart}), related_within=within).classes == []
        )
    far = leakage_audit([carriage], frozenset({horse_cart}), related_within=3, match="both")
    (entry,) = far.classes
    assert entry.relations == {Relation.SIBLING} and far.n_overlap == 0
    (cart,) = entry.relatives
    assert (cart.name, cart.hops, cart.via) == ("horse cart", 5, wheeled_vehicle)


@needs_audit_data
@pytest.mark.usefixtures("wordnet_env")
@pytest.mark.parametrize("dataset", ["awa1", "awa2", "apy", "cub", "sun"])
def test_proposed_splits_are_clean_by_class_but_not_by_hyponym(
    dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GBU's PS has no ILSVRC-2012 class among its test classes, and the audit agrees; at the
    hyponym level the backbone still saw instances of some of them (aPY person: scuba diver)."""
    leak = _describe(f"xlsa17/{dataset}-ps.yaml", monkeypatch)["leakage"]
    by = _names_by_relation(leak)
    # One exception the class map reveals: SUN's PS test class monastery_outdoor is the building
    # ILSVRC-2012 calls 'monastery' (a name match cannot see it).
    assert by.get("same", set()) == ({"monastery_outdoor"} if dataset == "sun" else set())
    assert [e for e in leak["classes"] if e["mapping"] == "none"] == []  # every class audited
    hyponyms = by.get("hyponym", set())
    if dataset == "apy":
        assert {"person", "horse", "sheep", "goat", "cow"} <= hyponyms
        assert {"scuba diver", "groom"} <= _relatives(leak, "person", "hyponym")
    if dataset.startswith("awa"):
        assert hyponyms == {"seal", "horse", "sheep"}
    assert len(leak["classes"]) > 0


@needs_audit_data
@pytest.mark.usefixtures("wordnet_env")
@pytest.mark.parametrize(
    ("dataset", "user_test_classes", "expected"),
    [
        # GBU: 1 of CUB's 50 SS test classes, Indigo Bunting; the Laysan albatross (not in
        # WordNet, mapped 'broader') lies under ILSVRC's albatross: a hypernym, not counted.
        (
            "cub",
            ["014.Indigo_Bunting", "002.Laysan_Albatross", "011.Rusty_Blackbird"],
            {"same": {"014.Indigo_Bunting"}, "hypernym": {"002.Laysan_Albatross"}},
        ),
        # GBU's six SUN SS classes, as SUN names them. Counted: restaurant and planetarium
        # (same), tent and bridge (ILSVRC's mountain tent, suspension bridge... are hyponyms).
        # Shown, not counted: supermarket lies under ILSVRC's grocery store (hypernym); GBU's
        # 'market' matched the word in ILSVRC's 'grocery store, grocery, food market, market',
        # which WordNet relates to the marketplace only as a sibling.
        (
            "sun",
            [
                "restaurant",
                "planetarium_outdoor",
                "tent_outdoor",
                "bridge",
                "supermarket",
                "market_outdoor",
                "airlock",
            ],
            {
                "same": {"restaurant", "planetarium_outdoor"},
                "hyponym": {"tent_outdoor", "bridge"},
                "hypernym": {"supermarket"},
            },
        ),
    ],
)
def test_user_supplied_standard_split_is_audited_through_the_class_map(
    dataset: str,
    user_test_classes: list[str],
    expected: dict[str, set[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CUB and SUN standard splits take their class lists from the user; the audit places each
    class in WordNet through the committed class map (audit.wordnet_map)."""
    leak = _describe_user_split(dataset, user_test_classes, tmp_path, monkeypatch)
    by = _names_by_relation(leak)
    assert {k: by.get(k, set()) for k in expected} == expected
    assert leak["n_test"] == len(user_test_classes)
    if dataset == "sun":
        assert _relatives(leak, "supermarket", "hypernym") == {"grocery store"}
        assert _relatives(leak, "market_outdoor", "sibling") == {"grocery store"}
        assert {"suspension bridge", "steel arch bridge"} <= _relatives(leak, "bridge", "hyponym")


def _describe_user_split(
    dataset: str, classes: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict:  # type: ignore[type-arg]
    data = load_spec_data(SPECS / "xlsa17" / f"{dataset}-ss.yaml")
    data["data"]["params"]["test_classes"] = classes
    data["data"]["params"].pop("train_classes", None)
    if data.get("hierarchy", {}).get("source") == "adapter":
        data["data"]["params"]["taxonomy_path"] = str(SHARED_DATA / "cub-hierarchy")
    data["audit"]["wordnet_map"] = str(SPECS / "xlsa17" / data["audit"]["wordnet_map"])
    spec = tmp_path / f"{dataset}-ss.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(XLSA17))
    monkeypatch.setenv("ZSL_IMAGENET_DIR", str(IMAGENET))
    result = runner.invoke(app, ["spec", "describe", str(spec), "--release-only", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["leakage"]  # type: ignore[no-any-return]


@pytest.mark.skipif(not IMAGENET.is_dir(), reason="ImageNet lists not in shared data")
def test_imagenet_honest_split_names_and_structure(monkeypatch: pytest.MonkeyPatch) -> None:
    one = _describe("imagenet/within-1-hop.yaml", monkeypatch)
    goz = _describe("imagenet/goz.yaml", monkeypatch)
    assert one["split"] == "within-1-hop" and one["train_classes"] == 1000
    assert one["test_classes"] == 1548
    assert 0 < one["structure"]["structural_ratio"] < goz["structure"]["structural_ratio"]
    assert goz["test_classes"] == 500


# -- the words, not Python reprs (issue 14, item 16) ----------------------------------------------


@pytest.mark.slow  # prepares the demo benchmark
def test_describe_prints_a_table_in_words_with_rounded_numbers() -> None:
    result = runner.invoke(app, ["spec", "describe", str(SPECS / "demo.yaml")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "{" not in result.output and "': " not in result.output  # no dict reprs
    assert "embeddings attributes (64-d)" in text
    assert "images 6,123: trainval 3,927 (train 3,169, val 758)" in text
    assert "hierarchy nodes 199, edges 199, roots 1, leaves 100" in text
    assert "structural ratio 0.772 over 20 unseen classes (0 excluded)" in text
    assert "hops to the nearest training class 2: 10 unseen, 3: 7 unseen" in text
    assert "0.7720238" not in text  # unrounded


@pytest.mark.skipif(not XLSA17.is_dir(), reason="xlsa17 split files not in shared data")
def test_release_only_prints_words_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_XLSA17_DIR", str(XLSA17))
    result = runner.invoke(
        app, ["spec", "describe", str(SPECS / "xlsa17" / "cub-ps.yaml"), "--release-only"]
    )
    assert result.exit_code == 0, result.output
    assert "{" not in result.output and "': " not in result.output
    assert "cub-ps v1: the release's split files only" in result.output


def test_metrics_list_piped_keeps_every_name_and_description_whole() -> None:
    from harness.metrics import metrics

    result = runner.invoke(app, ["metrics", "list"], env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(line == line.rstrip() for line in lines)  # nothing padded to a width
    for name, metric in metrics.items():
        (head,) = [line for line in lines if line.split(" ")[0] == name]
        assert f" v{metric.version} " in head
        assert any(line.startswith(f"    {metric.description}") for line in lines), name
