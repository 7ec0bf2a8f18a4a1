"""Class → WordNet maps: suggest synsets for dataset class names, read and write the TSV maps.

The xlsa17 benchmarks name their classes with words (``grizzly+bear``, ``diningtable``), not
WordNet ids. A hierarchy needs ids, so each benchmark gets a *class map*: a small TSV file the
project derives once, checks by hand, and commits under ``specs/`` (see
``specs/xlsa17/README.md``). This module is the tooling.

See docs/hierarchy.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.atomic import write_text_atomic
from harness.core.errors import HarnessError, HierarchyError
from harness.core.textio import read_text_file, unique_tokens
from harness.hierarchy.dag import Hierarchy
from harness.hierarchy.wordnet import (
    build_wordnet_hierarchy,
    synset_hypernym_hops,
    synset_of,
    wnid,
)

if TYPE_CHECKING:  # annotations only: importing a class map must not load NLTK
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

if TYPE_CHECKING:  # NLTK costs seconds to import; open_wordnet imports it when a map is read
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

__all__ = [
    "ANIMAL",
    "APY_HINT_ROOTS",
    "AWA_HINT_ROOTS",
    "CUB_HINT_ROOTS",
    "SUN_HINT_ROOTS",
    "Candidate",
    "ClassMapError",
    "ClassMapRow",
    "build_class_map_hierarchy",
    "check_class_map",
    "describe_wordnet_id",
    "normalise_name",
    "read_class_list",
    "read_class_map",
    "read_class_map_rows",
    "suggest_wordnet_ids",
    "write_class_map",
]

#: ``animal.n.01``: the hint root for AWA's 50 animal classes.
ANIMAL = "n00015388"
#: ``artifact.n.01``.
ARTIFACT = "n00021939"
#: ``organism.n.01`` (animals, plants, and persons too).
ORGANISM = "n00004475"
#: ``person.n.01``.
PERSON = "n00007846"
#: Hint roots for AWA1/AWA2: every class is an animal.
AWA_HINT_ROOTS: tuple[str, ...] = (ANIMAL,)
#: Hint roots for aPY: PASCAL VOC's and Yahoo's objects, animals, plants and people.
APY_HINT_ROOTS: tuple[str, ...] = (ARTIFACT, ORGANISM, PERSON)
#: Hint roots for CUB-200: every class is a bird (``bird.n.01``).
CUB_HINT_ROOTS: tuple[str, ...] = ("n01503061",)
#: Hint roots for SUN's scenes: structure, location, geological formation, body of water,
#: facility (``structure.n.01`` ... ``facility.n.01``).
SUN_HINT_ROOTS: tuple[str, ...] = (
    "n04341686",
    "n00027167",
    "n09287968",
    "n09225146",
    "n03315023",
)

#: The fourth field of a row whose class WordNet lacks (its id is the narrowest containing synset).
BROADER = "broader"
_WNID = re.compile(r"n\d{8}")
_NAME = re.compile(r"\S+")


class ClassMapError(HarnessError):
    """A class map file is malformed, or disagrees with WordNet or with itself."""


# ----------------------------------------------------------------------------- suggestions


@dataclass(frozen=True)
class Candidate:
    """One noun synset proposed for a class name.

    See docs/hierarchy.md, `Candidate`.
    """

    wnid: str
    synset: str
    lemma: str
    gloss: str
    sense: int
    under_hint: bool
    lemma_match: bool


@dataclass(frozen=True)
class Suggestion:
    """The ranked candidates for one class name.

    See docs/hierarchy.md, `Suggestion`.
    """

    name: str
    query: str
    how: str
    candidates: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate | None:
        """The top candidate, or ``None`` when nothing was found."""
        return self.candidates[0] if self.candidates else None

    @property
    def alternatives(self) -> tuple[Candidate, ...]:
        """The candidates after the best one."""
        return self.candidates[1:]


def normalise_name(name: str) -> str:
    """The WordNet lemma form of an xlsa17 class name: CUB's ``NNN.`` number dropped, ``+`` and
    spaces → ``_``, lower case.

    Examples
    --------
    >>> normalise_name("grizzly+bear")
    'grizzly_bear'
    >>> normalise_name(" Killer Whale ")
    'killer_whale'
    >>> normalise_name("002.Laysan_Albatross")
    'laysan_albatross'
    """
    text = re.sub(r"^\d+\.", "", name.strip()).lower()
    return re.sub(r"[+\s]+", "_", text)


def _nouns(reader: WordNetCorpusReader, lemma: str) -> list[Any]:
    if not lemma or lemma.startswith("_") or lemma.endswith("_"):
        return []
    return list(reader.synsets(lemma, pos="n"))


def _ancestor_ids(synset: Any) -> set[str]:
    """WordNet ids of the synset and all its (instance) hypernyms."""
    return set(synset_hypernym_hops(synset))


def _lookup(reader: WordNetCorpusReader, query: str) -> tuple[str, str, list[tuple[str, Any]]]:
    """``(how, shown query, [(word looked up, synset), ...])`` in WordNet's sense order."""
    found = _nouns(reader, query)
    if found:
        return "lemma", query, [(query, s) for s in found]
    if "_" not in query:
        for cut in range(1, len(query)):
            joined = f"{query[:cut]}_{query[cut:]}"
            found = _nouns(reader, joined)
            if found:
                return "compound", joined, [(joined, s) for s in found]
    parts = query.split("_") if "_" in query else []
    if not parts:
        for cut in range(2, len(query) - 1):  # the longest head word first
            left, right = query[:cut], query[cut:]
            if _nouns(reader, left) and _nouns(reader, right):
                parts = [left, right]
                break
    if parts:
        # The head of an English compound is its last word: look it up first.
        pairs = [(p, s) for p in reversed(parts) for s in _nouns(reader, p)]
        if pairs:
            return "parts", " ".join(parts), pairs
    return "none", query, []


def suggest_wordnet_ids(
    reader: WordNetCorpusReader,
    names: Iterable[str],
    *,
    hint_roots: Sequence[str] = (),
) -> list[Suggestion]:
    """Rank candidate WordNet noun synsets for each class name.

    For each name: normalise it (:func:`normalise_name`), look it up as a noun lemma; if it is
    not one, try it as a run-together compound (``diningtable`` → ``dining_table``); failing
    that, take the senses of its parts (``tvmonitor`` → ``monitor``, ``tv``), head first. Rank
    candidates by (1) lying under one of ``hint_roots`` (``seal`` under ``animal`` is the
    pinniped, not the stamp), (2) having the word as first lemma (``dolphin.n.02`` before
    ``dolphinfish.n.02``), (3) WordNet's sense order (most frequent first).

    A suggestion is a draft: every row of a committed map is checked by hand (see
    :func:`describe_wordnet_id`).

    See docs/hierarchy.md, `suggest_wordnet_ids`.
    """
    try:
        roots = {wnid(synset_of(reader, root)) for root in hint_roots}
    except HierarchyError as err:
        raise ClassMapError(f"hint root: {err}") from None
    out: list[Suggestion] = []
    for name in names:
        how, shown, pairs = _lookup(reader, normalise_name(name))
        ranked: list[tuple[tuple[bool, bool, int], Candidate]] = []
        seen: set[str] = set()
        for order, (word, synset) in enumerate(pairs):
            key = wnid(synset)
            if key in seen:
                continue
            seen.add(key)
            lemma = str(synset.lemmas()[0].name())
            cand = Candidate(
                wnid=key,
                synset=str(synset.name()),
                lemma=lemma,
                gloss=str(synset.definition()),
                sense=order + 1,
                under_hint=bool(roots & _ancestor_ids(synset)),
                lemma_match=lemma.lower() == word,
            )
            ranked.append(((not cand.under_hint, not cand.lemma_match, order), cand))
        ranked.sort(key=lambda item: item[0])
        out.append(Suggestion(str(name), shown, how, tuple(c for _, c in ranked)))
    return out


@dataclass(frozen=True)
class WordNetEntry:
    """What a synset is, for checking a map by hand (see :meth:`format`)."""

    wnid: str
    synset: str
    lemmas: tuple[str, ...]
    gloss: str
    paths: tuple[tuple[str, ...], ...]  # root-to-synset first lemmas, one tuple per path

    def format(self) -> str:
        """A few lines: id, synset, lemmas, gloss, then each hypernym path (root first)."""
        lines = [f"{self.wnid} {self.synset} ({', '.join(self.lemmas)}): {self.gloss}"]
        lines.extend("    " + " > ".join(path) for path in self.paths)
        return "\n".join(lines)


def describe_wordnet_id(reader: WordNetCorpusReader, wordnet_id: str) -> WordNetEntry:
    """The lemmas, gloss and every hypernym path of a noun synset.

    Raises
    ------
    HierarchyError
        If ``wordnet_id`` is malformed or unknown.
    """
    synset = synset_of(reader, wordnet_id)
    paths = sorted(
        tuple(str(s.lemmas()[0].name()) for s in path) for path in synset.hypernym_paths()
    )
    return WordNetEntry(
        wnid=wnid(synset),
        synset=str(synset.name()),
        lemmas=tuple(str(lemma.name()) for lemma in synset.lemmas()),
        gloss=str(synset.definition()),
        paths=tuple(paths),
    )


# ----------------------------------------------------------------------------- the TSV file


@dataclass(frozen=True)
class ClassMapRow:
    """One row of a class map.

    See docs/hierarchy.md, `ClassMapRow`.
    """

    name: str
    wnid: str
    lemma: str
    comment: str = ""
    broader: bool = False
    line: int = field(default=0, compare=False)


def _where(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


def _check_fields(row: ClassMapRow, where: str) -> None:
    if _NAME.fullmatch(row.name) is None:
        raise ClassMapError(
            f"{where}: class name {row.name!r} must be non-empty with no whitespace (xlsa17 "
            "writes 'killer+whale')"
        )
    if _WNID.fullmatch(row.wnid) is None:
        raise ClassMapError(
            f"{where}: {row.wnid!r} (class {row.name!r}) is not a WordNet noun id: expected "
            "'n' and 8 digits, like n02084071"
        )
    if _NAME.fullmatch(row.lemma) is None:
        raise ClassMapError(
            f"{where}: lemma {row.lemma!r} (class {row.name!r}) must be the synset's first "
            "lemma as WordNet spells it, with '_' for spaces"
        )


def _check_unique(rows: Sequence[ClassMapRow], source: str, label: str) -> None:
    names: dict[str, ClassMapRow] = {}
    ids: dict[str, ClassMapRow] = {}
    for pos, row in enumerate(rows):
        where = _where(source, row.line) if row.line else f"{source} {label}[{pos}]"
        first = names.get(row.name)
        if first is not None:
            raise ClassMapError(
                f"{where}: class {row.name!r} is mapped twice (first at "
                f"{_where(source, first.line) if first.line else 'an earlier row'}); keep one row"
            )
        other = None if row.broader else ids.get(row.wnid)
        if other is not None:
            raise ClassMapError(
                f"{where}: classes {other.name!r} and {row.name!r} both map to {row.wnid}; "
                "two classes cannot be the same synset: give one a more specific id, or mark a "
                "class WordNet lacks 'broader'"
            )
        names[row.name] = row
        if not row.broader:
            ids[row.wnid] = row


def read_class_map_rows(path: str | os.PathLike[str]) -> list[ClassMapRow]:
    """Read a class map TSV (format in docs/hierarchy.md), rows in file order.

    Raises
    ------
    ClassMapError
        Naming ``file:line`` for a row without exactly three tab-separated fields, a malformed
        name, id or lemma, a repeated class or id; or naming the file when it is missing,
        unreadable or holds no rows.
    """
    source = Path(path)
    text = read_text_file(
        source,
        ClassMapError,
        missing=f"{source}: no such class map",
        unreadable=lambda err: f"{source}: cannot read it as UTF-8 text ({err})",
    )
    rows: list[ClassMapRow] = []
    pending: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            pending = []
            continue
        if line.lstrip().startswith("#"):
            body = line.lstrip()[1:]
            pending.append(body[1:] if body.startswith(" ") else body)
            continue
        fields = line.split("\t")
        if len(fields) not in (3, 4):
            hint = (
                "; the fields look separated by spaces: use tabs"
                if len(fields) == 1 and len(line.split()) in (3, 4)
                else ""
            )
            raise ClassMapError(
                f"{source}:{number}: expected 3 tab-separated fields (xlsa17_name, wnid, "
                f"wordnet_first_lemma) and optionally 'broader'; got {len(fields)} in "
                f"{line!r}{hint}"
            )
        if len(fields) == 4 and fields[3] != BROADER:
            raise ClassMapError(
                f"{source}:{number}: the fourth field may only be {BROADER!r} (WordNet has no "
                f"synset for the class; the id is the narrowest one containing it); got "
                f"{fields[3]!r}"
            )
        if any(f != f.strip() for f in fields):
            raise ClassMapError(
                f"{source}:{number}: a field has leading or trailing spaces in {line!r}; "
                "separate fields by one tab only"
            )
        row = ClassMapRow(
            fields[0], fields[1], fields[2], "\n".join(pending), len(fields) == 4, line=number
        )
        _check_fields(row, f"{source}:{number}")
        rows.append(row)
        pending = []
    if not rows:
        raise ClassMapError(f"{source}: holds no class rows (only comments or blank lines)")
    _check_unique(rows, str(source), "rows")
    return rows


def read_class_map(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a class map TSV as ``{xlsa17 name: WordNet id}``, in file order.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tsv = pathlib.Path(tempfile.mkdtemp()) / "map.tsv"
    >>> _ = tsv.write_text("# header\\n\\nkiller+whale\\tn02071294\\tkiller_whale\\n")
    >>> read_class_map(tsv)
    {'killer+whale': 'n02071294'}

    Raises
    ------
    ClassMapError
        As :func:`read_class_map_rows`.
    """
    return {row.name: row.wnid for row in read_class_map_rows(path)}


def write_class_map(
    path: str | os.PathLike[str],
    rows: Iterable[ClassMapRow],
    *,
    header: str = "",
) -> None:
    """Write a class map TSV atomically (temporary file, then rename).

    ``header`` (may span lines) is written as ``#`` comments, then a blank line. A row with a
    comment is set off by blank lines, its comment lines directly above it, so
    :func:`read_class_map_rows` reads the same rows and comments back.

    Raises
    ------
    ClassMapError
        If a row is malformed or repeats a class or an id (naming ``rows[i]``), or the target
        directory does not exist.
    """
    items = list(rows)
    target = Path(path)
    for pos, row in enumerate(items):
        _check_fields(row, f"{target} rows[{pos}]")
    _check_unique(items, str(target), "rows")
    if not items:
        raise ClassMapError(f"{target}: no rows to write")
    out: list[str] = [f"# {x}".rstrip() for x in header.splitlines()]
    for row in items:
        if out and (row.comment or out[-1].startswith("#")) and out[-1] != "":
            out.append("")
        out.extend(f"# {x}".rstrip() for x in row.comment.splitlines())
        fields = [row.name, row.wnid, row.lemma, *([BROADER] if row.broader else [])]
        out.append("\t".join(fields))
        if row.comment:
            out.append("")
    while out and out[-1] == "":
        out.pop()
    if not target.parent.is_dir():
        raise ClassMapError(
            f"cannot write {target}: directory {target.parent} does not exist; create it first"
        )
    write_text_atomic(target, "\n".join(out) + "\n", make_parents=False)


def read_class_list(path: str | os.PathLike[str]) -> list[str]:
    """Read a dataset's class names, one per line (xlsa17's ``allclasses.txt``), in file order.

    Blank lines are skipped; surrounding whitespace is dropped.

    Raises
    ------
    ClassMapError
        Naming ``file:line`` for a name with inner whitespace or a repeated name, or naming the
        file when it is missing, unreadable or empty.
    """
    source = Path(path)
    text = read_text_file(
        source,
        ClassMapError,
        missing=f"{source}: no such class list",
        unreadable=lambda err: f"{source}: cannot read it as UTF-8 text ({err})",
    )
    names = unique_tokens(
        text.splitlines(),
        ClassMapError,
        token=str.strip,
        valid=_NAME,
        bad=lambda number, name: (
            f"{source}:{number}: {name!r} is not one class name (it holds whitespace); put "
            "one name per line"
        ),
        repeated=lambda number, name, first: (
            f"{source}:{number}: class {name!r} repeats line {first}"
        ),
    )
    if not names:
        raise ClassMapError(f"{source}: holds no class names")
    return [name for _, name in names]


# ----------------------------------------------------------------------------- checks, freeze


def _rows_of(
    rows: str | os.PathLike[str] | Sequence[ClassMapRow],
) -> tuple[list[ClassMapRow], str]:
    if isinstance(rows, str | os.PathLike):
        return read_class_map_rows(rows), str(rows)
    items = list(rows)
    _check_unique(items, "class map", "rows")
    return items, "class map"


def _row_where(source: str, row: ClassMapRow, pos: int) -> str:
    return _where(source, row.line) if row.line else f"{source} rows[{pos}]"


def check_class_map(
    reader: WordNetCorpusReader,
    rows: str | os.PathLike[str] | Sequence[ClassMapRow],
    *,
    classes: Sequence[str] | None = None,
    exclusive: bool = True,
) -> list[ClassMapRow]:
    """Check a class map against WordNet 3.0 and itself; return its rows.

    Checks that every id names a noun synset, that the lemma field is that synset's first
    lemma, that (with ``exclusive``) no exactly mapped synset is an ancestor of another (the
    classes of a hierarchy must be mutually exclusive), and, with ``classes``, that the map
    covers exactly those class names.

    See docs/hierarchy.md, `check_class_map`.
    """
    items, source = _rows_of(rows)
    synsets = []
    for pos, row in enumerate(items):
        where = _row_where(source, row, pos)
        try:
            synset = synset_of(reader, row.wnid)
        except HierarchyError as err:
            raise ClassMapError(f"{where}: class {row.name!r}: {err}") from None
        first = str(synset.lemmas()[0].name())
        if first != row.lemma:
            raise ClassMapError(
                f"{where}: class {row.name!r}: {row.wnid} is {synset.name()} whose first lemma "
                f"is {first!r}, not {row.lemma!r}; fix the id or the lemma"
            )
        synsets.append(synset)
    index = {row.wnid: pos for pos, row in enumerate(items) if not row.broader}
    for pos, synset in enumerate(synsets):
        if not exclusive or items[pos].broader:
            continue
        for up in sorted(_ancestor_ids(synset) & set(index)):
            other = index[up]
            if other == pos:
                continue
            below, above = items[pos], items[other]
            raise ClassMapError(
                f"{_row_where(source, above, other)}: class {above.name!r} ({above.wnid} "
                f"{above.lemma}) is a WordNet ancestor of class {below.name!r} "
                f"({_row_where(source, below, pos)}, {below.wnid} {below.lemma}); classes must "
                "be mutually exclusive: map the more general class to a more specific synset "
                "that is not an ancestor of the other, and record why in a comment"
            )
    if classes is not None:
        wanted = list(classes)
        have = {row.name for row in items}
        missing = [c for c in wanted if c not in have]
        extra = [row.name for row in items if row.name not in set(wanted)]
        if missing or extra:
            parts = [f"lacks {len(missing)} class(es) {missing[:5]}"] if missing else []
            parts += [f"maps {len(extra)} unknown class(es) {extra[:5]}"] if extra else []
            raise ClassMapError(
                f"{source}: {' and '.join(parts)}; the map must cover exactly the dataset's "
                f"{len(wanted)} classes"
            )
    return items


def build_class_map_hierarchy(
    reader: WordNetCorpusReader,
    rows: str | os.PathLike[str] | Sequence[ClassMapRow],
    *,
    classes: Sequence[str] | None = None,
    root: str | None = None,
) -> Hierarchy:
    """Freeze the WordNet hierarchy of a class map: every hypernym path of every mapped class.

    Runs :func:`check_class_map`, then
    :func:`harness.hierarchy.wordnet.build_wordnet_hierarchy` with ``leaves`` = the mapped ids.

    See docs/hierarchy.md, `build_class_map_hierarchy`.
    """
    items = check_class_map(reader, rows, classes=classes)
    broader = [row for row in items if row.broader]
    if broader:
        raise ClassMapError(
            f"class {broader[0].name!r} is mapped 'broader' ({broader[0].wnid} contains it but is"
            " not it): a hierarchy needs every class to be its own synset; such a map serves"
            " only the leakage audit (spec key audit.wordnet_map)"
        )
    return build_wordnet_hierarchy(reader, root=root, leaves=[row.wnid for row in items])
