"""Tests for harness.hierarchy.wordnet and the ``hierarchy`` CLI, on the real WordNet 3.0 database.

They need a WordNet 3.0 dict directory (``$ZSL_WORDNET_DIR``, default Debian's
``/usr/share/wordnet`` from ``apt-get install wordnet-base``) and the ``lexnames`` file from the
shared development data (``$ZSL_SHARED_DATA``, default ``../shared/data``); they skip, saying
which is missing, where either is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.hierarchy import app
from harness.core.errors import HierarchyError
from harness.hierarchy import Hierarchy
from harness.hierarchy.wordnet import (
    build_wordnet_hierarchy,
    open_wordnet,
    read_wnid_list,
    synset_of,
    wnid,
)

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("ZSL_SHARED_DATA", Path(__file__).parents[3] / "shared" / "data"))
LEXNAMES = SHARED_DATA / "wordnet" / "lexnames"
DICT_DIR = Path(os.environ.get("ZSL_WORDNET_DIR", "/usr/share/wordnet"))
DEMO = REPO / "specs" / "demo"

DOG, CANINE, DOMESTIC_ANIMAL = "n02084071", "n02083346", "n01317541"
CARNIVORE, FELINE, CAT, DOMESTIC_CAT = "n02075296", "n02120997", "n02121620", "n02121808"
ENTITY, MAMMAL, BIRD = "n00001740", "n01861778", "n01503061"

pytestmark = [
    pytest.mark.skipif(
        not (DICT_DIR / "data.noun").is_file(),
        reason=f"no WordNet 3.0 dict directory at {DICT_DIR} (apt-get install wordnet-base, "
        "or set ZSL_WORDNET_DIR)",
    ),
    pytest.mark.skipif(
        not LEXNAMES.is_file(),
        reason=f"no WordNet lexnames file at {LEXNAMES} (set ZSL_SHARED_DATA)",
    ),
]


@pytest.fixture(scope="module")
def reader():
    return open_wordnet(DICT_DIR, LEXNAMES)


@pytest.fixture
def no_wordnet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZSL_WORDNET_DIR", raising=False)
    monkeypatch.delenv("ZSL_WORDNET_LEXNAMES", raising=False)


# ---------------------------------------------------------------- opening the database


def test_open_wordnet_reads_version_3_0(reader) -> None:
    assert reader.get_version() == "3.0"
    assert reader.synset("dog.n.01").offset() == 2084071


def test_open_wordnet_from_environment(reader, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(DICT_DIR))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(LEXNAMES))
    assert open_wordnet() is reader  # cached per directory


def test_a_directory_with_lexnames_needs_no_overlay(reader, no_wordnet_env) -> None:
    overlay = Path(str(reader.root))
    assert (overlay / "lexnames").is_file() and (overlay / "data.noun").is_file()
    assert open_wordnet(overlay) is reader


def test_missing_lexnames_says_what_to_set(no_wordnet_env) -> None:
    if (DICT_DIR / "lexnames").is_file():
        pytest.skip(f"{DICT_DIR} has its own lexnames file")
    with pytest.raises(
        HierarchyError,
        match=r"has no 'lexnames' file.*Set ZSL_WORDNET_LEXNAMES \(or pass --lexnames\).*"
        r"ZSL_WORDNET_DIR.*nltk\.download\('wordnet'\)",
    ):
        open_wordnet(DICT_DIR)


def test_bad_directories_and_lexnames(tmp_path: Path, no_wordnet_env) -> None:
    with pytest.raises(HierarchyError, match=r"does not exist; set ZSL_WORDNET_DIR"):
        open_wordnet(tmp_path / "nowhere")
    with pytest.raises(HierarchyError, match=r"is not a WordNet dict directory \(no data\.noun"):
        open_wordnet(tmp_path)
    with pytest.raises(HierarchyError, match=r"lexnames file .*absent does not exist"):
        open_wordnet(DICT_DIR, tmp_path / "absent")
    bad = tmp_path / "lexnames"
    bad.write_text("00\tadj.all\t3\n02\tnoun.x\t1\n", encoding="utf-8")
    with pytest.raises(HierarchyError, match=r"lexnames:2: expected '01 <lexname> <pos number>'"):
        open_wordnet(DICT_DIR, bad)


def test_no_database_anywhere_says_what_to_install(no_wordnet_env) -> None:
    try:
        found = open_wordnet()
    except HierarchyError as err:
        assert "no WordNet database found" in str(err)
        assert "ZSL_WORDNET_DIR" in str(err) and "nltk.download('wordnet')" in str(err)
        assert "apt-get install wordnet-base" in str(err)
    else:  # NLTK's own wordnet data is installed here
        assert found.get_version() == "3.0"


# ---------------------------------------------------------------- ids


def test_wnid_and_synset_of(reader) -> None:
    dog = reader.synset("dog.n.01")
    assert wnid(dog) == DOG
    assert synset_of(reader, DOG) == dog
    with pytest.raises(HierarchyError, match=r"run\.v\.01 is not a noun synset"):
        wnid(reader.synset("run.v.01"))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("dog", r"malformed WordNet id 'dog': expected 'n' and 8 digits"),
        ("n0208407", r"malformed WordNet id 'n0208407'"),
        ("v02084071", r"malformed WordNet id 'v02084071'"),
        ("n02084072", r"unknown WordNet id 'n02084072': WordNet 3\.0 has no noun synset"),
        ("n99999999", r"unknown WordNet id 'n99999999'"),
    ],
)
def test_synset_of_refuses_bad_ids(reader, bad: str, match: str) -> None:
    with pytest.raises(HierarchyError, match=match):
        synset_of(reader, bad)


def test_read_wnid_list(tmp_path: Path) -> None:
    good = tmp_path / "classes.txt"
    good.write_text(f"# header\n\n{DOG}  # dog\n  {CAT}\n", encoding="utf-8")
    assert read_wnid_list(good) == [DOG, CAT]
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{DOG}\n# comment\ndog\n", encoding="utf-8")
    with pytest.raises(HierarchyError, match=r"bad\.txt:3: 'dog' is not a WordNet noun id"):
        read_wnid_list(bad)
    repeated = tmp_path / "repeated.txt"
    repeated.write_text(f"{DOG}\n{CAT}\n{DOG} # again\n", encoding="utf-8")
    with pytest.raises(HierarchyError, match=rf"repeated\.txt:3: {DOG} repeats line 1"):
        read_wnid_list(repeated)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(HierarchyError, match=r"empty\.txt: holds no WordNet ids"):
        read_wnid_list(empty)


# ---------------------------------------------------------------- building subgraphs


def test_dog_has_two_parents_without_a_root(reader) -> None:
    h = build_wordnet_hierarchy(reader, leaves=[DOG])
    dog = h.index(DOG)
    assert set(h.node_ids[h.parents(dog)].tolist()) == {CANINE, DOMESTIC_ANIMAL}
    assert h.names[h.parents(dog)].tolist() == ["domestic animal", "canine"]
    assert h.node_ids[h.roots].tolist() == [ENTITY]
    assert h.node_ids[h.leaves].tolist() == [DOG]
    assert h.names[dog] == "dog"
    assert h.source.startswith("WordNet 3.0 via NLTK ")
    assert h.max_depth[dog] == 13 and h.depth[dog] == 8


def test_dog_and_cat_under_carnivore(reader) -> None:
    h = build_wordnet_hierarchy(reader, root=CARNIVORE, leaves=[DOG, DOMESTIC_CAT])
    assert h.node_ids.tolist() == sorted([CARNIVORE, CANINE, DOG, FELINE, CAT, DOMESTIC_CAT])
    edges = {(str(h.node_ids[p]), str(h.node_ids[c])) for p, c in h.edges.tolist()}
    assert edges == {
        (CARNIVORE, CANINE),
        (CANINE, DOG),
        (CARNIVORE, FELINE),
        (FELINE, CAT),
        (CAT, DOMESTIC_CAT),
    }
    assert h.names[h.index(DOMESTIC_CAT)] == "domestic cat"
    assert h.lca_height(h.index(DOG), h.index(DOMESTIC_CAT)) == 3
    assert h.hop_distance([h.index(DOG)])[0, h.index(DOMESTIC_CAT)] == 5


def test_instance_hypernyms_are_parents(reader) -> None:
    einstein = wnid(reader.synset("einstein.n.01"))
    h = build_wordnet_hierarchy(reader, leaves=[einstein])
    parents = h.node_ids[h.parents(h.index(einstein))].tolist()
    assert parents == [wnid(reader.synset("physicist.n.01"))]


def test_root_alone_gives_the_hyponym_closure(reader) -> None:
    canine = reader.synset("canine.n.02")
    below = canine.closure(lambda s: s.hyponyms() + s.instance_hyponyms())
    h = build_wordnet_hierarchy(reader, root=CANINE)
    assert set(h.node_ids.tolist()) == {CANINE} | {wnid(s) for s in below}
    assert h.node_ids[h.roots].tolist() == [CANINE]
    assert DOG in h.node_ids


def test_classes_must_be_mutually_exclusive(reader) -> None:
    with pytest.raises(
        HierarchyError,
        match=rf"mutually exclusive, but leaves\[1\] {CANINE} \(canine\) is an ancestor of "
        rf"leaves\[0\] {DOG} \(dog\)",
    ):
        build_wordnet_hierarchy(reader, leaves=[DOG, CANINE, DOMESTIC_CAT])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"root": CARNIVORE, "leaves": [DOG, BIRD]}, rf"leaves\[1\] {BIRD} \(bird\) is not below"),
        ({"root": DOG, "leaves": [DOMESTIC_CAT]}, r"is not below root n02084071 \(dog\)"),
        ({}, r"give root, leaves, or both"),
        ({"leaves": []}, r"leaves is empty"),
        ({"leaves": [DOG, CAT, DOG]}, rf"leaves\[2\] '{DOG}' repeats leaves\[0\]"),
        ({"leaves": [DOG, "n1"]}, r"malformed WordNet id 'n1'"),
        ({"root": "n00000000", "leaves": [DOG]}, r"unknown WordNet id 'n00000000'"),
    ],
)
def test_build_refuses_bad_requests(reader, kwargs: dict, match: str) -> None:
    with pytest.raises(HierarchyError, match=match):
        build_wordnet_hierarchy(reader, **kwargs)


@pytest.mark.slow
def test_full_noun_hierarchy(reader) -> None:
    h = build_wordnet_hierarchy(reader, root=ENTITY)
    assert h.n_nodes == 82115  # every WordNet 3.0 noun synset
    assert h.node_ids[h.roots].tolist() == [ENTITY]
    dog = h.index(DOG)
    assert set(h.node_ids[h.parents(dog)].tolist()) == {CANINE, DOMESTIC_ANIMAL}
    assert h.ancestor_matrix.nnz > h.n_nodes
    assert int(h.height[h.index(ENTITY)]) == int(h.max_depth.max()) == 19
    assert h.is_ancestor_or_self(h.index(MAMMAL), dog)


# ---------------------------------------------------------------- the frozen demo hierarchy


def test_demo_hierarchy_rebuilds_byte_identical(reader) -> None:
    classes = read_wnid_list(DEMO / "classes.txt")
    rebuilt = build_wordnet_hierarchy(reader, root=MAMMAL, leaves=classes)
    frozen = (DEMO / "hierarchy.json").read_text(encoding="utf-8")
    assert rebuilt.to_json() == frozen, (
        "specs/demo/hierarchy.json no longer matches specs/demo/classes.txt; rebuild it with the "
        "command in specs/demo/README.md and review the diff"
    )
    h = Hierarchy.load_json(DEMO / "hierarchy.json")
    assert sorted(h.node_ids[h.leaves].tolist()) == sorted(classes)
    assert h.node_ids[h.roots].tolist() == [MAMMAL]
    assert h.summary()["multi_parent_nodes"] >= 1
    assert np.all(h.lca_height_matrix(h.indices(classes)) >= 0)


# ---------------------------------------------------------------- CLI


def test_cli_build_and_show(tmp_path: Path, no_wordnet_env) -> None:
    leaves = tmp_path / "classes.txt"
    leaves.write_text(f"{DOG}  # dog\n{DOMESTIC_CAT}  # domestic cat\n", encoding="utf-8")
    out = tmp_path / "h.json"
    runner = CliRunner()
    args = ["build", "--root", CARNIVORE, "--leaves", str(leaves), "--out", str(out)]
    args += ["--wordnet-dir", str(DICT_DIR), "--lexnames", str(LEXNAMES)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"wrote {out}: 6 nodes, 5 edges, 1 root(s), 2 leaves" in result.output
    assert Hierarchy.load_json(out).n_nodes == 6

    shown = runner.invoke(app, ["show", str(out)])
    assert shown.exit_code == 0, shown.output
    lines = dict(line.split(None, 1) for line in shown.output.strip().splitlines())
    assert lines["nodes"] == "6" and lines["leaves"] == "2" and lines["max_depth"] == "3"


def test_cli_reads_environment_and_reports_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(DICT_DIR))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(LEXNAMES))
    leaves = tmp_path / "classes.txt"
    leaves.write_text(f"{DOG}\n{CANINE}\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(
        app, ["build", "--leaves", str(leaves), "--out", str(tmp_path / "h.json")]
    )
    assert result.exit_code == 1
    assert "error: classes must be mutually exclusive" in result.output
    assert not (tmp_path / "h.json").exists()

    broken = tmp_path / "broken.json"
    broken.write_text("{}", encoding="utf-8")
    shown = runner.invoke(app, ["show", str(broken)])
    assert shown.exit_code == 1
    assert "missing key(s)" in shown.output
