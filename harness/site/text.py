"""How the site writes values, hashes and links: one place for every number format and URL rule."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "Link",
    "format_diff",
    "format_p",
    "format_value",
    "interval_text",
    "safe_href",
    "short_hash",
]

_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


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


def short_hash(value: str, length: int = 12) -> str:
    """The first ``length`` characters of a hash's digest, without its ``alg:`` prefix.

    >>> short_hash("sha256:0123456789abcdef0123")
    '0123456789ab'
    """
    return value.partition(":")[2][:length] if ":" in value else value[:length]


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
