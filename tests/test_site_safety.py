"""Deliverable 4: submitted strings never become markup, links or script; slugs are safe for any name."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.site import build_site, builder
from harness.site.pages import CSP
from harness.site.slugs import pair_slug, slug, submission_slug
from tests.site_records import (
    XSS_DESCRIPTION,
    XSS_NAME,
    hostile_copy,
    make_record,
    synthetic_records,
)
from tests.test_site import check_links

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
        '<span class="unlinked" title="shown as text: not an http(s) link">javascript:alert(1)'
        in sub
    )
    for path in html_pages(hostile_site):
        assert 'href="javascript' not in path.read_text(encoding="utf-8").lower()


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
