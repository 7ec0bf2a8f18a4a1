"""Toy image datasets for the feature-extraction tests and bench: generated, never downloaded.

Each class has visual attributes (a colour and a stripe frequency, :data:`ATTRIBUTES`); its
images are noisy striped pictures of that colour, saved as PNG and JPEG at random sizes. The
attributes are also the classes' "word vectors" (:func:`write_attribute_vectors`), so a
zero-shot method can transfer from seen to unseen classes on features of any fixed backbone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "ATTRIBUTES",
    "CLASS_NAMES",
    "make_images",
    "random_weights",
    "write_attribute_vectors",
]

#: class name -> (red, green, blue, stripe frequency), each in [0, 1]
ATTRIBUTES: dict[str, tuple[float, float, float, float]] = {
    "crimson": (0.9, 0.1, 0.1, 0.1),
    "scarlet": (0.8, 0.2, 0.1, 0.9),
    "emerald": (0.1, 0.8, 0.2, 0.2),
    "olive": (0.5, 0.6, 0.1, 0.8),
    "navy": (0.1, 0.1, 0.7, 0.3),
    "azure": (0.2, 0.6, 0.9, 0.7),
    "amber": (0.9, 0.7, 0.1, 0.5),
    "violet": (0.6, 0.2, 0.8, 0.4),
}
CLASS_NAMES = tuple(ATTRIBUTES)


def _picture(rng: np.random.Generator, attributes: tuple[float, ...]) -> np.ndarray:
    red, green, blue, stripes = attributes
    height, width = (int(v) for v in rng.integers(48, 96, size=2))
    period = 4 + 20 * (1 - stripes)
    phase = rng.random() * period
    x = np.arange(width)[None, :] + np.zeros((height, 1))
    band = (np.sin(2 * np.pi * (x + phase) / period) > 0).astype(float)
    colour = np.array([red, green, blue]) * 255
    image = band[..., None] * colour + (1 - band[..., None]) * (255 - colour) * 0.3
    image += rng.normal(0, 12, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_images(
    root: Path,
    per_class: int = 8,
    *,
    seed: int = 0,
    corrupt: bool = True,
    classes: tuple[str, ...] = CLASS_NAMES,
) -> list[Path]:
    """Write ``root/<class>/<i>.png|jpg`` (alternating), and with ``corrupt`` one truncated
    JPEG in the first class; returns every file written."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    written = []
    for name in classes:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            picture = Image.fromarray(_picture(rng, ATTRIBUTES[name]))
            file = folder / (f"{i:03d}.png" if i % 2 == 0 else f"{i:03d}.jpg")
            picture.save(file)
            written.append(file)
    if corrupt:
        good = root / classes[0] / "001.jpg"
        bad = root / classes[0] / "broken.jpg"
        bad.write_bytes(good.read_bytes()[:200])  # a JPEG cut short
        written.append(bad)
    return written


def write_attribute_vectors(path: Path, extra_words: dict[str, list[float]] | None = None) -> None:
    """A GloVe-format text file whose word vectors are the classes' attributes."""
    lines = [f"{name} " + " ".join(f"{v:.6f}" for v in ATTRIBUTES[name]) for name in ATTRIBUTES]
    for word, vector in (extra_words or {}).items():
        lines.append(f"{word} " + " ".join(f"{v:.6f}" for v in vector))
    path.write_text("\n".join(lines) + "\n")


def random_weights(path: Path, backbone: str = "resnet18", seed: int = 0) -> Path:
    """Save a randomly initialised torchvision ``backbone``'s state dict (``.pth`` or
    ``.safetensors`` by ``path``'s suffix)."""
    import torch
    import torchvision

    torch.manual_seed(seed)
    state = torchvision.models.get_model(backbone, weights=None).state_dict()
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path
