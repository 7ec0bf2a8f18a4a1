"""Image preprocessing, declared: what a feature set's manifest says was done to each image.

A :class:`Preprocessing` is data (it goes into the manifest and the run record) and is turned
into one deterministic function, image file → float tensor [3, H, W], by :func:`transform`.

See docs/features.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["PRESETS", "Preprocessing", "preset", "transform"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Preprocessing(BaseModel):
    """Every step from image file to network input (see docs/features.md for the order)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    box: bool = Field(
        False, description="crop each image to its bounding box from the image list first"
    )
    resize: int | tuple[int, int] | None = Field(
        256, description="shorter side (int) or exact [height, width]; null: no resize"
    )
    crop: int | None = Field(224, description="centre crop size; null: no crop")
    interpolation: Literal["bilinear", "bicubic", "nearest"] = "bilinear"
    antialias: bool = True
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    @field_validator("resize")
    @classmethod
    def _positive_size(cls, value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
        sizes = [value] if isinstance(value, int) else list(value or [])
        if any(s <= 0 or s > 8192 for s in sizes):
            raise ValueError("sizes must be between 1 and 8192 pixels")
        return value

    @field_validator("crop")
    @classmethod
    def _positive_crop(cls, value: int | None) -> int | None:
        if value is not None and not 0 < value <= 8192:
            raise ValueError("crop must be between 1 and 8192 pixels")
        return value

    @field_validator("std")
    @classmethod
    def _nonzero_std(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(s <= 0 for s in value):
            raise ValueError("std must be positive")
        return value

    @model_validator(mode="after")
    def _fixed_size(self) -> Preprocessing:
        # Images are batched, so every image must come out at one size.
        if self.crop is None and not isinstance(self.resize, tuple):
            raise ValueError(
                "without 'crop', 'resize' must be an exact [height, width] (images are batched"
                " at one size)"
            )
        return self

    def output_size(self) -> tuple[int, int]:
        if self.crop is not None:
            return (self.crop, self.crop)
        assert isinstance(self.resize, tuple)
        return self.resize

    def describe(self) -> str:
        steps = ["RGB"]
        if self.box:
            steps.append("bounding-box crop")
        if isinstance(self.resize, int):
            steps.append(f"resize shorter side to {self.resize} ({self.interpolation})")
        elif self.resize is not None:
            steps.append(f"resize whole image to {self.resize[0]}x{self.resize[1]}")
        if self.crop is not None:
            steps.append(f"centre crop {self.crop}")
        steps.append("normalize mean/std")
        return ", ".join(steps)


PRESETS: dict[str, Preprocessing] = {
    # torchvision's ImageNet evaluation transform (resize 256, centre crop 224)
    "imagenet-eval": Preprocessing(),
    # GBU (Xian et al. 2018): the whole image, resized to the network input, no crop
    "whole-image-224": Preprocessing(resize=(224, 224), crop=None),
    # aPY's protocol: each object's bounding box, then the whole box resized
    "box-224": Preprocessing(box=True, resize=(224, 224), crop=None),
}


def preset(name: str) -> Preprocessing:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown preprocessing preset {name!r}; one of {', '.join(sorted(PRESETS))}"
        ) from None


def transform(preprocessing: Preprocessing) -> Any:
    """The function ``(PIL image, box or None) -> float32 tensor [3, H, W]`` of
    ``preprocessing`` (torchvision's functional transforms: the same result every call). A box
    that lies outside its image raises ``ValueError``."""
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    mode = {
        "bilinear": InterpolationMode.BILINEAR,
        "bicubic": InterpolationMode.BICUBIC,
        "nearest": InterpolationMode.NEAREST,
    }[preprocessing.interpolation]
    mean, std = list(preprocessing.mean), list(preprocessing.std)

    def apply(image: Image.Image, box: tuple[float, float, float, float] | None) -> Any:
        if preprocessing.box and box is not None:
            width, height = image.size
            x1, y1, x2, y2 = box
            left, top = max(0, int(x1)), max(0, int(y1))
            right, bottom = min(width, round(x2)), min(height, round(y2))
            if right <= left or bottom <= top:
                raise ValueError(f"bounding box {box} lies outside the {width}x{height} image")
            image = image.crop((left, top, right, bottom))
        tensor = F.pil_to_tensor(image)
        if preprocessing.resize is not None:
            size = (
                [preprocessing.resize]
                if isinstance(preprocessing.resize, int)
                else list(preprocessing.resize)
            )
            tensor = F.resize(tensor, size, interpolation=mode, antialias=preprocessing.antialias)
        if preprocessing.crop is not None:
            tensor = F.center_crop(tensor, [preprocessing.crop, preprocessing.crop])
        tensor = F.to_dtype(tensor, torch.float32, scale=True)
        return F.normalize(tensor, mean, std)

    return apply
