"""The one place the harness reads YAML: safe, and bounded against bombs.

``yaml.safe_load`` refuses code, but not size. A 1 KB "billion laughs" document (anchors whose
aliases nest ten deep) composes into a handful of shared nodes, and then every consumer that
walks it (the spec's line-number walk, pydantic, JSON dumps) expands it to 10^9 nodes; a
10^5-deep ``[[[[...]]]]`` overflows Python's recursion limit; ``&a [*a]`` is a cycle. So every
YAML the harness reads (specs, ``submission.yaml``, the CI configuration) goes through this
module, which refuses, before anything is constructed:

- a document larger than :data:`MAX_BYTES` (checked before parsing; :func:`read_text` does not
  even read past it),
- nesting deeper than :data:`MAX_DEPTH` (checked while composing, so the parser never descends
  further, and again with aliases expanded),
- more than :data:`MAX_ALIASES` alias uses, or more than :data:`MAX_NODES` distinct nodes
  (both checked while composing, which stops there),
- a node graph that, with every alias expanded at every use, holds more than :data:`MAX_NODES`
  nodes, and aliases that refer to a node containing them (a cycle).

The expanded size and depth are computed once per distinct node (memoized, iteratively), so the
check itself costs time linear in the text; parsing stops at the first bound crossed, so a
refusal costs at most about a second of pure-Python parsing. Refusals raise the caller's error
class with ``file:line: what; refused``. Syntax errors stay ``yaml.YAMLError`` so each caller
keeps its own wording for them. The bounds are far above what a spec or manifest needs (the
shipped ones are under 4 KB, under 300 nodes, nested under 8 levels).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 1_000
MAX_NODES = 20_000


def _refuse(error: type[HarnessError], source: str, line: int | None, what: str) -> HarnessError:
    where = f"{source}:{line}" if line is not None else source
    return error(f"{where}: {what}; refused")


def read_text(path: Path, *, error: type[HarnessError] = HarnessError) -> str:
    """The text of the YAML file ``path``, refusing one larger than :data:`MAX_BYTES`.

    Reads at most ``MAX_BYTES + 1`` bytes, so a huge file never reaches memory, and refuses
    anything but a regular file (opened non-blocking, so a FIFO cannot hang the reader).
    ``OSError`` (``FileNotFoundError`` included) and ``UnicodeDecodeError`` propagate for the
    caller to word.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(error, str(path), None, "not a regular file")
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise _refuse(error, str(path), None, f"larger than the {MAX_BYTES}-byte limit for YAML")
    return raw.decode("utf-8")


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` whose composer counts nesting depth and alias uses as it goes."""

    def __init__(self, text: str, source: str, error: type[HarnessError]) -> None:
        super().__init__(text)
        self.source = source
        self.error = error
        self.depth = 0
        self.aliases = 0
        self.nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _refuse(
                    self.error, self.source, line, f"more than {MAX_ALIASES} YAML aliases"
                )
            return super().compose_node(parent, index)
        # Distinct nodes bound the parsing work: stop as soon as there are too many, rather than
        # parse a whole (up to MAX_BYTES) document of tiny scalars first.
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _refuse(self.error, self.source, line, f"more than {MAX_NODES} YAML nodes")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _refuse(
                self.error, self.source, line, f"YAML nested more than {MAX_DEPTH} levels deep"
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node, source: str, error: type[HarnessError]) -> None:
    """Refuse a graph whose alias-expanded size or depth passes the bounds, or a cycle.

    One iterative post-order walk over the distinct nodes: ``size[n] = 1 + sum(size[c])`` and
    ``depth[n] = 1 + max(depth[c])`` over the children ``c`` (a child used twice counts twice),
    so what is computed is the size of the tree every consumer would walk, without walking it.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()  # the current chain of ancestors: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        line = node.start_mark.line + 1
        if finished:
            open_nodes.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise _refuse(
                    error,
                    source,
                    line,
                    f"this YAML node expands to more than {MAX_NODES} nodes with its aliases"
                    " expanded (an alias bomb?)",
                )
            if depth[key] > MAX_DEPTH:
                raise _refuse(
                    error,
                    source,
                    line,
                    f"YAML nested more than {MAX_DEPTH} levels deep with its aliases expanded",
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise _refuse(error, source, line, "a YAML alias refers to a node that contains it")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def compose(
    text: str, source: str, *, error: type[HarnessError] = HarnessError
) -> yaml.Node | None:
    """Parse one YAML document into its node graph (None: empty), within the bounds.

    Raises ``error`` for a bound passed and ``yaml.YAMLError`` for invalid YAML.
    """
    if len(text) > MAX_BYTES:
        raise _refuse(error, source, None, f"larger than the {MAX_BYTES}-byte limit for YAML")
    loader = _BoundedLoader(text, source, error)
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    if node is not None:
        _check_expansion(node, source, error)
    return node


def construct(node: yaml.Node | None, source: str) -> Any:
    """Python data from a node graph :func:`compose` returned (safe tags only).

    Raises ``yaml.YAMLError`` (a ``ConstructorError``) for a tag outside the safe set.
    """
    if node is None:
        return None
    loader = _BoundedLoader("", source, HarnessError)
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_duplicate_keys(root: yaml.Node, source: str, error: type[HarnessError]) -> None:
    """Refuse a mapping that repeats a key: ``safe_load`` keeps the last one silently, so a
    reader of the file and the harness would see different values."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                    line = key_node.start_mark.line + 1
                    if key_node.value in first:
                        raise _refuse(
                            error,
                            source,
                            line,
                            f"duplicate key '{key_node.value}' (first at line"
                            f" {first[key_node.value]})",
                        )
                    first[key_node.value] = line
        stack.extend(_children(node))


def load(text: str, source: str, *, error: type[HarnessError] = HarnessError) -> Any:
    """``yaml.safe_load`` within the bounds, refusing duplicate keys: the harness's YAML loader.

    ``source`` (a path, usually) names the document in every message. Raises ``error`` for a
    bound passed or a repeated key, and ``yaml.YAMLError`` for invalid YAML or an unsafe tag.
    """
    node = compose(text, source, error=error)
    if node is not None:
        _check_duplicate_keys(node, source, error)
    return construct(node, source)
