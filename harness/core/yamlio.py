"""The one place the harness reads YAML: safe, and bounded against bombs.

``yaml.safe_load`` refuses code, but not size. A 1 KB "billion laughs" document (anchors whose
aliases nest ten deep) composes into a handful of shared nodes, and then every consumer that
walks it (the spec's line-number walk, pydantic, JSON dumps) expands it to 10^9 nodes; a
10^5-deep ``[[[[...]]]]`` overflows Python's recursion limit; ``&a [*a]`` is a cycle. So every
YAML the harness reads (specs, ``submission.yaml``, the CI configuration) goes through this
module, which refuses, before anything is constructed, a document too large, too deep, with too
many aliases or nodes (aliases expanded), or cyclic.

See docs/core.md.
"""

from __future__ import annotations

import difflib
import enum
import os
import re
import stat
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from harness.core.errors import HarnessError

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 1_000
MAX_NODES = 20_000


def _refuse(error: type[HarnessError], source: str, line: int | None, what: str) -> HarnessError:
    where = f"{source}:{line}" if line is not None else source
    return error(f"{where}: {what}; refused")


def read_text(
    path: Path, *, error: type[HarnessError] = HarnessError, within: Path | None = None
) -> str:
    """The text of the YAML file ``path``, refusing one larger than :data:`MAX_BYTES`.

    Reads at most ``MAX_BYTES + 1`` bytes, so a huge file never reaches memory, and refuses
    anything but a regular file (opened non-blocking, so a FIFO cannot hang the reader).
    With ``within`` (a folder), ``path`` must also resolve, links followed, to a file directly in
    that folder: a file one document names from another (a spec's ``extends``) cannot reach
    anything else on the machine through ``..`` or a symbolic link. The resolved file is then
    opened without following links, so a link swapped in afterwards is refused too.
    ``OSError`` (``FileNotFoundError`` included) and ``UnicodeDecodeError`` propagate for the
    caller to word.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK
    if within is not None:
        try:
            real = path.resolve(strict=True)
        except RuntimeError:  # a loop of links (Python < 3.13; later versions raise OSError)
            raise _refuse(error, str(path), None, "a loop of symbolic links") from None
        if real.parent != within.resolve():
            raise _refuse(error, str(path), None, f"resolves to a file outside {within}")
        path, flags = real, flags | os.O_NOFOLLOW
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a folder its way
        os.close(fd)
        raise _refuse(error, str(path), None, "not a regular file")
    with os.fdopen(fd, "rb") as handle:
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


def _check_duplicate_keys(
    root: yaml.Node, source: str, error: type[HarnessError], *, key_paths: bool = False
) -> None:
    """Refuse a mapping that repeats a key: ``safe_load`` keeps the last one silently, so a
    reader of the file and the harness would see different values.

    The first repeat in document order is reported: ``source:line: duplicate key 'k' (first at
    line N); refused``, or with ``key_paths`` as a validation problem reads,
    ``source:line: key.path: duplicate key (first at line N)``.
    """
    seen_nodes: set[int] = set()
    # Pre-order, in document order: a mapping's key is checked, then its value walked, then the
    # next key (entries are pushed in reverse, the key above its value).
    stack: list[tuple[Loc, yaml.Node | None, yaml.Node, dict[str, int]]] = [((), None, root, {})]
    while stack:
        loc, key_node, node, first = stack.pop()
        if key_node is not None and isinstance(key_node, yaml.ScalarNode):
            line = key_node.start_mark.line + 1
            if key_node.value in first:
                if key_paths:
                    raise error(
                        f"{source}:{line}: {key_path(loc)}: duplicate key (first at line"
                        f" {first[key_node.value]})"
                    )
                raise _refuse(
                    error,
                    source,
                    line,
                    f"duplicate key '{key_node.value}' (first at line {first[key_node.value]})",
                )
            first[key_node.value] = line
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for child_key, value in reversed(node.value):
                merge = isinstance(child_key, yaml.ScalarNode) and child_key.value == "<<"
                name = child_key.value if isinstance(child_key, yaml.ScalarNode) else "?"
                stack.append(((*loc, name), None if merge else child_key, value, keys))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(
                ((*loc, index), None, item, {})
                for index, item in reversed(list(enumerate(node.value)))
            )


def load(text: str, source: str, *, error: type[HarnessError] = HarnessError) -> Any:
    """``yaml.safe_load`` within the bounds, refusing duplicate keys: the harness's YAML loader.

    ``source`` (a path, usually) names the document in every message. Raises ``error`` for a
    bound passed or a repeated key, and ``yaml.YAMLError`` for invalid YAML or an unsafe tag.
    """
    node = compose(text, source, error=error)
    if node is not None:
        _check_duplicate_keys(node, source, error)
    return construct(node, source)


# -- YAML validated by a pydantic model, every problem at its line --------------------------------

#: A key path into a document: mapping keys and sequence indices, outermost first.
Loc = tuple[str | int, ...]
#: Where a key is written when a document spans files (a spec and the base it extends): the
#: file, named as its reader names it, and the 1-based line.
Where = tuple[str, int]
#: The place of every key path: its line in the one document, or its file and line.
Lines = Mapping[Loc, int | Where]
ModelT = TypeVar("ModelT", bound=BaseModel)
#: A check of the (valid or not) data beyond the model's own: the problems it finds.
Check = Callable[[dict[str, Any]], Iterable[tuple[Loc, str]]]


def key_lines(root: yaml.Node) -> dict[Loc, int]:
    """The 1-based line of every key path in a node graph from :func:`compose`.

    A mapping entry is at the line of its key, a sequence item at its own, ``()`` at the
    document's first node. Iterative, and linear in the alias-expanded size :func:`compose` bounds.
    """
    lines: dict[Loc, int] = {}
    stack: list[tuple[Loc, yaml.Node]] = [((), root)]
    while stack:
        loc, node = stack.pop()
        lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    lines[(*loc, key_node.value)] = key_node.start_mark.line + 1
                    stack.append(((*loc, key_node.value), value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(((*loc, index), item) for index, item in enumerate(node.value))
    return lines


def yaml_error(err: yaml.YAMLError, source: str, error: type[HarnessError]) -> HarnessError:
    """``source:line: not valid YAML: problem`` for a syntax error or an unsafe tag."""
    mark = getattr(err, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    return error(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}")


def load_document(
    text: str, source: str, *, error: type[HarnessError] = HarnessError, key_paths: bool = False
) -> tuple[Any, dict[Loc, int]]:
    """YAML text as Python data, with the line of every key path (``(None, {})``: empty).

    Bounded and strict like :func:`load` (no bombs, no repeated key; ``key_paths`` words a
    repeat as a validation problem, see :func:`_check_duplicate_keys`). Invalid YAML and
    unsafe tags raise ``error`` too (:func:`yaml_error`), so every failure is one ``error``.
    """
    try:
        node = compose(text, source, error=error)
        if node is None:
            return None, {}
        _check_duplicate_keys(node, source, error, key_paths=key_paths)
        return construct(node, source), key_lines(node)
    except yaml.YAMLError as err:
        raise yaml_error(err, source, error) from None


def key_path(loc: Loc) -> str:
    """A key path as messages write it: ``metrics[2].k``; ``(top level)`` for ``()``.

    >>> key_path(("metrics", 2, "k")), key_path(())
    ('metrics[2].k', '(top level)')
    """
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return text.removeprefix(".") or "(top level)"


def line_of(lines: Mapping[Loc, int], loc: Loc) -> int:
    """The line of ``loc``, else of its nearest enclosing key (a missing key: its mapping's)."""
    while loc and loc not in lines:
        loc = loc[:-1]
    return lines.get(loc, 1)


def where_of(lines: Lines, loc: Loc, source: str) -> Where:
    """The file and line of ``loc``, else of its nearest enclosing key; a line alone is in
    ``source`` (the document's first line where nothing encloses it)."""
    while loc and loc not in lines:
        loc = loc[:-1]
    place = lines.get(loc, 1)
    return place if isinstance(place, tuple) else (source, place)


def _field_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside ``X``, ``list[X]``, ``dict[K, X]`` or ``X | None``, if any."""
    pending = [annotation]
    while pending:
        hint = pending.pop()
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            return hint
        if typing.get_origin(hint) in (list, dict, typing.Union, types.UnionType):
            pending.extend(typing.get_args(hint))
    return None


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model whose keys ``loc`` (a mapping's key path) lists, walking down from ``model``."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, str):
            field = current.model_fields.get(part)
            current = _field_model(field.annotation) if field is not None else None
    return current


# A whole-model check names the key it is about first ('primary.zsl: ...'), so the message can
# be placed at the line of that key.
_LEADING_KEY_PATH = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+|\[\d+\])*): (.*)$", re.S
)
_KEY_PATH_PART = re.compile(r"\.?([A-Za-z0-9_]+)|\[(\d+)\]")


#: Pydantic error types whose input must be one of a set of values, which messages list.
CHOICE_ERRORS = frozenset({"literal_error", "enum"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _named_key(message: str, data: Any, nested: type[BaseModel] | None) -> str | None:
    """The first key of ``nested`` (a model) that ``message`` names and the mapping ``data``
    holds, or None."""
    if nested is None or not isinstance(data, dict):
        return None
    for word in _WORD.findall(message):
        if word in nested.model_fields and word in data:
            return word
    return None


def _alternatives(hint: Any) -> list[Any]:
    """``hint`` without ``Annotated`` and ``Optional``/unions: the types it allows."""
    pending, found = [hint], []
    while pending:
        current = pending.pop(0)
        origin = typing.get_origin(current)
        if origin is typing.Annotated:
            pending.insert(0, typing.get_args(current)[0])
        elif origin in (typing.Union, types.UnionType):
            pending[:0] = list(typing.get_args(current))
        else:
            found.append(current)
    return found


def _annotation_at(model: type[BaseModel], loc: Loc) -> Any:
    """The type annotation of the value at ``loc`` under ``model`` (None: unknown)."""
    hint: Any = model
    for part in loc:
        step = None
        for option in _alternatives(hint):
            origin = typing.get_origin(option)
            args = typing.get_args(option)
            if isinstance(option, type) and issubclass(option, BaseModel):
                field = option.model_fields.get(str(part))
                step = field.annotation if field is not None else None
            elif origin in (list, tuple, set, frozenset) and isinstance(part, int) and args:
                step = args[0]
            elif origin is dict and len(args) == 2:
                step = args[1]
            if step is not None:
                break
        if step is None:
            return None
        hint = step
    return hint


def allowed_values(
    model: type[BaseModel],
    loc: Loc,
    *,
    key: bool = False,
    expected: Mapping[str, Any] | None = None,
) -> list[Any] | None:
    """The values the field at ``loc`` of ``model`` allows (a ``Literal`` or an ``Enum``; with
    ``key``, the keys of the mapping at ``loc``), or, where the annotation does not say, the
    ones pydantic's ``expected`` lists; None when neither does."""
    hint = _annotation_at(model, loc)
    if key and hint is not None:
        keys = [typing.get_args(o)[0] for o in _alternatives(hint) if typing.get_origin(o) is dict]
        hint = keys[0] if keys else None
    values: list[Any] = []
    for option in _alternatives(hint) if hint is not None else []:
        if typing.get_origin(option) is typing.Literal:
            values += [v for v in typing.get_args(option) if v not in values]
        elif isinstance(option, type) and issubclass(option, enum.Enum):
            values += [m.value for m in option if m.value not in values]
    if values:
        return values
    text = (expected or {}).get("expected")
    if isinstance(text, str) and text:
        return [part.strip().strip("'\"") for part in re.split(r",| or ", text) if part.strip()]
    return None


def parse_key_path(text: str) -> Loc:
    """The inverse of :func:`key_path`.

    >>> parse_key_path("metrics[2].k")
    ('metrics', 2, 'k')
    """
    return tuple(int(index) if index else key for key, index in _KEY_PATH_PART.findall(text))


def describe_error(
    error: ErrorDetails, model: type[BaseModel], *, also_allowed: Sequence[str] = ()
) -> tuple[Loc, str]:
    """One pydantic error of validating ``model`` as ``(key path, message)``.

    An unknown key names the allowed ones (the model's, plus ``also_allowed`` at the top level:
    keys the loader reads itself, such as a spec's ``extends``) and the closest, when one is
    close; a missing key says so; a value (or a mapping key) outside a ``Literal``'s or an
    ``Enum``'s choices lists them all, what it got and the closest
    (``kind: must be one of 'predictions', 'model'; got 'modle'. Did you mean 'model'?``); a
    scalar that does not fit otherwise says what it got. A mapping key that does not fit is
    placed at its own line. A whole-model check whose message starts with a key path of the
    model (``primary.zsl: ...``) is placed at that key; a nested model's check, at the first
    of its keys the message names that the mapping holds (``predictions.k``).
    """
    loc: Loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
    kind = error["type"]
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind in CHOICE_ERRORS:
        is_key = len(loc) >= 2 and loc[-1] == "[key]"
        field = loc[:-2] if is_key else loc
        choices = allowed_values(model, field, key=is_key, expected=error.get("ctx"))
        if choices is not None:
            got = loc[-2] if is_key else error.get("input")
            message = f"must be one of {', '.join(repr(c) for c in choices)}; got {got!r}"
            close = difflib.get_close_matches(str(got), [str(c) for c in choices], n=1)
            message += f". Did you mean '{close[0]}'?" if close and isinstance(got, str) else ""
            # A mapping key that does not fit is placed at its own line (``primary.gzls``).
            return (loc[:-1], f"key {message}") if is_key else (loc, message)
    if len(loc) >= 2 and loc[-1] == "[key]":  # a mapping key that does not fit: at its line
        return loc[:-1], f"key '{loc[-2]}': {message}"
    if kind == "missing":
        return loc, "required key is missing"
    if kind == "extra_forbidden" and loc:
        parent = _model_at(model, loc[:-1])
        allowed = sorted(parent.model_fields) if parent is not None else []
        if parent is model:
            allowed = sorted([*allowed, *also_allowed])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return loc, f"unknown key '{loc[-1]}'.{hint} Allowed keys: {', '.join(allowed)}"
    leading = _LEADING_KEY_PATH.match(message) if not loc and kind == "value_error" else None
    if leading is not None and leading.group(1).split(".")[0].split("[")[0] in model.model_fields:
        return parse_key_path(leading.group(1)), leading.group(2)
    named = _named_key(message, error.get("input"), _model_at(model, loc))
    if loc and kind == "value_error" and named is not None:
        # A nested model's own check ('format 'topk' needs 'k''): at the first key it names
        # that the mapping holds, not at the mapping's first line.
        return (*loc, named), message
    # Our own validators (value errors) word the value themselves; pydantic's messages do not.
    scalar = not isinstance(error.get("input"), dict | list)
    if kind == "literal_error" or (scalar and kind != "value_error"):
        message += f"; got {error.get('input')!r}"
    return loc, message


def problems_error(
    problems: Sequence[tuple[Loc, str]],
    source: str,
    lines: Lines,
    *,
    error: type[HarnessError] = HarnessError,
) -> HarnessError:
    """One ``error`` listing every ``(key path, message)`` under ``N problem(s) in source:``,
    each as ``file:line: key.path: message`` (:func:`where_of`): ``source``'s first, in line
    order, then those of other files (a base the document extends)."""
    located = [(where_of(lines, loc, source), loc, msg) for loc, msg in problems]
    located.sort(key=lambda problem: (problem[0][0] != source, problem[0][1]))
    listed = [f"{file}:{line}: {key_path(loc)}: {msg}" for (file, line), loc, msg in located]
    count = f"{len(listed)} problem{'s' if len(listed) != 1 else ''}"
    return error(f"{count} in {source}:\n  " + "\n  ".join(listed))


def validate_model(
    data: Any,
    model: type[ModelT],
    source: str,
    lines: Lines,
    *,
    error: type[HarnessError] = HarnessError,
    also_allowed: Sequence[str] = (),
    checks: Check | None = None,
) -> ModelT:
    """``data`` as a ``model``, or one ``error`` listing every problem at its file and line.

    ``lines`` places each key path (:func:`load_document`'s lines, or a merged document's
    ``(file, line)`` places); ``also_allowed`` names top-level keys the caller consumed before
    validation; ``checks`` finds further problems in the data (run whether or not the model
    validated), reported with the model's own (:func:`problems_error`).
    """
    problems: list[tuple[Loc, str]] = []
    result: ModelT | None = None
    try:
        result = model.model_validate(data)
    except ValidationError as err:
        problems.extend(describe_error(e, model, also_allowed=also_allowed) for e in err.errors())
    if checks is not None:
        problems.extend(checks(data))
    if problems:
        raise problems_error(problems, source, lines, error=error)
    assert result is not None
    return result


def load_model(
    text: str, source: str, model: type[ModelT], *, error: type[HarnessError] = HarnessError
) -> tuple[ModelT, dict[Loc, int]]:
    """``text`` as a ``model``, with the line of every key path: YAML through pydantic.

    :func:`load_document`, then :func:`validate_model`. Invalid YAML, a bound passed, a
    repeated key, a document that is not a mapping, and every validation problem at once raise
    one ``error`` whose lines read ``source:line: key.path: message``; the lines returned let
    the caller place its own later checks the same way.
    """
    data, lines = load_document(text, source, error=error)
    if not isinstance(data, dict):
        required = [f"'{name}'" for name, spec in model.model_fields.items() if spec.is_required()]
        keys = f"with the key{'s' if len(required) > 1 else ''} {', '.join(required)}"
        what = keys if required else "of keys"
        raise error(f"{source}:{line_of(lines, ())}: must be a mapping {what}")
    return validate_model(data, model, source, lines, error=error), lines


def load_model_file(
    path: Path,
    model: type[ModelT],
    *,
    error: type[HarnessError] = HarnessError,
    what: str = "file",
) -> tuple[ModelT, dict[Loc, int]]:
    """The YAML file ``path`` as a ``model`` (:func:`read_text`, then :func:`load_model`).

    Every failure is one ``error`` that names the file, and the line where there is one:
    ``PATH: WHAT not found``, ``PATH:LINE: not valid YAML: problem``, ``PATH: cannot read (…)``,
    a bound passed, or the validation problems.
    """
    try:
        return load_model(read_text(path, error=error), str(path), model, error=error)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise error(f"{path}: cannot read ({err})") from None
