"""Built pages parsed, not grepped: every element with its attributes and text."""

from __future__ import annotations

from html.parser import HTMLParser

#: Elements the site writes without an end tag.
VOID = ("line", "rect", "meta", "link", "br", "input")


class Elements(HTMLParser):
    """Every element's tag, attributes and text (nested text included), in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}, []))
        if tag not in VOID:
            self._open.append(len(self.found) - 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            index = self._open.pop()
            if self.found[index][0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for index in self._open:
            self.found[index][2].append(data)

    def select(self, tag: str, css: str = "") -> list[tuple[dict[str, str], str]]:
        return [
            (attrs, "".join(text))
            for t, attrs, text in self.found
            if t == tag and (not css or css in attrs.get("class", "").split())
        ]
