"""Vision–language models through open_clip: the image tower as a feature backbone, the text tower
as a class-embedding model over prompt templates.

- ``zsl features extract --backbone open_clip:<arch>``: the features are the model's image
  embedding (``encode_image``, projected, not L2-normalised), the images preprocessed with the
  model's own size, mean, std and resize rule;
- ``zsl embeddings build --model clip-text``: each class's row is CLIP's zero-shot classifier
  weight: every prompt template filled with the class name, encoded by the text tower,
  L2-normalised, averaged, and the mean L2-normalised.

Weights come from a local file or the open_clip cache, never downloaded; their sha256, the
architecture and the templates are recorded. open_clip is imported only when a model is used.

See docs/features.md, "Vision–language models".
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.core.errors import HarnessError
from harness.core.hashing import file_sha256, json_sha256
from harness.core.textio import read_text_file
from harness.features.backbones import (
    WEIGHT_SUFFIXES,
    Backbone,
    WeightsRef,
    open_clip_arch,
)
from harness.features.embeddings import (
    INSTALL_HINT,
    ClassEntry,
    Embedded,
    EmbeddingError,
)
from harness.features.embeddings import _offline_hugging_face as offline_hugging_face
from harness.features.embeddings import _versions as package_versions
from harness.features.preprocess import Preprocessing

__all__ = [
    "IMAGE_OUTPUT",
    "PLACEHOLDER",
    "TEMPLATE_PRESETS",
    "ClipTextInputs",
    "TemplateSet",
    "clip_preprocessing",
    "embed_clip_text",
    "load_clip_model",
    "load_image_tower",
    "read_templates",
    "resolve_clip_weights",
    "resolve_templates",
    "template_preset",
]

OPEN_CLIP_PACKAGE = "open_clip_torch"
#: Where the class name goes in a prompt template.
PLACEHOLDER = "{}"
#: The one output of an open_clip image tower the harness reads (its ``layer``).
IMAGE_OUTPUT = "encode_image"
#: Named template sets: what ``--templates`` accepts besides a file.
TEMPLATE_PRESETS: dict[str, str] = {
    "imagenet-80": "the 80 ImageNet prompt templates of the CLIP paper (open_clip's"
    " OPENAI_IMAGENET_TEMPLATES)",
    "photo": "one template, 'a photo of a {}.'",
}
#: open_clip's default cache of weights fetched by URL (its download_pretrained_from_url).
OPEN_CLIP_URL_CACHE = Path("~/.cache/clip")
#: What the provenance says a clip-text row is.
PROMPT_RULE = (
    "each template filled with the class name, encoded by the text tower (encode_text),"
    " L2-normalised; the mean over templates, L2-normalised"
)
_ERROR_SHOWN = 400  # characters of a library's error kept in a message


# --- prompt templates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateSet:
    """Prompt templates, each holding one ``{}`` where the class name goes.

    Attributes
    ----------
    name : str
        The preset's name, or the templates file's name.
    source : {"preset", "file"}
        Where they came from.
    templates : tuple of str
        In order; no two alike.
    """

    name: str
    source: Literal["preset", "file"]
    templates: tuple[str, ...]

    @property
    def sha256(self) -> str:
        """The hash of the templates (in order): what a change of template set changes."""
        return json_sha256(list(self.templates))

    def fill(self, class_name: str) -> list[str]:
        """Every template with ``class_name`` in place of its ``{}`` (other braces are text).

        Examples
        --------
        >>> TemplateSet("t", "preset", ("a photo of a {}.", "a {} {{x}}")).fill("dog")
        ['a photo of a dog.', 'a dog {{x}}']
        """
        return [template.replace(PLACEHOLDER, class_name) for template in self.templates]

    def to_json(self) -> dict[str, Any]:
        """What the provenance records: name, source, count, sha256 and the templates."""
        return {
            "name": self.name,
            "source": self.source,
            "count": len(self.templates),
            "sha256": self.sha256,
            "templates": list(self.templates),
        }


def _openai_imagenet_templates() -> tuple[str, ...]:
    # open_clip's package data, not a copy: each template is a function of the class name.
    try:
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES
    except ImportError as err:
        raise _missing_open_clip(err) from None
    return tuple(template(PLACEHOLDER) for template in OPENAI_IMAGENET_TEMPLATES)


def template_preset(name: str) -> TemplateSet:
    """The named template set (:data:`TEMPLATE_PRESETS`)."""
    if name == "imagenet-80":
        return TemplateSet(name, "preset", _openai_imagenet_templates())
    if name == "photo":
        return TemplateSet(name, "preset", ("a photo of a {}.",))
    raise EmbeddingError(
        f"unknown template preset {name!r}; one of {', '.join(TEMPLATE_PRESETS)}, or a file"
    )


def read_templates(path: str | os.PathLike[str]) -> TemplateSet:
    """Read a templates file: UTF-8, one template per line; blank lines and lines starting with
    ``#`` are skipped. Each template must hold exactly one ``{}``, and none may repeat (it would
    weigh twice in the mean).

    Raises
    ------
    EmbeddingError
        Naming ``file:line`` for a template without exactly one ``{}`` or a repeated one; or for
        a missing, unreadable or empty file.
    """
    source = Path(path)
    text = read_text_file(
        source,
        EmbeddingError,
        missing=f"{source}: no such templates file",
        unreadable=lambda err: f"{source}: cannot read it as UTF-8 text ({err})",
        encoding="utf-8-sig",
    )
    templates: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        template = line.strip()
        if not template or template.startswith("#"):
            continue
        where = f"{source}:{number}"
        count = template.count(PLACEHOLDER)
        if count != 1:
            raise EmbeddingError(
                f"{where}: template {template!r} holds {count} '{{}}'; each template holds"
                " exactly one, where the class name goes (e.g. 'a photo of a {}.')"
            )
        if template in first_line:
            raise EmbeddingError(
                f"{where}: template {template!r} repeats line {first_line[template]} (it would"
                " count twice in the class's mean)"
            )
        first_line[template] = number
        templates.append(template)
    if not templates:
        raise EmbeddingError(f"{source}: holds no template (only blank lines and comments)")
    return TemplateSet(source.name, "file", tuple(templates))


def resolve_templates(value: str, base: Path | None = None) -> TemplateSet:
    """``--templates``: a preset name (:data:`TEMPLATE_PRESETS`), else a templates file
    (relative to ``base``)."""
    if value in TEMPLATE_PRESETS:
        return template_preset(value)
    path = Path(value) if base is None else base / value
    if not path.is_file():
        raise EmbeddingError(
            f"templates {value!r}: not a preset ({', '.join(TEMPLATE_PRESETS)}) and no such"
            f" file ({path})"
        )
    return read_templates(path)


# --- open_clip, offline -------------------------------------------------------------------------


def _missing_open_clip(err: ImportError) -> HarnessError:
    return HarnessError(
        f"open_clip models need the Python package {OPEN_CLIP_PACKAGE} ({err.name or 'it'} is not"
        f" installed): {INSTALL_HINT}"
    )


def _open_clip() -> Any:
    try:
        import open_clip
    except ImportError as err:
        raise _missing_open_clip(err) from None
    return open_clip


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= _ERROR_SHOWN else text[:_ERROR_SHOWN] + " ..."


@contextlib.contextmanager
def _quiet_open_clip() -> Iterator[None]:
    """open_clip logs to the root logger ("Model initialized randomly" before the weights are
    loaded) and torch warns about its layers: silence both for this block only."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _model_config(open_clip: Any, arch: str) -> dict[str, Any]:
    """open_clip's configuration of ``arch`` (a built-in or registered name; never a hub)."""
    if ":" in arch:  # 'hf-hub:org/repo' and 'local-dir:path' fetch or read configurations
        raise HarnessError(
            f"open_clip architecture {arch!r}: give a configuration name (like ViT-B-32, see"
            " open_clip.list_models()); 'hf-hub:' and 'local-dir:' names are not supported"
        )
    config = open_clip.get_model_config(arch)
    if config is None:
        import difflib

        close = difflib.get_close_matches(arch, open_clip.list_models(), n=5)
        raise HarnessError(
            f"unknown open_clip architecture {arch!r}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
            + "; open_clip.list_models() lists them"
        )
    return dict(config)


def _is_weights_file(value: str) -> bool:
    return value.endswith(WEIGHT_SUFFIXES) or "/" in value or os.sep in value


def _tag_candidates(
    open_clip: Any, config: Mapping[str, Any], cache_dir: Path | None
) -> list[Path]:
    """Where open_clip keeps the weights of a pretrained tag's ``config``, in the order it
    prefers them (a Hugging Face file, its .safetensors twin first; then a URL's file)."""
    from open_clip.constants import HF_SAFE_WEIGHTS_NAME, HF_WEIGHTS_NAME

    found: list[Path] = []
    hub = str(config.get("hf_hub") or "")
    if hub:
        from huggingface_hub import try_to_load_from_cache

        # as open_clip's download_pretrained: 'org/repo/' names the default file, else the last
        # part is the file
        repo, filename = os.path.split(hub)
        filename = filename or HF_WEIGHTS_NAME
        names = [filename]
        if filename == HF_WEIGHTS_NAME:
            names.insert(0, HF_SAFE_WEIGHTS_NAME)
        elif filename.endswith((".bin", ".pth")):
            names.insert(0, filename[:-4] + ".safetensors")
        for name in names:
            cached = try_to_load_from_cache(repo, name, cache_dir=cache_dir)
            if isinstance(cached, str):
                found.append(Path(cached))
    url = str(config.get("url") or "")
    if url:
        folder = cache_dir if cache_dir is not None else OPEN_CLIP_URL_CACHE.expanduser()
        candidate = folder / os.path.basename(url)
        if candidate.is_file():
            found.append(candidate)
    return found


def _where_a_tag_lives(config: Mapping[str, Any], cache_dir: Path | None) -> str:
    places = []
    if config.get("hf_hub"):
        places.append(
            f"the Hugging Face cache{f' {cache_dir}' if cache_dir else ''} (repository"
            f" {str(config['hf_hub']).rstrip('/')})"
        )
    if config.get("url"):
        folder = cache_dir if cache_dir is not None else OPEN_CLIP_URL_CACHE
        places.append(f"{folder}/{os.path.basename(str(config['url']))}")
    return " or ".join(places) or "no known place"


def resolve_clip_weights(
    arch: str,
    weights: str,
    *,
    expected_sha256: str | None = None,
    base: Path | None = None,
    cache_dir: Path | None = None,
) -> WeightsRef:
    """Find the weights of open_clip ``arch`` and hash them; nothing is downloaded.

    ``weights`` is a file (a ``.safetensors``, ``.bin``, ``.pth`` or ``.pt`` state dict,
    relative to ``base``) or a pretrained tag of ``arch`` (``laion2b_s34b_b79k``), looked up
    where open_clip caches it (the Hugging Face cache, or ``~/.cache/clip`` for weights
    fetched by URL; ``cache_dir`` replaces both, as open_clip's own ``cache_dir`` does).

    Raises
    ------
    HarnessError
        For a missing file, an unknown tag or a tag not in the cache (saying how to get it), or
        a sha256 other than ``expected_sha256``.
    """
    if _is_weights_file(weights):
        path = Path(weights) if base is None else base / weights
        if not path.is_file():
            raise HarnessError(
                f"weights file {path} does not exist. Give open_clip {arch}'s weights as a file"
                " (a state dict: .safetensors, .bin, .pth or .pt; e.g. open_clip_model.safetensors"
                " from the model's Hugging Face repository) or a pretrained tag already in your"
                " open_clip cache (open_clip.list_pretrained_tags_by_model"
                f"({arch!r})); the harness never downloads weights"
            )
        ref = WeightsRef("file", path.name, path, file_sha256(path))
    else:
        open_clip = _open_clip()
        _model_config(open_clip, arch)
        config = open_clip.get_pretrained_cfg(arch, weights)
        if not config:
            tags = open_clip.list_pretrained_tags_by_model(arch)
            raise HarnessError(
                f"weights {weights!r}: neither a weights file ({', '.join(WEIGHT_SUFFIXES)}) nor"
                f" a pretrained tag of open_clip {arch}"
                + (f" (its tags: {', '.join(tags)})" if tags else " (it has no pretrained tags)")
            )
        found = _tag_candidates(open_clip, config, cache_dir)
        if not found:
            raise HarnessError(
                f"open_clip weights {arch} {weights!r} are not in the cache (looked in"
                f" {_where_a_tag_lives(config, cache_dir)}); the harness never downloads them."
                ' Fetch them once where the network is allowed, with python -c "import'
                f' open_clip; open_clip.create_model({arch!r}, pretrained={weights!r})" (it'
                " saves them in that cache), or give the weights file with --weights"
            )
        ref = WeightsRef("open_clip", weights, found[0], file_sha256(found[0]))
    if expected_sha256 is not None and ref.sha256 != expected_sha256:
        raise HarnessError(
            f"weights {ref.path}: sha256 is {ref.sha256}, but {expected_sha256} was declared;"
            " refusing weights that are not the declared ones"
        )
    return ref


def _tag_config(open_clip: Any, arch: str, weights: WeightsRef) -> dict[str, Any]:
    """A pretrained tag's settings (preprocessing, quick_gelu); ``{}`` for a weights file."""
    if weights.source != "open_clip":
        return {}
    return dict(open_clip.get_pretrained_cfg(arch, weights.name))


def open_clip_preprocess_config(arch: str, weights: WeightsRef) -> dict[str, Any]:
    """The preprocessing open_clip uses for ``arch`` with ``weights``, as its ``create_model``
    sets it (its defaults, then a pretrained tag's settings, then the image tower's size),
    computed from the configurations without building the model."""
    open_clip = _open_clip()
    from open_clip.transform import PreprocessCfg, merge_preprocess_dict

    config = _model_config(open_clip, arch)
    merged = merge_preprocess_dict(PreprocessCfg(), _tag_config(open_clip, arch, weights))
    merged["size"] = config.get("vision_cfg", {}).get("image_size", merged["size"])
    return dict(merged)


def clip_preprocessing(arch: str, weights: WeightsRef) -> Preprocessing:
    """open_clip's evaluation transform of ``arch`` (:func:`open_clip_preprocess_config`) as a
    declared :class:`Preprocessing`: resize the shorter side to the input size and centre-crop
    (``resize_mode`` shortest), or resize the whole image to it (squash).

    Raises
    ------
    HarnessError
        For a transform the declared steps cannot say (padding to a square, a non-square crop,
        an interpolation other than bilinear, bicubic or nearest): give ``--preprocessing``.
    """
    config = open_clip_preprocess_config(arch, weights)
    size = config["size"]
    height, width = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
    mode, interpolation = str(config["resize_mode"]), str(config["interpolation"])

    def unsupported(what: str) -> HarnessError:
        return HarnessError(
            f"open_clip {arch} preprocesses with {what}, which the declared preprocessing has no"
            " step for; give the steps with --preprocessing (a YAML file) instead"
        )

    if interpolation not in ("bilinear", "bicubic", "nearest"):
        raise unsupported(f"interpolation {interpolation!r}")
    if len(config["mean"]) != 3 or len(config["std"]) != 3:
        raise unsupported(f"{len(config['mean'])}-channel mean/std")
    common: dict[str, Any] = {
        "interpolation": interpolation,
        "mean": tuple(float(v) for v in config["mean"]),
        "std": tuple(float(v) for v in config["std"]),
    }
    if mode == "shortest":
        if height != width:
            raise unsupported(f"a {height}x{width} centre crop")
        return Preprocessing(resize=height, crop=height, **common)
    if mode == "squash":
        return Preprocessing(resize=(height, width), crop=None, **common)
    raise unsupported(f"resize_mode {mode!r}")


def load_clip_model(arch: str, weights: WeightsRef) -> Any:
    """Build open_clip ``arch`` (random initialisation, nothing fetched) and load ``weights``
    strictly, through open_clip's own checkpoint loader; in eval mode, on the CPU, fp32.

    Raises
    ------
    HarnessError
        For an unknown architecture, one that needs files from the network (a Hugging Face text
        tower whose configuration is not in the cache), or weights that do not fit it.
    """
    open_clip = _open_clip()
    _model_config(open_clip, arch)
    tag = _tag_config(open_clip, arch, weights)
    with _quiet_open_clip(), offline_hugging_face():
        try:
            model = open_clip.create_model(
                arch,
                pretrained=None,
                precision="fp32",
                device="cpu",
                force_quick_gelu=bool(tag.get("quick_gelu", False)),
                pretrained_image=False,
                pretrained_text=False,
            )
        except (OSError, RuntimeError, ValueError, KeyError) as err:
            raise HarnessError(
                f"open_clip cannot build {arch} offline ({type(err).__name__}: {_short(err)});"
                " an architecture whose text tower is a Hugging Face model needs that model's"
                " configuration in the Hugging Face cache"
            ) from None
        try:
            open_clip.load_checkpoint(model, str(weights.path), strict=True, weights_only=True)
        except Exception as err:  # unpicklable objects, missing or unexpected keys, shapes
            raise HarnessError(
                f"weights {weights.path} do not fit open_clip {arch}"
                f" ({type(err).__name__}: {_short(err)}); is it this architecture's state dict"
                " (OpenAI's weights need the -quickgelu architecture)?"
            ) from None
    return model.eval()


def load_image_tower(
    backbone: str, weights: WeightsRef, layer: str | None, input_size: tuple[int, int]
) -> Backbone:
    """The image tower of ``open_clip:<arch>`` with ``weights``: ``module(images)`` is
    ``encode_image`` (the projected embedding, not L2-normalised), checked on one blank image
    of ``input_size``."""
    import torch

    arch = open_clip_arch(backbone)
    if arch is None:
        raise HarnessError(f"{backbone!r} is not an open_clip backbone (open_clip:<arch>)")
    if layer not in (None, IMAGE_OUTPUT):
        raise HarnessError(
            f"{backbone} gives its image embedding ({IMAGE_OUTPUT}); --layer {layer!r} is for"
            " torchvision backbones"
        )
    model = load_clip_model(arch, weights)

    class _ImageTower(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.model.encode_image(images, normalize=False)

    tower = _ImageTower().eval()
    try:
        with torch.no_grad(), _quiet_open_clip():
            probe = tower(torch.zeros(1, 3, *input_size))
    except (RuntimeError, ValueError, AssertionError) as err:
        raise HarnessError(
            f"{backbone} does not take {input_size[0]}x{input_size[1]} images ({_short(err)});"
            " leave --preprocessing out to use the model's own"
        ) from None
    return Backbone(
        name=backbone,
        layer=IMAGE_OUTPUT,
        pooled=False,
        dim=int(probe.shape[1]),
        weights=weights,
        num_params=sum(p.numel() for p in model.visual.parameters()),
        module=tower,
        details={
            "library": "open_clip",
            "arch": arch,
            "output": "the projected image embedding (encode_image), not L2-normalised",
        },
        libraries=(OPEN_CLIP_PACKAGE, "timm"),
    )


# --- the text tower: class-name prompts ---------------------------------------------------------


@dataclass(frozen=True)
class ClipTextInputs:
    """What model ``clip-text`` embeds with: open_clip ``arch``, its ``weights`` (a file or a
    cached pretrained tag, see :func:`resolve_clip_weights`) and the prompt ``templates``."""

    arch: str
    weights: str
    templates: TemplateSet


def embed_clip_text(entries: Sequence[ClassEntry], inputs: Any) -> Embedded:
    """Model ``clip-text``: per class, every template filled with its name, encoded by the text
    tower, each L2-normalised, averaged, the mean L2-normalised (CLIP's zero-shot classifier),
    on the CPU, one forward pass per class."""
    import torch

    if not isinstance(inputs, ClipTextInputs):
        raise TypeError(f"clip-text embeds with ClipTextInputs, not {type(inputs).__name__}")
    try:
        weights = resolve_clip_weights(inputs.arch, inputs.weights)
        model = load_clip_model(inputs.arch, weights)
        open_clip = _open_clip()
        with _quiet_open_clip(), offline_hugging_face():
            tokenizer = open_clip.get_tokenizer(inputs.arch)
    except EmbeddingError:
        raise
    except HarnessError as err:
        raise EmbeddingError(str(err)) from None
    except (OSError, RuntimeError, ValueError) as err:
        raise EmbeddingError(
            f"open_clip cannot make {inputs.arch}'s tokenizer offline ({_short(err)})"
        ) from None
    rows = []
    with torch.inference_mode():
        for entry in entries:
            tokens = tokenizer(inputs.templates.fill(entry.name))
            encoded = model.encode_text(tokens).double().numpy()
            unit = encoded / np.linalg.norm(encoded, axis=1, keepdims=True)
            mean = unit.mean(axis=0)
            rows.append(mean / np.linalg.norm(mean))
    logit_bias = getattr(model, "logit_bias", None)
    return Embedded(
        vectors=np.stack(rows),
        texts=[entry.name for entry in entries],
        model_files={weights.path.name: weights.sha256},
        versions=package_versions("numpy", "torch", OPEN_CLIP_PACKAGE, "timm", "ftfy"),
        provenance={
            "clip": {
                "library": "open_clip",
                "arch": inputs.arch,
                "weights": weights.to_json(),
                "tokenizer": type(tokenizer).__name__,
                "context_length": int(getattr(tokenizer, "context_length", 0) or 0),
                "logit_scale": float(model.logit_scale.exp().item()),
                "logit_bias": None if logit_bias is None else float(logit_bias.item()),
                "rule": PROMPT_RULE,
                "device": "cpu",
            },
            "templates": inputs.templates.to_json(),
        },
    )
