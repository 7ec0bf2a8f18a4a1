"""Backbones: a torchvision classification model, its weights (hashed) and the layer to read.

Weights come from one of two places, and either way their sha256 is recorded.

See docs/features.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.core.errors import HarnessError, network_error_text
from harness.core.hashing import file_sha256

__all__ = [
    "OPEN_CLIP_PREFIX",
    "Backbone",
    "WeightsRef",
    "is_weights_name",
    "load_backbone",
    "named_weights_pretrained_on",
    "open_clip_arch",
    "resolve_weights",
]

WEIGHT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin")
#: ``--backbone open_clip:<arch>``: the image tower of an open_clip model (harness.features.clip).
OPEN_CLIP_PREFIX = "open_clip:"
_WEIGHTS_NAME = re.compile(r"^(?:[A-Za-z0-9_]+_Weights\.)?[A-Z0-9_]+$")
_HASH_PREFIX = re.compile(r"-([0-9a-f]{8,64})\.[a-z]+$")


def open_clip_arch(backbone: str) -> str | None:
    """The open_clip architecture a backbone name ``open_clip:<arch>`` names (``None``: a
    torchvision model)."""
    return (
        backbone.removeprefix(OPEN_CLIP_PREFIX) if backbone.startswith(OPEN_CLIP_PREFIX) else None
    )


def is_weights_name(value: str) -> bool:
    """Whether ``value`` names torchvision weights (else it is a file path)."""
    return not value.endswith(WEIGHT_SUFFIXES) and bool(_WEIGHTS_NAME.match(value))


def named_weights_pretrained_on(name: str) -> str:
    """The class set torchvision weights ``name`` were trained on: torchvision's classification
    weights are all ILSVRC-2012 (``IMAGENET1K_*``; ``DEFAULT`` is one of them)."""
    tag = name.rsplit(".", 1)[-1]
    if tag == "DEFAULT" or tag.startswith("IMAGENET1K_"):
        return "ilsvrc2012"
    raise ValueError(
        f"weights {name!r}: not a torchvision ImageNet-1K weights name (IMAGENET1K_*, DEFAULT);"
        f" a weights file needs one of the suffixes {', '.join(WEIGHT_SUFFIXES)}"
    )


@dataclass(frozen=True)
class WeightsRef:
    """Weights resolved to a file on disk, with its sha256."""

    source: Literal["file", "torchvision", "open_clip"]
    name: str  # the file name, the torchvision weights name in full, or the open_clip tag
    path: Path
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "name": self.name, "sha256": self.sha256}


def _torchvision_weights(backbone: str, name: str) -> Any:
    from torchvision.models import get_model_weights

    try:
        enum = get_model_weights(backbone)
    except (ValueError, KeyError):
        raise HarnessError(f"backbone {backbone!r} has no torchvision weights") from None
    tag = name.rsplit(".", 1)[-1]
    prefix = name.rsplit(".", 1)[0] if "." in name else enum.__name__
    if prefix != enum.__name__:
        raise HarnessError(f"weights {name!r} are not {backbone}'s ({enum.__name__})")
    try:
        return enum[tag]
    except KeyError:
        raise HarnessError(
            f"{backbone} has no weights {tag!r}; one of {', '.join(e.name for e in enum)}, DEFAULT"
        ) from None


def resolve_weights(
    backbone: str,
    weights: str,
    *,
    expected_sha256: str | None = None,
    download: bool = False,
    base: Path | None = None,
) -> WeightsRef:
    """Find ``weights`` (a file, relative to ``base``, or a torchvision name) and hash it;
    refuse it when its sha256 differs from ``expected_sha256`` or its torchvision hash prefix."""
    if is_weights_name(weights):
        import torch

        entry = _torchvision_weights(backbone, weights)
        filename = entry.url.rsplit("/", 1)[-1]
        path = Path(torch.hub.get_dir()) / "checkpoints" / filename
        if not path.is_file():
            if not download:
                raise HarnessError(
                    f"weights {entry} are not in torch's cache ({path}). Fetch them with"
                    f" --download, or put {entry.url} at that path (TORCH_HOME moves the cache)"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            match = _HASH_PREFIX.search(filename)
            try:
                torch.hub.download_url_to_file(
                    entry.url, str(path), hash_prefix=match[1] if match else None, progress=True
                )
            except (OSError, RuntimeError) as err:  # no network; a download that fails its hash
                raise HarnessError(
                    f"cannot download weights {entry} from {entry.url}:"
                    f" {network_error_text(err)}. Nothing was saved. Check the network and run"
                    f" again, or fetch that file elsewhere and put it at {path} (TORCH_HOME moves"
                    " torch's cache), or give a weights file with --weights"
                ) from None
        ref = WeightsRef("torchvision", str(entry), path, file_sha256(path))
        match = _HASH_PREFIX.search(filename)
        if match and not ref.sha256.removeprefix("sha256:").startswith(match[1]):
            raise HarnessError(
                f"{path}: sha256 {ref.sha256} does not start with {match[1]}, the hash torchvision"
                f" publishes for {entry} in its file name; the file is damaged or not"
                " those weights. Delete it and fetch it again"
            )
    else:
        path = Path(weights) if base is None else base / weights
        if not path.is_file():
            raise HarnessError(
                f"weights file {path} does not exist (give a file, or a torchvision weights name"
                " such as IMAGENET1K_V2)"
            )
        ref = WeightsRef("file", path.name, path, file_sha256(path))
    if expected_sha256 is not None and ref.sha256 != expected_sha256:
        raise HarnessError(
            f"weights {ref.path}: sha256 is {ref.sha256}, but {expected_sha256} was declared;"
            " refusing weights that are not the declared ones"
        )
    return ref


def _state_dict(path: Path) -> dict[str, Any]:
    import torch

    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state: Any = load_file(str(path), device="cpu")
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise HarnessError(
            f"weights file {path}: not a readable state dict ({type(err).__name__}: {err});"
            " give a .safetensors file or a tensors-only torch.save of model.state_dict()"
        ) from None
    for key in ("state_dict", "model"):  # common checkpoint wrappers
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise HarnessError(f"weights file {path}: not a state dict (name -> tensor)")
    return state


def _default_layer(model: Any, nodes: list[str]) -> str:
    head = list(model.named_children())[-1][0]
    for i, node in enumerate(nodes):
        if i and (node == head or node.startswith(head + ".")):
            return nodes[i - 1]
    raise HarnessError(f"cannot find the input of the classifier head {head!r}; give --layer")


@dataclass
class Backbone:
    """A loaded backbone in eval mode: ``module(images) -> [n, dim]`` features of ``layer``."""

    name: str
    layer: str
    pooled: bool
    dim: int  # features per image
    weights: WeightsRef
    num_params: int
    module: Any
    #: more of what the provenance records (an open_clip model's architecture, its output)
    details: dict[str, Any] = field(default_factory=dict)
    #: distributions beyond torch's whose versions the provenance records
    libraries: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "layer": self.layer,
            "spatial_average_pool": self.pooled,
            "num_params": self.num_params,
            **self.details,
        }


def load_backbone(
    name: str, weights: WeightsRef, layer: str | None, input_size: tuple[int, int]
) -> Backbone:
    """Build torchvision's ``name``, load ``weights`` strictly and cut it at ``layer`` (probed
    with one blank image of ``input_size``, the preprocessing's output)."""
    import torch
    import torchvision
    from torchvision.models import get_model, list_models
    from torchvision.models.feature_extraction import (
        create_feature_extractor,
        get_graph_node_names,
    )

    available = list_models(module=torchvision.models)
    if name not in available:
        close = [m for m in available if name.lower() in m][:8]
        raise HarnessError(
            f"unknown backbone {name!r}: not a torchvision classification model"
            + (f" (did you mean {', '.join(close)}?)" if close else " (see torchvision.models)")
        )
    model = get_model(name, weights=None)
    state = _state_dict(weights.path)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise HarnessError(
            f"weights {weights.path} do not fit {name}: {len(result.missing_keys)} missing"
            f" (first {result.missing_keys[:3]}), {len(result.unexpected_keys)} unexpected"
            f" (first {result.unexpected_keys[:3]})"
        )
    model.eval()
    nodes = get_graph_node_names(model)[1]
    chosen = layer or _default_layer(model, nodes)
    if chosen not in nodes:
        raise HarnessError(
            f"{name} has no layer {chosen!r}; its last layers are {', '.join(nodes[-6:])}"
        )
    extractor = create_feature_extractor(model, return_nodes={chosen: "out"}).eval()
    try:
        with torch.no_grad():
            probe = extractor(torch.zeros(1, 3, *input_size))["out"]
    except (RuntimeError, ValueError, AssertionError) as err:
        raise HarnessError(
            f"{name} does not take {input_size[0]}x{input_size[1]} images at layer {chosen!r}"
            f" ({err}); change the preprocessing's resize/crop"
        ) from None
    pooled = probe.ndim > 2

    class _Features(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.extractor = extractor

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            out = self.extractor(images)["out"]
            if out.ndim > 2:
                out = out.flatten(2).mean(dim=2)
            return out

    return Backbone(
        name=name,
        layer=chosen,
        pooled=pooled,
        dim=int(probe.shape[1]),
        weights=weights,
        num_params=sum(p.numel() for p in model.parameters()),
        module=_Features().eval(),
    )
