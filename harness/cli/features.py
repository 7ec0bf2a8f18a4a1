"""``zsl features``: extract image features with a torchvision backbone or an open_clip image
tower into a frozen, hashed feature set (resumable), and check one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from harness.cli._common import reports_errors, stdout
from harness.core.errors import HarnessError
from harness.core.lazy import lazy_module

if TYPE_CHECKING:
    import pydantic

    from harness import spec
    from harness.core import yamlio
    from harness.features import extract as extraction
    from harness.features import sets
    from harness.hierarchy import wordnet
else:
    # The implementation, imported when a command runs: its --help must not import it (torch,
    # pydantic, NumPy).
    pydantic = lazy_module("pydantic")
    yamlio = lazy_module("harness.core.yamlio")
    spec = lazy_module("harness.spec")
    extraction = lazy_module("harness.features.extract")
    sets = lazy_module("harness.features.sets")
    wordnet = lazy_module("harness.hierarchy.wordnet")

app = typer.Typer(
    no_args_is_help=True,
    epilog=(
        "Examples: zsl features extract --images photos/ --weights IMAGENET1K_V2 --out feats/\n\n"
        "zsl features extract --images photos/ --backbone open_clip:ViT-B-32 --weights"
        " open_clip_model.safetensors --pretrained-on-web LAION-2B --out clip-feats/"
    ),
)


def _pretrained_on(
    class_set: str | None, wnids: Path | None, web: str | None
) -> dict[str, Any] | None:
    given = {
        "--pretrained-on": class_set,
        "--pretrained-on-wnids": wnids,
        "--pretrained-on-web": web,
    }
    named = [option for option, value in given.items() if value is not None]
    if len(named) > 1:
        raise HarnessError(
            f"{' and '.join(named)}: give one of them, not {'both' if len(named) == 2 else 'all'}"
        )
    if wnids is not None:
        return {"wnids": wordnet.read_wnid_list(wnids)}
    if web is not None:
        return {"web": web}
    return None if class_set is None else {"class_set": class_set}


def _preprocessing(value: str | None) -> Any:
    """A preset name, or a YAML/JSON file of the steps."""
    if value is None or not value.endswith((".yaml", ".yml", ".json")):
        return value

    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise HarnessError(f"{path}: cannot read the preprocessing ({err})") from None
    return yamlio.load(text, str(path))  # JSON is YAML; safe loading, duplicate keys refused


@app.command()
@reports_errors
def extract(
    images: Annotated[
        Path,
        typer.Option(
            "--images",
            help="Folder of class folders (DIR/<class_id>/<image>), or an image list"
            " ('path<TAB>class_id[<TAB>x1,y1,x2,y2]' per line, paths relative to it).",
        ),
    ],
    weights: Annotated[
        str,
        typer.Option(
            "--weights",
            help="Weights file (.safetensors, .pth, .pt, .bin) or torchvision weights name"
            " (IMAGENET1K_V2, DEFAULT); for open_clip:<arch>, a file or a pretrained tag in the"
            " open_clip cache (never downloaded). Its sha256 is recorded.",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Folder to write the feature set to.", file_okay=False)
    ],
    backbone: Annotated[
        str,
        typer.Option(
            "--backbone",
            help="torchvision classification model name, or open_clip:<arch> (the image tower"
            " of an open_clip model, e.g. open_clip:ViT-B-32).",
        ),
    ] = "resnet101",
    layer: Annotated[
        str | None,
        typer.Option("--layer", help="Node to read (default: the input of the classifier head)."),
    ] = None,
    weights_sha256: Annotated[
        str | None,
        typer.Option(
            "--weights-sha256", help="Refuse weights whose sha256 is not this ('sha256:<hex>')."
        ),
    ] = None,
    pretrained_on: Annotated[
        str | None,
        typer.Option(
            "--pretrained-on",
            help="Class set a weights file was trained on (ilsvrc2012, none, ...); torchvision"
            " weights names need none.",
        ),
    ] = None,
    pretrained_on_wnids: Annotated[
        Path | None,
        typer.Option(
            "--pretrained-on-wnids", help="File of the WordNet ids a weights file was trained on."
        ),
    ] = None,
    pretrained_on_web: Annotated[
        str | None,
        typer.Option(
            "--pretrained-on-web",
            help="Web corpus the weights were trained on (LAION-2B, ...): vision-language"
            " pre-training, which the leakage audit cannot relate to a class list.",
        ),
    ] = None,
    preprocessing: Annotated[
        str | None,
        typer.Option(
            "--preprocessing",
            help="Preset (imagenet-eval, whole-image-224, box-224) or a YAML/JSON file of the"
            " steps; default: the weights' own transform (an open_clip model's own), else"
            " imagenet-eval.",
        ),
    ] = None,
    precision: Annotated[
        str, typer.Option("--precision", help="fp32, or fp16/bf16 autocast (declared).")
    ] = "fp32",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, max=4096)] = 64,
    chunk: Annotated[
        int,
        typer.Option("--chunk", min=1, help="Images per saved chunk (the unit of resuming)."),
    ] = 2048,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=0, help="Image decoding processes (default: up to 4)."),
    ] = None,
    device: Annotated[
        str, typer.Option("--device", help="auto (a GPU when present), cpu, cuda, cuda:N.")
    ] = "auto",
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad", help="Leave out (and record) unreadable images instead of stopping."
        ),
    ] = False,
    download: Annotated[
        bool,
        typer.Option("--download", help="Fetch torchvision weights missing from torch's cache."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Extract features of every image into a frozen, hashed feature set (resumes after a kill).

    Unreadable images are listed with their reason and nothing is sealed, unless --skip-bad.
    """
    try:
        extract_spec = spec.ExtractSpec.model_validate(
            {
                "images": str(images),
                "backbone": backbone,
                "layer": layer,
                "weights": weights,
                "weights_sha256": weights_sha256,
                "pretrained_on": _pretrained_on(
                    pretrained_on, pretrained_on_wnids, pretrained_on_web
                ),
                "preprocessing": _preprocessing(preprocessing),
                "precision": precision,
                "batch_size": batch_size,
                "skip_bad": skip_bad,
            }
        )
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "options"
        raise HarnessError(f"{where}: {first['msg'].removeprefix('Value error, ')}") from None
    request = extraction.plan_extraction(
        extract_spec, Path.cwd(), chunk_images=chunk, download=download
    )
    result = extraction.extract_features(
        request,
        out,
        skip_bad=skip_bad,
        workers=min(4, os.cpu_count() or 1) if workers is None else workers,
        device=device,
        quiet=quiet,
    )
    feature_set = result.feature_set
    provenance = feature_set.provenance
    n, dim = feature_set.entries["features"].shape
    if result.images_extracted:
        stdout.print(
            f"extracted {result.images_extracted} image(s) in {result.seconds:.1f} s"
            f" ({result.images_per_second:,.1f} images/s)",
            soft_wrap=True,
        )
    elif result.already_there:
        stdout.print(f"{out} already holds this extraction (verified)", soft_wrap=True)
    else:
        stdout.print(f"{out}: sealed from saved chunks, nothing extracted again", soft_wrap=True)
    for skipped in provenance["skipped"]:
        stdout.print(f"skipped {skipped['path']}: {skipped['reason']}", soft_wrap=True)
    stdout.print(
        f"{out}: {n} images x {dim} ({provenance['backbone']['name']}"
        f" {provenance['backbone']['layer']}, weights {provenance['weights']['sha256']})",
        soft_wrap=True,
    )
    stdout.print(f"feature set {feature_set.hash}", soft_wrap=True)


@app.command()
@reports_errors
def show(
    feature_set: Annotated[Path, typer.Argument(help="A feature set folder.", file_okay=False)],
) -> None:
    """Verify a feature set (every array against its hash) and print its provenance."""
    found = sets.ArtifactSet(feature_set)
    found.verify()
    typer.echo(json.dumps({"hash": found.hash, "kind": found.kind, **found.provenance}, indent=1))
