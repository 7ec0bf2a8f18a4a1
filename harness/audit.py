"""Leakage audit: which test classes did the feature backbone already see in pre-training?

Xian et al. (GBU) showed that the standard splits of AWA, aPY, CUB and SUN put ImageNet-1K
classes among the test classes while the ResNet-101 features were trained on ImageNet-1K. This
module computes that overlap from data, never from a hard-coded list: the test classes (as
WordNet ids) are intersected with the class set the spec's ``features.pretrained_on`` names
(or a submission's own ``declarations.backbone_pretrained_on``), optionally after expanding each
test class to its WordNet descendants and/or ancestors (``pretrained_on.match``), e.g. so that a
test class "dog" counts as seen when the backbone was trained on dog breeds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.data.prepare import Benchmark
    from harness.spec import Spec

WNID = re.compile(r"^n\d{8}$")
MATCHES = ("exact", "descendants", "ancestors", "both")


def normalize_name(name: str) -> str:
    """A class name as a comparable string: ``002.Laysan_Albatross`` → ``laysan albatross``,
    ``grizzly+bear`` → ``grizzly bear``; qualifiers stay (``church_indoor`` is a scene, not the
    building ImageNet's "church" shows).

    >>> normalize_name("002.Laysan_Albatross"), normalize_name("Black-footed Albatross")
    ('laysan albatross', 'black footed albatross')
    """
    text = re.sub(r"^\d+\.", "", name.strip()).lower()
    text = re.sub(r"[_+\-/]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _expand(wnids: Iterable[str], match: str) -> dict[str, set[str]]:
    """Each test wnid → itself plus its WordNet descendants/ancestors as ``match`` asks."""
    out = {w: {w} for w in wnids}
    if match == "exact" or not out:
        return out
    from harness.wordnet import open_wordnet, synset_of, wnid

    reader = open_wordnet()
    for test in out:
        synset = synset_of(reader, test)
        related = []
        if match in ("descendants", "both"):
            related += synset.closure(lambda s: s.hyponyms() + s.instance_hyponyms())
        if match in ("ancestors", "both"):
            related += synset.closure(lambda s: s.hypernyms() + s.instance_hypernyms())
        out[test] |= {wnid(s) for s in related}
    return out


def leakage_audit(
    test_classes: Iterable[str],
    pretrained: frozenset[str],
    *,
    match: str = "exact",
    names: dict[str, str] | None = None,
    source: str = "",
    pretrained_synonyms: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Overlap of test classes with a pre-training class set.

    Parameters
    ----------
    test_classes : iterable of str
        Test class ids; those that are not WordNet ids (``n########``) cannot be audited and
        are reported as such.
    pretrained : frozenset of str
        WordNet ids the backbone was trained on.
    match : {"exact", "descendants", "ancestors", "both"}
        How a test class meets the pre-training set: itself only, or also through its WordNet
        descendants and/or ancestors (needs WordNet 3.0).
    names : dict, optional
        Class id → display name.
    pretrained_synonyms : dict, optional
        Pre-training wnid → its WordNet synonyms. Test classes without a WordNet id (CUB
        species, SUN scenes) are then matched by name: their normalised name equals a
        normalised synonym (:func:`normalize_name`). Such rows say ``"by": "name"``; without
        synonyms these classes are counted as not auditable, never as clean.

    Returns
    -------
    dict
        ``overlap`` (list of {class, name, via, by}), ``n_overlap``, ``n_test``,
        ``n_not_wordnet``, ``n_not_auditable``, ``match``, ``source``.

    Examples
    --------
    >>> r = leakage_audit(["n02084071", "n02121808", "xlsa17:cat"], frozenset({"n02084071"}))
    >>> r["n_overlap"], r["overlap"][0]["class"], r["n_not_wordnet"], r["n_not_auditable"]
    (1, 'n02084071', 1, 1)
    >>> by_name = leakage_audit(["cub:001"], frozenset({"n01531178"}),
    ...     names={"cub:001": "011.Rusty_Blackbird"},
    ...     pretrained_synonyms={"n01531178": ("goldfinch", "Carduelis carduelis")})
    >>> by_name["n_overlap"], by_name["n_not_auditable"]
    (0, 0)
    """
    if match not in MATCHES:
        raise HarnessError(f"leakage audit: match must be one of {MATCHES}; got {match!r}")
    classes = sorted(set(test_classes))
    audited = [c for c in classes if WNID.match(c)]
    expanded = _expand(audited, match)
    overlap = []
    for test in audited:
        via = sorted(expanded[test] & pretrained)
        if via:
            overlap.append(
                {"class": test, "name": (names or {}).get(test, ""), "via": via[:20], "by": "id"}
            )
    unaudited = [c for c in classes if not WNID.match(c)]
    if pretrained_synonyms is not None and unaudited:
        index: dict[str, set[str]] = {}
        for wnid, words in pretrained_synonyms.items():
            if wnid in pretrained:
                for word in words:
                    index.setdefault(normalize_name(word), set()).add(wnid)
        for test in unaudited:
            name = (names or {}).get(test, "")
            via = sorted(index.get(normalize_name(name), ())) if name else []
            if via:
                overlap.append({"class": test, "name": name, "via": via, "by": "name"})
        n_not_auditable = sum(1 for c in unaudited if not (names or {}).get(c))
    else:
        n_not_auditable = len(unaudited)
    return {
        "overlap": overlap,
        "n_overlap": len(overlap),
        "n_test": len(classes),
        "n_not_wordnet": len(unaudited),
        "n_not_auditable": n_not_auditable,
        "match": match,
        "source": source,
    }


def synonyms_for(
    class_set: str | None, pretrained: frozenset[str]
) -> dict[str, tuple[str, ...]] | None:
    """WordNet synonyms of a named class set (for matching by name), or None if unavailable."""
    if class_set in (None, "none") or not pretrained:
        return None
    from harness.data.class_sets import synonyms

    try:
        return synonyms(pretrained)
    except HarnessError:
        return None


def pretrained_classes(class_set: str | None, wnids: list[str] | None) -> frozenset[str]:
    """The WordNet ids of a named class set (``none`` is empty) or of an explicit list."""
    if wnids is not None:
        return frozenset(wnids)
    if class_set in (None, "none"):
        return frozenset()
    from harness.data.class_sets import resolve_class_set

    return resolve_class_set(class_set)


def benchmark_audit(
    spec: Spec, bench: Benchmark, *, class_set: str | None = None
) -> dict[str, Any]:
    """The leakage audit of a benchmark's unseen (test) classes.

    ``class_set`` overrides the spec's ``features.pretrained_on`` (a submission that declares
    its own backbone's pre-training). A class set that cannot be resolved here (lists not
    installed) gives ``{"error": ...}`` rather than a guess.
    """
    pretrained_on = spec.features.pretrained_on
    name = class_set or pretrained_on.class_set
    try:
        pretrained = pretrained_classes(name, None if class_set else pretrained_on.wnids)
    except HarnessError as err:
        return {"error": str(err), "source": name or "wnids"}
    ids = bench.class_ids
    unseen = ids[bench.a("splits/unseen_classes")].tolist()
    names = dict(zip(ids.tolist(), bench.a("class_names").tolist(), strict=True))
    return leakage_audit(
        unseen,
        pretrained,
        match=pretrained_on.match,
        names=names,
        source=name or "wnids",
        pretrained_synonyms=synonyms_for(name, pretrained),
    )
