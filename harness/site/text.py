"""How the site writes values, hashes, links and submitted text: one place for every format rule.

Submitted text is *isolated*: a name holding U+202E RIGHT-TO-LEFT OVERRIDE (or any other bidi
control) must not reorder the text after it -- the version next to it, the score in the next
cell, the rest of the page title. In markup every submitted string sits in its own ``<bdi>``
element (:func:`isolate`, the templates' ``bdi`` filter), which the browser lays out as a bidi
isolate; where no element can go (the page ``<title>``, ``<option>`` text, tooltips) the string
is wrapped in U+2068 FIRST STRONG ISOLATE … U+2069 POP DIRECTIONAL ISOLATE (:func:`isolate_text`).
Either way the string is *balanced* first (:func:`balance_bidi`): a stray U+2069 or U+202C in it
would otherwise close the isolate the browser opened around it, and let what follows escape.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from markupsafe import Markup, escape

__all__ = [
    "Link",
    "format_diff",
    "format_p",
    "format_value",
    "interval_text",
    "isolate",
    "isolate_text",
    "safe_href",
]

_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_EMBEDDINGS = frozenset("\u202a\u202b\u202d\u202e")  # LRE RLE LRO RLO, closed by PDF
_ISOLATES = frozenset("\u2066\u2067\u2068")  # LRI RLI FSI, closed by PDI
_PDF, _PDI = "\u202c", "\u2069"
#: Bidi class B: a paragraph separator ends every embedding and isolate (UAX #9, X8).
_PARAGRAPH = frozenset("\n\r\x1c\x1d\x1e\x85\u2029")
_EXPLICIT = re.compile("[\u202a-\u202e\u2066-\u2069]")
FSI, PDI = "\u2068", "\u2069"


@dataclass(frozen=True)
class Link:
    """Text that is a link only when ``href`` is set (http/https URLs only)."""

    text: str
    href: str | None


def safe_href(url: str | None) -> str | None:
    """``url`` if it is an absolute http(s) URL without spaces or control characters, else None.

    >>> safe_href("https://arxiv.org/abs/1503.08677")
    'https://arxiv.org/abs/1503.08677'
    >>> safe_href("javascript:alert(1)") is None
    True
    >>> safe_href("java\\nscript://x") is None
    True
    """
    if not url or _UNSAFE_URL_CHARS.search(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


def balance_bidi(text: str) -> str:
    """``text`` with its explicit bidi controls balanced: a closer that closes nothing it opened
    is dropped, and every embedding, override or isolate it leaves open is closed at its end.

    Marks (LRM, RLM, ALM) are strong letters, not controls, and stay: inside an isolate they only
    affect the isolated text.

    >>> balance_bidi("ale") == "ale"
    True
    >>> balance_bidi("\u202eevil") == "\u202eevil\u202c"
    True
    >>> balance_bidi("a\u2069\u202cb\u2067c") == "ab\u2067c\u2069"
    True
    """
    if _EXPLICIT.search(text) is None:
        return text
    out: list[str] = []
    open_: list[str] = []  # the closer each open initiator needs, innermost last
    for char in text:
        if char in _EMBEDDINGS:
            open_.append(_PDF)
        elif char in _ISOLATES:
            open_.append(_PDI)
        elif char == _PDF:
            if not open_ or open_[-1] != _PDF:
                continue  # closes nothing of ours (or would reach out of an isolate)
            open_.pop()
        elif char == _PDI:
            if _PDI not in open_:
                continue
            while open_.pop() != _PDI:  # a PDI also closes the embeddings inside its isolate
                pass
        elif char in _PARAGRAPH:
            out.extend(reversed(open_))
            open_.clear()
        out.append(char)
    out.extend(reversed(open_))
    return "".join(out)


def isolate(text: str) -> Markup:
    """Submitted ``text`` as escaped markup in its own ``<bdi>`` (see the module's docstring).

    >>> isolate("<b>\u202eevil") == Markup("<bdi>&lt;b&gt;\u202eevil\u202c</bdi>")
    True
    """
    return Markup(f"<bdi>{escape(balance_bidi(text))}</bdi>")


def isolate_text(text: str) -> str:
    """Submitted ``text`` between FSI and PDI, balanced: for places that hold text only."""
    return f"{FSI}{balance_bidi(text)}{PDI}"


def format_value(value: float | None, *, percent: bool) -> str:
    """A score as text: percent with one decimal, else two decimals; ``—`` when missing.

    >>> format_value(0.6234, percent=True), format_value(2.345, percent=False)
    ('62.3', '2.35')
    """
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:.1f}" if percent else f"{value:.2f}"


def interval_text(lo: float, hi: float, *, percent: bool) -> str:
    """``lo–hi`` in the score's format.

    >>> interval_text(0.5, 0.625, percent=True)
    '50.0–62.5'
    """
    return f"{format_value(lo, percent=percent)}–{format_value(hi, percent=percent)}"


def format_diff(value: float, *, percent: bool, unit: bool = True) -> str:
    """A difference with its sign, in percentage points for percentages (`` pp`` if ``unit``).

    >>> format_diff(0.0321, percent=True), format_diff(-0.5, percent=False)
    ('+3.2 pp', '−0.50')
    >>> format_diff(-0.0004, percent=True, unit=False)  # rounds to zero: no sign
    '0.0'
    """
    if not math.isfinite(value):
        return "—"
    text = f"{abs(value) * 100:.1f}" if percent else f"{abs(value):.2f}"
    rounds_to_zero = text.strip("0.") == ""
    sign = "" if rounds_to_zero else ("+" if value > 0 else "−")
    return sign + text + (" pp" if percent and unit else "")


def format_p(p: float, alpha: float = 0.05) -> str:
    """A p-value with three decimals (``< 0.001`` below), more where rounding would cross ``alpha``.

    >>> format_p(0.0321), format_p(50 / 1001), format_p(0.0001), format_p(1.0)
    ('0.032', '0.04995', '< 0.001', '1.000')
    """
    if not math.isfinite(p):
        return "—"
    if p < 0.001:
        return "< 0.001"
    for decimals in range(3, 10):
        text = f"{p:.{decimals}f}"
        if (float(text) < alpha) == (p < alpha):
            return text
    return repr(p)
