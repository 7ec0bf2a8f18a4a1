"""File names and anchors for submitted names: safe for any string, unique, stable.

A slug becomes part of a file name (``submissions/<slug>.html``), a URL path and an element id,
so it may hold only lowercase ASCII letters, digits, ``.``, ``_`` and single ``-``. A name that is
already such a string (and short) is its own slug, which keeps permalinks readable. Any other name
(uppercase, spaces, slashes, markup, dots only, empty, non-ASCII) keeps a readable, cleaned prefix
and gets ``~`` plus a digest of the exact name: ``~`` never occurs in a plain slug, so a cleaned
slug can't collide with a plain one, and lowercase-only slugs can't collide on case-insensitive
file systems either. Slugs never contain ``--``, which separates the two halves of a pair page's
name (``compare/<a>--<b>.html``).
"""

from __future__ import annotations

import re
from hashlib import sha256

__all__ = ["pair_slug", "slug", "submission_slug"]

_PLAIN = re.compile(r"[a-z0-9](?:[a-z0-9._]|-(?!-))*")
_UNSAFE_RUN = re.compile(r"[^a-z0-9._]+")
_MAX_PLAIN = 64
_MAX_PREFIX = 40


def slug(text: str) -> str:
    """A file-name- and URL-safe stand-in for ``text``, distinct for distinct texts.

    Examples
    --------
    >>> slug("eszsl"), slug("ale-v2.1")
    ('eszsl', 'ale-v2.1')
    >>> slug("../../x")
    'x~9cdf6a50100a'
    >>> slug("<script>alert(1)</script>")
    'script-alert-1-script~5c140d35dcb4'
    >>> slug("")
    '~e3b0c44298fc'
    """
    if len(text) <= _MAX_PLAIN and _PLAIN.fullmatch(text) and not text.endswith("-"):
        return text
    cleaned = _UNSAFE_RUN.sub("-", text.lower()).strip("-.")
    cleaned = re.sub(r"-{2,}", "-", cleaned)[:_MAX_PREFIX].rstrip("-.")
    digest = sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned}~{digest}"


def submission_slug(name: str, version: str) -> str:
    """``<name>@<version>`` slugged part by part: one submission version's page and anchor.

    >>> submission_slug("ale", "1.0"), submission_slug("ALE", "1.0")
    ('ale@1.0', 'ale~66addb553b69@1.0')
    """
    return f"{slug(name)}@{slug(version)}"


def pair_slug(a: str, b: str) -> str:
    """The stem of the comparison page of submission slugs ``a`` and ``b`` (in that order).

    >>> pair_slug("ale@1.0", "sje@1.0")
    'ale@1.0--sje@1.0'
    """
    return f"{a}--{b}"
