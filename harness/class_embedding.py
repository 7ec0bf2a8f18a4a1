"""Class embeddings by kind: what each of a spec's embeddings is, and which a package sees.

A spec's class embedding declares its ``kind`` (:data:`EMBEDDING_KINDS`; ``attributes`` when
not written, so the specs written before kinds existed keep their hash). A package declares in
``declarations.class_embedding`` what it uses (:data:`CLASS_EMBEDDING_USES`): ``default`` or
``none`` (its TrainTask holds no class embedding at all: a method that says it uses no side
information is given none, so the declaration is a fact, not a claim), or a kind, whose
embeddings alone its TrainTask then holds (:func:`embeddings_for`). ``default``: every embedding,
the spec's default as ``default_embedding``. A benchmark
without an embedding of that kind is refused before anything runs
(:class:`~harness.core.errors.NotApplicableError`): ``zsl run`` says why, ``zsl demo`` skips
the package, ``zsl ci pr`` reports it as not applicable.

See docs/submission.md (`harness.class_embedding`) and docs/guides/vision-language.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from harness.core.errors import NotApplicableError, SpecError

if TYPE_CHECKING:
    from harness.spec import Spec

__all__ = [
    "CLASS_EMBEDDING_USES",
    "DEFAULT_KIND",
    "EMBEDDING_KINDS",
    "NO_EMBEDDING",
    "ClassEmbeddingUse",
    "EmbeddingChoice",
    "EmbeddingKind",
    "check_applicable",
    "embeddings_for",
    "every_embedding",
    "not_applicable_reason",
]

#: What a class embedding is made of: per-class ``attributes`` (annotated or mined), word vectors
#: of the class names (``word-vectors``: word2vec, GloVe), a sentence encoder's embedding of a
#: name or description (``sentence``), or a vision-language model's text tower applied to
#: prompts (``clip-text``: usable only with image features of the same model).
EmbeddingKind = Literal["attributes", "word-vectors", "sentence", "clip-text"]
EMBEDDING_KINDS: tuple[str, ...] = get_args(EmbeddingKind)
#: The kind of an entry that does not say: what every spec written before kinds existed holds.
DEFAULT_KIND: EmbeddingKind = "attributes"
#: What ``declarations.class_embedding`` may say: the spec's default, none at all, or a kind.
ClassEmbeddingUse = Literal["default", "none", EmbeddingKind]
CLASS_EMBEDDING_USES: tuple[str, ...] = ("default", "none", *EMBEDDING_KINDS)


@dataclass(frozen=True)
class EmbeddingChoice:
    """The class embeddings a package's TrainTask holds: ``names`` (in spec order) and
    ``default`` (its ``default_embedding``, one of them; ``""`` when ``names`` is empty)."""

    names: tuple[str, ...]
    default: str


#: What a package declaring ``class_embedding: none`` is given.
NO_EMBEDDING = EmbeddingChoice((), "")


def every_embedding(spec: Spec) -> EmbeddingChoice:
    """Every class embedding of ``spec``, its default as the default: what a TrainTask holds
    unless its package declares a kind."""
    return EmbeddingChoice(tuple(e.name for e in spec.class_embeddings), spec.default_embedding)


def _lacks(declared: str, spec: Spec, where: str = "") -> str:
    listed = ", ".join(f"{e.name} (kind {e.kind})" for e in spec.class_embeddings)
    return (
        f"benchmark '{spec.benchmark}' v{spec.version}{where} has no class embedding of kind"
        f" '{declared}' (it has {listed})"
    )


def not_applicable_reason(declared: str, spec: Spec) -> str | None:
    """Why a package declaring ``class_embedding: <declared>`` cannot run on ``spec``, in a
    clause naming the kind and the benchmark; None when it can."""
    if declared in ("default", "none") or any(e.kind == declared for e in spec.class_embeddings):
        return None
    return _lacks(declared, spec)


def check_applicable(package: str, declared: str, spec: Spec) -> None:
    """Refuse (:class:`~harness.core.errors.NotApplicableError`, naming the package, the kind
    and the benchmark and its spec file) a package whose declared kind ``spec`` lacks."""
    if not_applicable_reason(declared, spec) is None:
        return
    try:
        where = f" (spec {spec.path})"
    except SpecError:  # a spec made in memory: no file to name
        where = ""
    raise NotApplicableError(
        f"package '{package}' declares class_embedding: {declared}, but"
        f" {_lacks(declared, spec, where)}; run it on a benchmark whose spec lists a class"
        f" embedding with kind: {declared} (docs/guides/vision-language.md)"
    )


def embeddings_for(declared: str, spec: Spec, *, package: str) -> EmbeddingChoice:
    """The class embeddings the TrainTask of a package declaring ``class_embedding:
    <declared>`` holds on ``spec``.

    ``default``: every embedding, the spec's default as the default. ``none``: no embedding.
    A kind: the embeddings of that kind only (several, e.g. one per prompt-template set), the
    spec's default if it is one of them, else the first listed; none of that kind is refused
    (:class:`~harness.core.errors.NotApplicableError`).
    """
    if declared == "default":
        return every_embedding(spec)
    if declared == "none":
        return NO_EMBEDDING
    check_applicable(package, declared, spec)
    of_kind = [e for e in spec.class_embeddings if e.kind == declared]
    default = next((e.name for e in of_kind if e.default), of_kind[0].name)
    return EmbeddingChoice(tuple(e.name for e in of_kind), default)
