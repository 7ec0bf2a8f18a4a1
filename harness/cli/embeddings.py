"""``zsl embeddings``: freeze class embeddings made by offline text models into hashed sets."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli._common import reports_errors, stderr, stdout
from harness.cli.hierarchy import Lexnames, WordNetDir
from harness.core.lazy import lazy_module

# The catalogue (names, summaries, --normalize's choices) imports no NumPy: --help reads it.
from harness.features.text_models import Normalize, text_models

if TYPE_CHECKING:
    from harness.features import embeddings
else:
    # The implementation, imported when a command runs: its --help must not import it.
    embeddings = lazy_module("harness.features.embeddings")

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True)


@app.callback()
def _group() -> None:
    # Keeps `build` a named subcommand even while it is the only one.
    pass


def _models_text() -> str:
    return "\n".join(f"  {name}: {model.summary}" for name, model in text_models.items())


# One paragraph a line: the help wraps each to the terminal's width.
BUILD_EPILOG = "\n\n".join(
    [
        "Text models:",
        _models_text(),
        "Word models average the vectors of the words of each class name (unknown words are"
        " left out of the mean and listed; a class with no known word is an error). Sentence"
        " models embed 'name: gloss'. clip-text fills each prompt template with the class name,"
        " encodes it with an open_clip text tower, L2-normalises, averages per class and"
        " L2-normalises the mean (CLIP's zero-shot classifier). Nothing is downloaded: every"
        " model runs offline.",
        "A class list line is 'class_id<TAB>name', 'class_id<TAB>name<TAB>gloss', or a WordNet"
        " 3.0 noun id alone, which takes its first lemma and definition from WordNet"
        " (ZSL_WORDNET_DIR).",
        "Examples:",
        "  zsl embeddings build --classes specs/demo/classes.txt --model all-minilm-l6-v2"
        " --out emb/minilm",
        "  zsl embeddings build --classes classes.tsv --model glove --vectors glove.txt"
        " --out emb/glove",
        "  zsl embeddings build --classes classes.tsv --model clip-text --arch ViT-B-32"
        " --weights open_clip_model.safetensors --templates imagenet-80 --out emb/clip",
    ]
)


@app.command(epilog=BUILD_EPILOG)
@reports_errors
def build(
    classes: Annotated[
        Path,
        typer.Option(
            "--classes",
            help="class list: one class per line ('class_id<TAB>name[<TAB>gloss]' or a WordNet"
            " id alone); '#' starts a comment line",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    model: Annotated[
        str,
        typer.Option("--model", help=f"text model: {', '.join(text_models)}"),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="folder to write the set to; must not exist", file_okay=False),
    ],
    vectors: Annotated[
        Path | None,
        typer.Option(
            "--vectors",
            help="GloVe text file ('word v1 ... vd' per line), for --model glove",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ] = None,
    model_dir: Annotated[
        Path | None,
        typer.Option(
            "--model-dir",
            help="local sentence-transformers model folder, for --model sentence-transformer",
            exists=True,
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            help="open_clip architecture (ViT-B-32, ...), for --model clip-text",
            show_default=False,
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="its weights: a state-dict file, or a pretrained tag in the open_clip cache;"
            " for --model clip-text",
            show_default=False,
        ),
    ] = None,
    templates: Annotated[
        str | None,
        typer.Option(
            "--templates",
            help="prompt templates: imagenet-80, photo, or a file of templates (one per line,"
            " each with one {} for the class name); for --model clip-text",
            show_default=False,
        ),
    ] = None,
    normalize: Annotated[
        Normalize,
        typer.Option("--normalize", help="divide each row by its L2 norm (l2) or not (none)"),
    ] = "l2",
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress lines on stderr")] = False,
    wordnet_dir: WordNetDir = None,
    lexnames: Lexnames = None,
) -> None:
    """Embed the classes of a class list with a text model and freeze them as a hashed set."""

    def progress(line: str) -> None:
        if not quiet:
            stderr.print(line, soft_wrap=True)

    built = embeddings.build_class_embeddings(
        classes,
        model,
        out,
        vectors=vectors,
        model_dir=model_dir,
        normalize=normalize,
        wordnet_dir=wordnet_dir,
        lexnames=lexnames,
        progress=progress,
        arch=arch,
        weights=weights,
        templates=templates,
    )
    provenance = built.provenance
    stdout.print(
        f"wrote {out}: {provenance['n_classes']} classes x {provenance['dim']}"
        f" ({provenance['model']}, {provenance['text']}, normalize {provenance['normalize']})",
        soft_wrap=True,
    )
    if "templates" in provenance:
        used = provenance["templates"]
        stdout.print(
            f"templates: {used['name']} ({used['count']}, {used['sha256']}); text tower"
            f" {provenance['clip']['arch']}, weights {provenance['clip']['weights']['sha256']}",
            soft_wrap=True,
        )
    stdout.print(f"hash: {built.hash}", soft_wrap=True)
    summary = embeddings.unknown_words_summary(provenance["unknown_words"])
    if summary:
        stdout.print(summary, soft_wrap=True)


if __name__ == "__main__":
    app()
