"""Deliverable 4: submitted strings never become markup, links or script; slugs are safe for any name."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.records import RunRecord
from harness.site import build_site, builder
from harness.site.pages import CSP
from harness.site.slugs import pair_slug, slug, submission_slug
from tests.site.test_site import check_links
from tests.site_records import (
    XSS_DESCRIPTION,
    XSS_NAME,
    hostile_copy,
    make_record,
    synthetic_records,
)

SAFE_FILE = re.compile(r"[a-z0-9._@~-]+\.(html|txt)")


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.script_text if self._in_script else self.text).append(data)


def parse(path: Path) -> Tags:
    parser = Tags()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = synthetic_records(3, 2)
    hostile = [hostile_copy(r) for r in records if r.submission.name == "method-01"]
    site = tmp_path_factory.mktemp("hostile") / "site"
    build_site([*records, *hostile], site)
    return site


def html_pages(site: Path) -> list[Path]:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    return pages


def test_every_page_has_the_content_security_policy(hostile_site: Path) -> None:
    assert "script-src 'self'" in CSP and "default-src 'none'" in CSP
    assert "unsafe" not in CSP
    for path in html_pages(hostile_site):
        metas = [a for t, a in parse(path).tags if t == "meta" and "http-equiv" in a]
        assert metas == [{"http-equiv": "Content-Security-Policy", "content": CSP}], path


def test_only_the_sites_own_script_and_no_inline_code(hostile_site: Path) -> None:
    for path in html_pages(hostile_site):
        page = parse(path)
        scripts = [a for t, a in page.tags if t == "script"]
        assert scripts == [{"src": scripts[0]["src"], "defer": ""}], path
        assert scripts[0]["src"].endswith("static/site.js")
        assert "".join(page.script_text).strip() == "", path
        for tag, attrs in page.tags:
            assert tag not in ("img", "iframe", "object", "embed", "base", "style"), (path, tag)
            for name, value in attrs.items():
                assert not name.startswith("on"), (path, tag, name)
                assert name != "style", (path, tag)
                squeezed = re.sub(r"[\x00-\x20]", "", value).lower()
                assert not squeezed.startswith(("javascript:", "vbscript:", "data:text")), (
                    path,
                    tag,
                    name,
                    value,
                )


def test_hostile_strings_are_shown_as_text(hostile_site: Path) -> None:
    key = submission_slug(XSS_NAME, '1"><svg onload=alert(3)>')
    pages = [
        hostile_site / "index.html",
        hostile_site / "benchmarks" / "bench-00-v1.html",
        hostile_site / "submissions" / f"{key}.html",
        hostile_site / "compare" / f"{pair_slug(key, 'method-00@1.0')}.html",
        hostile_site / "compare.html",
    ]
    for path in pages:
        assert path.is_file(), path
        text = " ".join("".join(parse(path).text).split())
        assert XSS_NAME in text, path  # the name reads as the submitted text
        raw = path.read_text(encoding="utf-8")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in raw, path
        assert "<svg onload" not in raw, path
    sub = (hostile_site / "submissions" / f"{key}.html").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt; &amp; more" in sub
    assert XSS_DESCRIPTION in "".join(parse(hostile_site / "submissions" / f"{key}.html").text)
    assert "&lt;b&gt;Mallory&lt;/b&gt;" in sub and "&lt;i&gt;key&lt;/i&gt;" in sub
    # the script URLs are printed, marked as not links, and never linked
    assert (
        '<span class="unlinked" title="shown as text: not an http(s) link">'
        "<bdi>javascript:alert(1)</bdi>" in sub
    )
    for path in html_pages(hostile_site):
        assert 'href="javascript' not in path.read_text(encoding="utf-8").lower()


@pytest.mark.slow
def test_every_link_stays_inside_the_site(hostile_site: Path) -> None:
    assert check_links(hostile_site) > 200
    for path in hostile_site.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".txt"):
            assert SAFE_FILE.fullmatch(path.name), path


def test_log_text_is_never_html(hostile_site: Path) -> None:
    key = submission_slug(XSS_NAME, '1"><svg onload=alert(3)>')
    logs = list((hostile_site / "logs" / key).iterdir())
    assert [p.suffix for p in logs] == [".txt", ".txt"]
    assert "<script>alert(4)</script>" in logs[0].read_text(encoding="utf-8-sig")


@pytest.mark.parametrize(
    "name",
    [
        XSS_NAME,
        "../../x",
        "a/b",
        "",
        "ünïcødé ✓",
        "CON",
        ".",
        "..",
        "a--b",
        "A",
        "x" * 300,
        "a\x00b",
        "#frag?q=1",
        "%2e%2e",
        " spaced ",
    ],
)
def test_any_name_gets_a_safe_unique_page(tmp_path: Path, name: str) -> None:
    records = [
        make_record(name, zsl={"top1": 0.5}, class_means={"top1": [1.0, 0.0]}),
        make_record("plain", zsl={"top1": 0.4}, class_means={"top1": [1.0, 0.0]}),
    ]
    build_site(records, tmp_path / "site")
    key = submission_slug(name, "1.0")
    assert (tmp_path / "site" / "submissions" / f"{key}.html").is_file()
    assert "--" not in key and "/" not in key and len(key) < 100
    files = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    assert all(p.parts[0] == "site" for p in files)
    assert check_links(tmp_path / "site") > 10


def test_slugs_are_distinct_and_keep_plain_names() -> None:
    names = ["a", "A", "a-b", "a/b", "a b", "a--b", "ä", "", ".", "..", "<b>", "&lt;b&gt;"]
    slugs = [slug(n) for n in names]
    assert len(set(slugs)) == len(names)
    assert len({s.lower() for s in slugs}) == len(names)  # case-insensitive file systems too
    assert slug("eszsl") == "eszsl" and slug("ale-v2.1_b") == "ale-v2.1_b"
    assert all(re.fullmatch(r"[a-z0-9._~-]*", s) and "--" not in s for s in slugs)


def test_the_script_builds_nothing_from_strings() -> None:
    js = (Path(builder.__file__).parent / "static" / "site.js").read_text(encoding="utf-8")
    code = "\n".join(line for line in js.splitlines() if not line.strip().startswith("//"))
    for forbidden in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
        "setTimeout(",
        "setInterval(",
        "javascript:",
    ):
        assert forbidden not in code, forbidden


# -- bidi controls: submitted text can't reorder what surrounds it ---------------------------------

#: Planted in every submitted field: an override, an isolate and a mark (each must stay inside
#: its own isolate), plus stray closers that would end the browser's isolate early if kept.
RLO, RLI, RLM, PDF, PDI, FSI = "\u202e", "\u2067", "\u200f", "\u202c", "\u2069", "\u2068"
PLANTED = (RLO, RLI, RLM)


def bidi_records() -> list[RunRecord]:
    """Synthetic records and a copy whose every submitted string holds bidi controls.

    Identity fields can't hold them since the validators refuse them (tests/core/test_identity.py):
    model_copy skips validation, as a record built by hand (or stored before the rule) would."""
    records = synthetic_records(3, 2)
    evil_title = f"{RLI}Evil{PDI}{PDI} title {RLO}tail"
    out = []
    for record in records:
        if record.benchmark.id == "bench-00":
            record = record.model_copy(
                update={"benchmark": record.benchmark.model_copy(update={"title": evil_title})}
            )
        out.append(record)
        if record.submission.name == "method-01":
            sub = record.submission.model_copy(
                update={
                    "name": f"{RLO}evil{PDF}{PDF}{RLO}",
                    "version": f"{RLM}1{RLI}",
                    "authors": [f"{RLO}Mallory", f"{PDI}{RLO}Trudy"],
                    "description": f"{RLO}over{PDI}{PDF} ride\nnext line {RLI}",
                    "paper": f"{RLO}arxiv 1234",  # not http(s): shown as text
                    "url": f"https://example.org/{RLO}x",  # a link: its text isolated
                    "declarations": {"transductive": True, f"{RLO}key": f"{RLI}value"},
                }
            )
            scores = [
                e.model_copy(update={"metric": f"{RLO}{e.metric}"}) if e.metric == "top5" else e
                for e in record.scores
            ]
            out.append(
                record.model_copy(
                    update={
                        "submission": sub,
                        "scores": scores,
                        "runner": f"{RLO}runner",
                        "logs": {"reason": f"ok {RLO}"},
                    }
                )
            )
    return out


def balanced(text: str) -> bool:
    """Whether every embedding, override and isolate ``text`` opens is closed in it, and every
    closer closes one it opened (the browser's own isolate around the element stays intact)."""
    closers = {
        "\u202a": PDF,
        "\u202b": PDF,
        "\u202d": PDF,
        RLO: PDF,
        "\u2066": PDI,
        RLI: PDI,
        FSI: PDI,
    }
    open_: list[str] = []
    for char in text:
        if char in closers:
            open_.append(closers[char])
        elif char in (PDF, PDI):
            if not open_ or open_[-1] != char:
                return False
            open_.pop()
    return not open_


class Isolation(HTMLParser):
    """Each planted character on a page, and whether something isolates it there: an ancestor
    element that is an isolate (``<bdi>``, any element with ``dir``), or FSI … PDI around it in
    its own text (where only text can go: <title>, <option>, tooltips, SVG text)."""

    VOID = frozenset({"meta", "link", "input", "br", "hr", "img", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.found = 0
        self.problems: list[str] = []
        self.kinds: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        for name in ("title", "aria-label"):  # shown to readers: as a tooltip, read aloud
            if any(c in found.get(name, "") for c in PLANTED):
                self._check_text(found[name], f"<{tag} {name}>", element=False)
        if tag not in self.VOID:
            self.stack.append((tag, found))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if not any(c in data for c in PLANTED):
            return
        tags = [t for t, _ in self.stack]
        self.kinds.add(tags[-1])
        isolated = any(t == "bdi" or "dir" in a for t, a in self.stack)
        where = "/".join(tags[-4:])
        if isolated:
            self.found += sum(data.count(c) for c in PLANTED)
            # and balanced: nothing in it closes the browser's isolate early or stays open
            if not balanced(data):
                self.problems.append(f"{where}: unbalanced {data!r}")
            return
        self._check_text(data, where, element=True)

    def _check_text(self, text: str, where: str, *, element: bool) -> None:
        isolates: list[str] = []  # open isolate initiators, innermost last
        for char in text:
            if char in PLANTED:
                self.found += 1
                if FSI not in isolates:  # inside one of ours, whatever it nests
                    self.problems.append(f"{where}: not isolated in {text!r}")
            if char in (FSI, RLI, "\u2066"):
                isolates.append(char)
            elif char == PDI:
                if not isolates:
                    self.problems.append(f"{where}: stray PDI in {text!r}")
                else:
                    isolates.pop()
        # an SVG label may be cut short ("…"): it is a text element of its own
        if isolates and not (element and self.stack and self.stack[-1][0] in ("text", "title")):
            self.problems.append(f"{where}: isolate left open in {text!r}")


@pytest.fixture(scope="module")
def bidi_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("bidi") / "site"
    build_site(bidi_records(), site)
    return site


def test_bidi_controls_never_reach_past_their_own_text(bidi_site: Path) -> None:
    key = submission_slug(f"{RLO}evil{PDF}{PDF}{RLO}", f"{RLM}1{RLI}")
    counts: dict[str, int] = {}
    for path in html_pages(bidi_site):
        checker = Isolation()
        checker.feed(path.read_text(encoding="utf-8"))
        assert checker.problems == [], (path, checker.problems[:5])
        counts[path.relative_to(bidi_site).as_posix()] = checker.found
    # every kind of page shows the planted text, and each occurrence was checked
    for page in (
        "index.html",
        "benchmarks/bench-00-v1.html",
        f"submissions/{key}.html",
        "compare.html",
        f"compare/{pair_slug('method-00@1.0', key)}.html",
    ):
        assert counts[page] >= 3, (page, counts[page])
    assert sum(counts.values()) > 200


def test_every_planted_field_is_on_the_pages(bidi_site: Path) -> None:
    key = submission_slug(f"{RLO}evil{PDF}{PDF}{RLO}", f"{RLM}1{RLI}")
    sub = (bidi_site / "submissions" / f"{key}.html").read_text(encoding="utf-8")
    for isolated in (
        f"<bdi>{RLO}Mallory{PDF}</bdi>",  # authors: the override closed at the name's end
        f"<bdi>{RLO}Trudy{PDF}</bdi>",  # the stray PDI before it dropped
        f"<bdi>{RLO}over{PDF} ride\nnext line {RLI}{PDI}</bdi>",  # description
        f"<bdi>{RLO}arxiv 1234{PDF}</bdi>",  # paper, not a link
        f'<a href="https://example.org/{RLO}x" rel="nofollow noopener noreferrer"><bdi>',
        f"<bdi>{RLO}key{PDF}</bdi>: <code><bdi>{RLI}value{PDI}</bdi></code>",  # declarations
        f"<bdi>{RLO}runner{PDF}</bdi>",
        # the stray PDF dropped, the RLO left open closed at the name's end
        f"<h1><bdi>{RLO}evil{PDF}{RLO}{PDF}</bdi> <span",
        f"<title>{FSI}{RLO}evil{PDF}{RLO}{PDF}{PDI} {FSI}{RLM}1{RLI}{PDI}{PDI} · ZSL leaderboard"
        "</title>",
    ):
        assert isolated in sub, isolated
    bench = (bidi_site / "benchmarks" / "bench-00-v1.html").read_text(encoding="utf-8")
    assert f"<h1><bdi>{RLI}Evil{PDI} title {RLO}tail{PDF}</bdi> <span" in bench
    assert f"<bdi>{RLO}top5{PDF}</bdi> (%)" in bench  # a metric key
    compare = (bidi_site / "compare.html").read_text(encoding="utf-8")
    label = f"{FSI}{RLO}evil{PDF}{RLO}{PDF}{PDI} {FSI}{RLM}1{RLI}{PDI}{PDI}"
    assert f">{label} (transductive)</option>" in compare
    log = (bidi_site / "logs" / key / "bench-00-v1.txt").read_text(encoding="utf-8-sig")
    assert log.startswith(f"{label} on ")
    css = (bidi_site / "static" / "style.css").read_text(encoding="utf-8")
    assert (
        "bdi { unicode-bidi: isolate; }" in css and ".chart text { unicode-bidi: isolate; }" in css
    )
