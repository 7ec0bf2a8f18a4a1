"""Leakage audit relations: computed from WordNet and class sets, never from a hard-coded list.

Relations are checked on hand-picked WordNet cases (dog, chihuahua, canine, wolf; albatross) and
against an independent implementation built on NLTK's own ``Synset.hypernym_distances`` over
every AWA/aPY class × the 1,000 ILSVRC-2012 classes.
"""

from __future__ import annotations

import pytest

from harness.audit import MATCHES, LeakageAudit, Relation, leakage_audit, pretrained_classes
from harness.core.errors import HarnessError
from harness.hierarchy.class_maps import ClassMapRow, read_class_map
from tests.conftest import SHARED_DATA, SPECS

pytestmark = pytest.mark.usefixtures("wordnet_env")

CHIHUAHUA, DOG, CANINE, WOLF = "n02085620", "n02084071", "n02083346", "n02114100"
ALBATROSS, WANDERING_ALBATROSS = "n02058221", "n02058747"


def _relations(audit: LeakageAudit, class_id: str) -> dict[Relation, set[str]]:
    entry = next((c for c in audit.classes if c.class_id == class_id), None)
    if entry is None:
        return {}
    return {r: {x.wordnet_id for x in entry.relatives_by(r)} for r in entry.relations}


@pytest.mark.slow
def test_each_relation_on_hand_checked_synsets() -> None:
    # dog.n.01's parents are canine.n.02 and domestic_animal.n.01; wolf.n.01 is a canine too.
    audit = leakage_audit([DOG], frozenset({DOG, CHIHUAHUA, CANINE, WOLF}), match="exact")
    assert _relations(audit, DOG) == {
        Relation.SAME: {DOG},
        Relation.HYPONYM: {CHIHUAHUA},
        Relation.HYPERNYM: {CANINE},
        Relation.SIBLING: {WOLF},
    }
    entry = audit.classes[0]
    chihuahua = entry.relatives_by(Relation.HYPONYM)[0]
    assert chihuahua.name == "Chihuahua" and chihuahua.hops == 2  # Chihuahua < toy dog < dog
    wolf = entry.relatives_by(Relation.SIBLING)[0]
    assert (wolf.hops, wolf.via) == (2, CANINE)


@pytest.mark.parametrize(
    ("match", "pretrained", "counted"),
    [
        ("exact", {CHIHUAHUA}, 0),
        ("descendants", {CHIHUAHUA}, 1),
        ("descendants", {CANINE}, 0),
        ("ancestors", {CANINE}, 1),
        ("ancestors", {CHIHUAHUA}, 0),
        ("both", {CANINE}, 1),
        ("both", {WOLF}, 0),  # siblings are reported, never counted
    ],
)
def test_match_chooses_what_is_counted(match: str, pretrained: set[str], counted: int) -> None:
    audit = leakage_audit([DOG], frozenset(pretrained), match=match)  # type: ignore[arg-type]
    assert audit.n_overlap == counted
    assert audit.counted == MATCHES[match]
    assert len(audit.classes) == 1  # the relation is reported whatever is counted


def test_related_within_bounds_hypernyms_and_siblings() -> None:
    carnivore = "n02075296"  # dog < canine < carnivore: two hops up
    assert leakage_audit([DOG], frozenset({carnivore})).classes == []
    far = leakage_audit([DOG], frozenset({carnivore}), related_within=2)
    assert _relations(far, DOG) == {Relation.HYPERNYM: {carnivore}}
    near = leakage_audit([DOG], frozenset({WOLF}), related_within=0)
    assert near.classes == []


def test_a_broader_row_places_the_class_below_its_synset() -> None:
    """CUB's Laysan albatross is not in WordNet: mapped 'broader' to albatross.n.02, ILSVRC's
    albatross is its hypernym and the wandering albatross a sibling, never the same class."""
    row = ClassMapRow("002.Laysan_Albatross", ALBATROSS, "albatross", broader=True)
    audit = leakage_audit(
        ["cub:002"],
        frozenset({ALBATROSS, WANDERING_ALBATROSS}),
        names={"cub:002": "002.Laysan_Albatross"},
        wordnet_map={row.name: row},
        match="both",
    )
    assert _relations(audit, "cub:002") == {
        Relation.HYPERNYM: {ALBATROSS},
        Relation.SIBLING: {WANDERING_ALBATROSS},
    }
    assert audit.classes[0].mapping == "broader" and audit.n_overlap == 1
    exact = ClassMapRow("wandering", WANDERING_ALBATROSS, "wandering_albatross")
    same = leakage_audit(
        ["x"],
        frozenset({WANDERING_ALBATROSS}),
        names={"x": "wandering"},
        wordnet_map={"wandering": exact},
    )
    assert _relations(same, "x") == {Relation.SAME: {WANDERING_ALBATROSS}}


def test_classes_without_a_synset_are_not_auditable_never_clean() -> None:
    audit = leakage_audit(
        [DOG, "xlsa17:SUN:abbey"], frozenset({DOG}), names={"xlsa17:SUN:abbey": "abbey"}
    )
    assert audit.n_test == 2 and audit.n_overlap == 1
    assert [c.label for c in audit.not_auditable] == ["abbey"]
    assert "1 not auditable" in audit.summary()


def test_nothing_pre_trained_needs_no_wordnet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_WORDNET_DIR", "/nonexistent")
    audit = leakage_audit(["a", "b"], frozenset(), source="none")
    assert (audit.n_test, audit.n_overlap, audit.classes) == (2, 0, [])


def test_bad_input_is_named() -> None:
    with pytest.raises(HarnessError, match="match must be one of"):
        leakage_audit([DOG], frozenset({DOG}), match="cousins")  # type: ignore[arg-type]
    with pytest.raises(HarnessError, match="pre-training class n99999999"):
        leakage_audit([DOG], frozenset({"n99999999"}))


def test_explicit_and_empty_class_sets() -> None:
    assert pretrained_classes("none", None) == frozenset()
    assert pretrained_classes(None, ["n02084071"]) == frozenset({"n02084071"})


def test_audit_round_trips_through_json() -> None:
    audit = leakage_audit([DOG], frozenset({DOG, WOLF}), source="toy")
    again = LeakageAudit.model_validate_json(audit.model_dump_json())
    assert again == audit and again.n_overlap == 1
    assert "same: a pre-training class is the test class" in again.rule()


# -- an independent implementation, on the real class sets -----------------------------------


def _independent(test: str, pretrained: frozenset[str], within: int) -> dict[str, str]:
    """Pre-training class → relation, from NLTK's ``hypernym_distances`` (all paths, with
    instance hypernyms) instead of the harness's breadth-first search."""
    from harness.hierarchy.wordnet import open_wordnet, synset_of, wnid

    reader = open_wordnet()

    def up(synset_id: str) -> dict[str, int]:
        best: dict[str, int] = {}
        for synset, distance in synset_of(reader, synset_id).hypernym_distances():
            key = wnid(synset)
            best[key] = min(distance, best.get(key, distance))
        return best

    mine = up(test)
    out = {}
    for other in pretrained:
        theirs = up(other)
        if other == test:
            out[other] = "same"
        elif test in theirs:
            out[other] = "hyponym"
        elif other in mine and mine[other] <= within:
            out[other] = "hypernym"
        elif other not in mine and any(
            0 < mine[h] <= within and 0 < theirs[h] <= within for h in set(mine) & set(theirs)
        ):
            out[other] = "sibling"
    return out


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "imagenet").is_dir(), reason="ImageNet lists absent")
@pytest.mark.parametrize("within", [1, 2])
def test_relations_agree_with_an_independent_implementation(
    within: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZSL_IMAGENET_DIR", str(SHARED_DATA / "imagenet"))
    ilsvrc = pretrained_classes("ilsvrc2012", None)
    tests = sorted(
        set(read_class_map(SPECS / "xlsa17" / "awa-wordnet.tsv").values())
        | set(read_class_map(SPECS / "xlsa17" / "apy-wordnet.tsv").values())
    )
    audit = leakage_audit(tests, ilsvrc, related_within=within)
    n_related = 0
    for test in tests:
        entry = next((c for c in audit.classes if c.class_id == test), None)
        expected = _independent(test, ilsvrc, within)
        got_counts = {r.value: n for r, n in (entry.counts.items() if entry else [])}
        want_counts: dict[str, int] = {}
        for relation in expected.values():
            want_counts[relation] = want_counts.get(relation, 0) + 1
        assert got_counts == want_counts, test
        for relative in entry.relatives if entry else []:
            assert expected[relative.wordnet_id] == relative.relation.value, (test, relative)
        n_related += bool(expected)
    assert n_related > 40  # the check is not vacuous
