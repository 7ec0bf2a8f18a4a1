"""Identities that read the same are the same: names and ids, normalized, checked, told apart.

A submission name, a submission version and a benchmark id name a run (:func:`harness.records.
run_key`), its record file and its pages. Unicode lets two different strings read alike, so
three rules hold wherever records are loaded, saved or published.

See docs/core.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from harness.core.errors import HarnessError

if TYPE_CHECKING:  # records imports this module for its validators
    from harness.records import RunRecord

__all__ = [
    "check_distinct_identities",
    "check_new_identities",
    "escaped",
    "identity_text",
    "skeleton",
]

#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt, stable since 6.x):
#: code points a renderer shows as nothing. Not all are category Cf (Hangul fillers are Lo).
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE_CLASS = "".join(
    f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _DEFAULT_IGNORABLE
)
_IGNORABLE = re.compile(f"[{_IGNORABLE_CLASS}]")
#: C0 and C1 controls that are not white space (white space is collapsed instead).
_CONTROLS = re.compile("[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x84\\x86-\\x9f]")
#: Categories never allowed in an identity field (besides the default-ignorables).
_REFUSED_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
#: What authors may keep of the refused set: joiners that spell Persian and Indic names.
_AUTHOR_JOINERS = frozenset("\u200c\u200d")

# Look-alikes of Latin letters, digits and punctuation, applied after NFKC and NFD (so accents
# are kept as combining marks and only base letters are mapped). _CASED keeps letter case and is
# used for the case-sensitive key (Cyrillic "В" reads as Latin "B", capital "I" as "l");
# _FOLDED maps the lower-case forms after casefold().
_LOOKALIKE_LOWER = {
    # Cyrillic
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "ӏ": "l", "о": "o",
    "р": "p", "ԛ": "q", "ѕ": "s", "у": "y", "х": "x", "ԝ": "w", "ь": "b", "г": "r",
    # Greek
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "γ": "y", "ϲ": "c", "ϳ": "j",
    # Latin variants NFKC keeps
    "ı": "i", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ʏ": "y", "ᴏ": "o",
}  # fmt: skip
_LOOKALIKE_UPPER = {
    # Cyrillic
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "l", "Ј": "J", "К": "K", "М": "M",
    "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "У": "Y", "Ү": "Y", "Ӏ": "l", "Ԛ": "Q",
    "Ԝ": "W",
    # Greek
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "l", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin capital I reads as small L in most sans-serif faces
    "I": "l",
}  # fmt: skip
_LOOKALIKE_OTHER = {
    "0": "O", "1": "l", "|": "l", "ǀ": "l",
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\u2043": "-", "\ufe63": "-", "\u02d7": "-",
}  # fmt: skip
_CASED = str.maketrans({**_LOOKALIKE_LOWER, **_LOOKALIKE_UPPER, **_LOOKALIKE_OTHER})
_FOLDED = str.maketrans({**_LOOKALIKE_LOWER, **_LOOKALIKE_OTHER, "0": "o"})
#: Letter groups that read as one letter (UTS #39 maps m to rn, w to vv, d to cl).
_PAIRS = (("m", "rn"), ("w", "vv"), ("d", "cl"))
_SPACES = re.compile(r"\s+")


def invisible_char(text: str, *, allow: frozenset[str] = frozenset()) -> tuple[int, str] | None:
    """The position and character of the first invisible or layout-changing character, if any.

    >>> invisible_char("eszsl"), invisible_char("es\\u200bzsl"), invisible_char("a\\u202eb")
    (None, (2, '\\u200b'), (1, '\\u202e'))
    """
    for position, char in enumerate(text):
        if char in allow:
            continue
        category = unicodedata.category(char)
        if (
            category in _REFUSED_CATEGORIES
            or (category == "Zs" and char != " ")
            or _IGNORABLE.match(char) is not None
        ):
            return position, char
    return None


def identity_text(text: str, field: str, *, author: bool = False) -> str:
    """``text`` in NFC, refused if it holds an invisible or layout-changing character.

    ``field`` names the field in the message; ``author`` allows the joiners ZWNJ and ZWJ.

    >>> identity_text("cafe\\u0301", "submission name") == "caf\\u00e9"
    True
    >>> identity_text("ale\\u202e1", "submission name")
    Traceback (most recent call last):
    ...
    ValueError: submission name 'ale\\u202e1' holds U+202E RIGHT-TO-LEFT OVERRIDE at position 3, \
an invisible or text-direction character; identities may not hold them (use plain text)
    """
    normal = unicodedata.normalize("NFC", text)
    found = invisible_char(normal, allow=_AUTHOR_JOINERS if author else frozenset())
    if found is not None:
        position, char = found
        # ValueError: pydantic turns it into a validation error at the field's path.
        raise ValueError(
            f"{field} {escaped(normal)} holds {_char_name(char)} at position {position}, an "
            "invisible or text-direction character; identities may not hold them (use plain text)"
        )
    return normal


def skeleton(text: str, *, keep_case: bool = False) -> str:
    """What ``text`` looks like: two names with one skeleton are confusable.

    NFKC; drop default-ignorable, format and control characters; collapse white space; casefold
    (unless ``keep_case``); map look-alike characters and letter pairs to one prototype.

    >>> lookalikes = ("ESZSL", "\\u0435szsl", "es\\u200bzsl", "\\uff45szsl")
    >>> all(skeleton(name) == skeleton("eszsl") for name in lookalikes)
    True
    >>> skeleton("method-01") == skeleton("method-0l"), skeleton("ale") == skeleton("a1e")
    (True, True)
    >>> skeleton("ale") == skeleton("sje")
    False
    """
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")  # every format character
    text = _SPACES.sub(" ", _CONTROLS.sub("", _IGNORABLE.sub("", text))).strip()
    if not keep_case:
        text = text.casefold()
    text = unicodedata.normalize("NFD", text).translate(_CASED if keep_case else _FOLDED)
    for letter, pair in _PAIRS:
        text = text.replace(letter, pair)
    return unicodedata.normalize("NFC", text)


def escaped(text: str) -> str:
    """``text`` quoted, with every non-ASCII character as an escape, so look-alikes show apart.

    >>> print(escaped("\\u0435szsl"))
    '\\u0435szsl'
    """
    return "'" + text.encode("ascii", "backslashreplace").decode("ascii") + "'"


def check_distinct_identities(
    records: Iterable[RunRecord], where: Callable[[RunRecord], str] | None = None
) -> None:
    """Refuse two different submission names, benchmark ids, or versions of one submission
    name, that read alike (:func:`skeleton`, with and without case).

    ``where`` names a record in the message (default: its run, ``name@version on id vN``).

    Raises
    ------
    HarnessError
        Naming both identities (escaped, so the difference shows) and a record of each.
    """
    name_of = where or _describe
    names = _Distinct("submission names")
    benchmarks = _Distinct("benchmark ids")
    versions: dict[str, _Distinct] = {}
    for record in records:
        info = record.submission
        names.add(info.name, record, name_of)
        benchmarks.add(record.benchmark.id, record, name_of)
        versions.setdefault(info.name, _Distinct(f"versions of {info.name!r}")).add(
            info.version, record, name_of
        )


def check_new_identities(
    records: Iterable[RunRecord], stored_names: Iterable[str], stored_benchmarks: Iterable[str]
) -> None:
    """Refuse a record whose submission name or benchmark id reads like a different one that
    is already stored (and records that clash among themselves)."""
    names = _Distinct("submission names")
    benchmarks = _Distinct("benchmark ids")
    # Stored identities are not checked against each other: a store from before this rule
    # must keep accepting runs of its existing names.
    for name in stored_names:
        names.register(name)
    for bench in stored_benchmarks:
        benchmarks.register(bench)
    for record in records:
        names.add(record.submission.name, record, _describe)
        benchmarks.add(record.benchmark.id, record, _describe)


class _Distinct:
    """Identities seen so far by both skeletons; :meth:`add` raises on a look-alike."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.first: dict[str, str] = {}  # identity -> where it was first seen
        self.by_key: dict[tuple[bool, str], str] = {}  # (keep_case, skeleton) -> identity

    def register(self, value: str) -> None:
        """Remember a stored identity without checking it."""
        self.first.setdefault(value, "already in the store")
        for keep_case in (False, True):
            self.by_key.setdefault((keep_case, skeleton(value, keep_case=keep_case)), value)

    def add(self, value: str, record: RunRecord, name_of: Callable[[RunRecord], str]) -> None:
        if value in self.first:
            return
        here = name_of(record)
        for keep_case in (False, True):
            key = (keep_case, skeleton(value, keep_case=keep_case))
            other = self.by_key.setdefault(key, value)
            if other != value:
                raise HarnessError(
                    f"{self.what} {escaped(other)} ({self.first[other]}) and {escaped(value)} "
                    f"({here}) look alike (same letters once case, invisible characters and "
                    "look-alike letters are set aside); they would read as one identity: "
                    "rename one, or use the same spelling for the same submission"
                )
        self.first[value] = here


def _describe(record: RunRecord) -> str:
    info = record.submission
    return f"run {info.name}@{info.version} on {record.benchmark.id} v{record.benchmark.version}"


def _char_name(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')}"
