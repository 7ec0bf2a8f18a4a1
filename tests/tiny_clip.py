"""A tiny random-initialised open_clip model for the vision–language tests (issue 30).

One transformer layer per tower, width 32, 16-d embeddings: the whole CLIP path (image tower
features, prompt embeddings, a zero-shot run) runs on the CPU in seconds. Its random state
dict, saved to a file, stands in for "the weights file"; :func:`register` makes the
architecture known to open_clip for one test (never a download: open_clip builds it from the
config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["ARCH", "TINY", "register", "save_random_weights"]

ARCH = "zsl-tiny-clip"
TINY: dict[str, Any] = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make :data:`ARCH` an open_clip architecture for the current test only."""
    from open_clip import factory

    monkeypatch.setitem(factory._MODEL_CONFIGS, ARCH, TINY)


def save_random_weights(path: Path, seed: int, config: dict[str, Any] = TINY) -> Path:
    """The state dict of a model of ``config`` initialised from ``seed``, as safetensors."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    from harness.features import clip

    with clip._quiet_open_clip():
        torch.manual_seed(seed)
        model = open_clip.CLIP(**config)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path
