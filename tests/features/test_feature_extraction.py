"""`zsl features extract`: torchvision backbones over generated images, frozen and hashed.

Checked against an independent computation (torchvision's own model and transforms, applied
image by image), for determinism (same hash twice, with and without worker processes), resuming
after SIGKILL (same hash as an uninterrupted run, fewer images extracted), bad images (listed,
nothing sealed; ``--skip-bad`` records them), refused weights, image lists with boxes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import HarnessError, IntegrityError
from harness.features.backbones import resolve_weights
from harness.features.extract import (
    ExtractionRequest,
    extract_features,
    partial_dir,
    plan_extraction,
    weights_preprocessing,
)
from harness.features.images import read_images
from harness.features.preprocess import Preprocessing, preset
from harness.features.sets import ArtifactSet
from harness.spec import ExtractSpec, FeatureSpec, PretrainedOn
from tests.toy_images import CLASS_NAMES, make_images, random_weights

torch = pytest.importorskip("torch", reason="the features extra (make install-features)")
torchvision = pytest.importorskip("torchvision", reason="the features extra")

SMALL = Preprocessing(resize=(64, 64), crop=None)
BATCH, CHUNK = 8, 16


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("toy")
    make_images(root / "images", per_class=8)
    # Two of the classes (17 images, 2 chunks, the broken one included): for the tests where
    # the number of images is not the point, a quarter of the forward passes.
    make_images(root / "few", per_class=8, classes=CLASS_NAMES[:2])
    return {
        "root": root,
        "images": root / "images",
        "few": root / "few",
        "weights": random_weights(root / "resnet18.pth"),
        "safetensors": random_weights(root / "resnet18.safetensors"),
    }


def _request(toy: dict[str, Path], **changes: object) -> ExtractionRequest:
    fields: dict[str, object] = {
        "images": read_images(toy["images"]),
        "backbone": "resnet18",
        "layer": None,
        "weights": resolve_weights("resnet18", str(toy["weights"])),
        "pretrained_on": PretrainedOn(class_set="none"),
        "preprocessing": SMALL,
        "batch_size": BATCH,
        "chunk_images": CHUNK,
    }
    fields.update(changes)
    return ExtractionRequest(**fields)  # type: ignore[arg-type]


def _independent_features(files: list[Path], weights: Path) -> np.ndarray:
    """resnet18 with its head removed, on each image alone, preprocessed with torchvision's
    transforms v2 pipeline (not the harness's functional code)."""
    from PIL import Image
    from torchvision.transforms import v2

    model = torchvision.models.resnet18()
    model.load_state_dict(torch.load(weights, weights_only=True))
    model.fc = torch.nn.Identity()
    model.eval()
    steps = v2.Compose(
        [
            v2.PILToTensor(),
            v2.Resize((64, 64), antialias=True),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    with torch.no_grad():
        rows = [model(steps(Image.open(f).convert("RGB"))[None])[0].numpy() for f in files]
    return np.stack(rows)


def test_bad_image_is_listed_and_nothing_is_sealed_until_skip_bad(
    toy: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "features"
    request = _request(toy, images=read_images(toy["few"]))
    with pytest.raises(HarnessError) as caught:
        extract_features(request, out, quiet=True)
    message = str(caught.value)
    assert re.search(r"1 of 17 image\(s\) could not be read: crimson/broken\.jpg: corrupt", message)
    assert "--skip-bad" in message
    assert not out.exists()  # nothing sealed
    assert len(list(partial_dir(out).glob("chunk-*.json"))) == 2  # the work is kept
    again = extract_features(request, out, skip_bad=True, quiet=True)
    assert again.images_extracted == 0  # sealed from the saved chunks
    found = ArtifactSet(out, kind="features")
    assert found.provenance["skipped"] == [
        {"path": "crimson/broken.jpg", "reason": found.provenance["skipped"][0]["reason"]}
    ]
    assert "corrupt or truncated" in found.provenance["skipped"][0]["reason"]
    assert found.entries["features"].shape == (16, 512)
    assert "crimson/broken.jpg" not in found.strings("paths")
    assert not partial_dir(out).exists()


@pytest.mark.slow  # up to 10 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_features_match_an_independent_forward_pass_and_the_hash_is_deterministic(
    toy: dict[str, Path], tmp_path: Path
) -> None:
    first = extract_features(_request(toy), tmp_path / "a", skip_bad=True, quiet=True)
    second = extract_features(_request(toy), tmp_path / "b", skip_bad=True, workers=2, quiet=True)
    assert first.feature_set.hash == second.feature_set.hash
    features = np.asarray(first.feature_set.array("features"))
    files = [toy["images"] / p for p in first.feature_set.strings("paths")]
    expected = _independent_features(files, toy["weights"])
    np.testing.assert_allclose(features, expected, rtol=1e-4, atol=1e-4)
    labels = first.feature_set.array("labels")
    class_ids = first.feature_set.strings("class_ids")
    assert class_ids == sorted(CLASS_NAMES)
    assert [class_ids[i] for i in labels] == [
        p.split("/")[0] for p in first.feature_set.strings("paths")
    ]
    provenance = first.feature_set.provenance
    assert (
        provenance["weights"]["sha256"] == resolve_weights("resnet18", str(toy["weights"])).sha256
    )
    assert provenance["preprocessing"]["resize"] == [64, 64]
    assert provenance["backbone"]["layer"] == "flatten"
    assert provenance["pretrained_on"] == {"class_set": "none"}
    # the same state dict as safetensors: another weights hash, the same features
    other = extract_features(
        _request(toy, weights=resolve_weights("resnet18", str(toy["safetensors"]))),
        tmp_path / "c",
        skip_bad=True,
        quiet=True,
    )
    assert other.feature_set.hash != first.feature_set.hash
    np.testing.assert_array_equal(other.feature_set.array("features"), features)
    # an edited array is caught on reading
    path = tmp_path / "a" / "labels.npy"
    os.chmod(path, 0o644)
    np.save(path, np.zeros_like(labels))
    with pytest.raises(IntegrityError, match="does not match the manifest"):
        ArtifactSet(tmp_path / "a").verify()


def _run_extract(toy: dict[str, Path], out: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "harness.cli.main", "features", "extract"]
    # ResNet-18: a chunk of 8 images takes long enough to be killed between two chunks.
    argv += ["--images", str(toy["images"]), "--weights", str(toy["weights"])]
    argv += ["--backbone", "resnet18", "--pretrained-on", "none", "--out", str(out)]
    argv += ["--preprocessing", "whole-image-224", "--batch-size", "4", "--chunk", "8"]
    argv += ["--workers", "0", "--quiet", *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_resume_after_sigkill_gives_the_uninterrupted_hash(
    toy: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    process = _run_extract(toy, out, "--skip-bad")
    first_chunk = partial_dir(out) / "chunk-000000.json"
    deadline = time.monotonic() + 120
    while not first_chunk.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert first_chunk.exists(), process.stdout.read() if process.stdout else ""
    assert not (out / "manifest.json").exists(), "the run finished before it was killed"
    done = len(list(partial_dir(out).glob("chunk-*.json")))
    assert 1 <= done < 9
    resumed = _run_extract(toy, out, "--skip-bad")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    extracted = int(re.search(r"extracted (\d+) image\(s\)", output)[1])  # type: ignore[index]
    assert extracted == 65 - 8 * done
    whole = _run_extract(toy, tmp_path / "whole", "--skip-bad")
    output_whole, _ = whole.communicate(timeout=300)
    assert whole.returncode == 0, output_whole
    assert ArtifactSet(out).hash == ArtifactSet(tmp_path / "whole").hash
    np.testing.assert_array_equal(
        ArtifactSet(out).array("features"), ArtifactSet(tmp_path / "whole").array("features")
    )


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
def test_a_partial_extraction_of_another_request_is_refused(
    toy: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "f"
    few = read_images(toy["few"])
    with pytest.raises(HarnessError, match="could not be read"):
        extract_features(_request(toy, images=few), out, quiet=True)
    other = _request(toy, images=few, preprocessing=Preprocessing(resize=(48, 48), crop=None))
    with pytest.raises(HarnessError, match="chunks of a different extraction"):
        extract_features(other, out, quiet=True)
    extract_features(_request(toy, images=few), out, skip_bad=True, quiet=True)
    with pytest.raises(HarnessError, match="made by another extraction"):
        extract_features(other, out, skip_bad=True, quiet=True)
    (tmp_path / "plain").mkdir()
    with pytest.raises(HarnessError, match="is not a feature set"):
        extract_features(other, tmp_path / "plain", quiet=True)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["features", "extract", *args])
    return result.exit_code, result.output


def test_weights_are_refused_with_a_reason(
    toy: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["--images", str(toy["images"]), "--out", str(tmp_path / "o"), "--quiet"]
    weights = ["--weights", str(toy["weights"]), "--backbone", "resnet18"]
    code, output = _cli(
        *base, *weights, "--pretrained-on", "none", "--weights-sha256", "sha256:" + "0" * 64
    )
    assert code == 1 and "but sha256:0000" in output and "refusing weights" in output
    code, output = _cli(*base, *weights)
    assert code == 1 and "declare what it was trained on" in output
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    code, output = _cli(*base, "--weights", "IMAGENET1K_V2")
    assert code == 1 and "not in torch's cache" in output
    assert "https://download.pytorch.org/models/resnet101-cd907fc2.pth" in output
    # a file in the cache that is not what torchvision published
    cache = tmp_path / "torch" / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    (cache / "resnet18-f37072fd.pth").write_bytes(toy["weights"].read_bytes())
    code, output = _cli(*base, "--weights", "IMAGENET1K_V1", "--backbone", "resnet18")
    assert code == 1 and "does not start with f37072fd" in output
    code, output = _cli(*base, "--weights", "IMAGENET9K_V1", "--backbone", "resnet18")
    assert code == 1 and "not a torchvision ImageNet-1K weights name" in output
    code, output = _cli(
        *base, "--weights", str(toy["weights"]), "--backbone", "resnet34", "--pretrained-on", "none"
    )
    assert code == 1 and "do not fit resnet34" in output
    code, output = _cli(*base, *weights[:2], "--backbone", "resnet1O1", "--pretrained-on", "none")
    assert code == 1 and "unknown backbone 'resnet1O1'" in output
    code, output = _cli(*base, *weights, "--pretrained-on", "none", "--layer", "nope")
    assert code == 1 and "has no layer 'nope'" in output
    # a pickle that is not a tensors-only state dict: torch.load(weights_only=True) refuses it
    hostile = tmp_path / "hostile.pth"
    torch.save({"fc.weight": torch.zeros(1), "evil": object()}, hostile)
    code, output = _cli(
        *base, "--weights", str(hostile), "--backbone", "resnet18", "--pretrained-on", "none"
    )
    assert code == 1 and "not a readable state dict" in output
    assert not (tmp_path / "o").exists()


def test_image_lists_boxes_and_list_errors(toy: dict[str, Path], tmp_path: Path) -> None:
    from PIL import Image

    source = toy["images"] / "navy" / "000.png"
    with Image.open(source) as image:
        width, _ = image.size
        image.crop((5, 6, 40, 45)).save(tmp_path / "cropped.png")
    os.symlink(source, tmp_path / "again.png")
    listing = tmp_path / "list.txt"
    listing.write_text(
        "# path, class, box\n"
        f"{source}\tnavy\t5,6,40,45\n"
        "cropped.png\tnavy-cropped\t0 0 35 39\n"
        f"again.png\tnavy\t{width + 5},1,{width + 9},9\n"
    )
    box = Preprocessing(box=True, resize=(64, 64), crop=None)
    request = _request(toy, images=read_images(listing), preprocessing=box)
    result = extract_features(request, tmp_path / "boxes", skip_bad=True, quiet=True)
    features = result.feature_set.array("features")
    np.testing.assert_allclose(features[0], features[1], atol=1e-5)  # box crop == cropped file
    assert result.feature_set.provenance["skipped"][0]["path"] == "again.png"
    assert "outside" in result.feature_set.provenance["skipped"][0]["reason"]
    assert result.feature_set.array("boxes").shape == (2, 4)
    for text, expected in [
        ("a.png\n", r"list\.txt:1: expected 'path<TAB>class_id'"),
        (
            "a.png\tx\nb.png\tx\na.png\ty\n",
            r"list\.txt:3: a\.png is listed twice \(first at line 1\)",
        ),
        ("a.png\tx\t1,2,3\n", r"list\.txt:1: bounding box '1,2,3'"),
        ("a.png\tx\t5,5,1,1\n", r"x2 > x1"),
        ("a.png\tx\t0,0,1,1\nb.png\tx\n", r"1 of 2 images have a bounding box"),
        ("# nothing\n", r"the image list is empty"),
    ]:
        listing.write_text(text)
        with pytest.raises(HarnessError, match=expected):
            read_images(listing)
    with pytest.raises(HarnessError, match="no images found"):
        read_images(tmp_path / "boxes")  # a folder without class folders of images
    listing.write_text(f"{source}\tnavy\n")
    with pytest.raises(HarnessError, match="gives none"):
        plan_extraction(
            ExtractSpec(
                images=str(listing),
                weights=str(toy["weights"]),
                backbone="resnet18",
                pretrained_on=PretrainedOn(class_set="none"),
                preprocessing="box-224",
            ),
            tmp_path,
        )


def test_preprocessing_declarations() -> None:
    with pytest.raises(ValueError, match="must be an exact"):
        Preprocessing(resize=256, crop=None)
    with pytest.raises(ValueError, match="between 1 and 8192"):
        Preprocessing(resize=0)
    with pytest.raises(ValueError, match="unknown preprocessing preset"):
        preset("imagenet")
    assert preset("whole-image-224").output_size() == (224, 224)
    # torchvision's own evaluation transform of the named weights (no download needed)
    v2 = weights_preprocessing("resnet101", "IMAGENET1K_V2")
    assert (v2.resize, v2.crop) == (232, 224)
    assert weights_preprocessing("resnet101", "ResNet101_Weights.IMAGENET1K_V1").resize == 256


def test_spec_features_extract_takes_pretrained_on_from_the_weights() -> None:
    base = {"name": "r", "dim": 2048, "backbone": "resnet101"}
    named = FeatureSpec.model_validate(
        {**base, "extract": {"images": "x", "weights": "IMAGENET1K_V2"}}
    )
    assert named.pretrained_on == PretrainedOn(class_set="ilsvrc2012")
    declared = {"images": "x", "weights": "w.pth", "pretrained_on": {"class_set": "none"}}
    assert (
        FeatureSpec.model_validate({**base, "extract": declared}).pretrained_on.class_set == "none"
    )
    for extract, message in [
        ({"images": "x", "weights": "w.pth"}, "declare what it was trained on"),
        (
            {"images": "x", "weights": "IMAGENET1K_V2", "pretrained_on": {"class_set": "none"}},
            "carry what they were trained on",
        ),
        (
            {"images": "x", "weights": "IMAGENET1K_V2", "preprocessing": "gbu"},
            "unknown preset 'gbu'",
        ),
        (
            {
                "images": "x",
                "weights": "w.pth",
                "pretrained_on": {"class_set": "none"},
                "batch_size": 0,
            },
            "greater than 0",
        ),
    ]:
        with pytest.raises(ValueError, match=message) as caught:
            FeatureSpec.model_validate({**base, "extract": extract})
        assert "pretrained_on\n  Field required" not in str(caught.value)
    with pytest.raises(ValueError, match="contradicts the extraction's weights"):
        FeatureSpec.model_validate(
            {
                **base,
                "pretrained_on": {"class_set": "none"},
                "extract": {"images": "x", "weights": "DEFAULT"},
            }
        )


def test_show_verifies_and_prints_the_provenance(toy: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "f"
    extract_features(_request(toy, images=read_images(toy["few"])), out, skip_bad=True, quiet=True)
    result = CliRunner().invoke(app, ["features", "show", str(out)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["hash"] == ArtifactSet(out).hash and shown["backbone"]["name"] == "resnet18"
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["provenance"]["preprocessing"]["crop"] = 224
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["features", "show", str(out)])
    assert result.exit_code == 2 and "manifest hash mismatch" in result.output


def test_hostile_and_odd_images_are_listed_not_crashed_on(
    toy: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image

    root = tmp_path / "odd" / "c"
    root.mkdir(parents=True)
    Image.new("RGBA", (40, 30), (10, 200, 30, 0)).save(root / "alpha.png")  # RGBA: converted
    Image.new("L", (40, 30), 128).save(root / "grey.png")  # greyscale: converted
    Image.new("P", (40, 30)).save(root / "palette.gif")
    Image.new("RGB", (300, 300)).save(root / "huge.png")
    (root / "empty.jpg").write_bytes(b"")
    (root / "text.png").write_text("not an image")
    os.symlink(tmp_path / "nowhere.png", root / "dangling.png")
    # decompression bombs are refused: here "huge" is anything over 2 x 20,000 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 20_000)
    request = _request(toy, images=read_images(tmp_path / "odd"))
    result = extract_features(request, tmp_path / "out", skip_bad=True, quiet=True)
    reasons = {s["path"]: s["reason"] for s in result.feature_set.provenance["skipped"]}
    assert set(reasons) == {"c/huge.png", "c/empty.jpg", "c/text.png", "c/dangling.png"}
    assert "decompression bomb" in reasons["c/huge.png"]
    assert reasons["c/empty.jpg"] == "empty file"
    assert "not an image file" in reasons["c/text.png"]
    assert "cannot read the file" in reasons["c/dangling.png"]
    assert sorted(result.feature_set.strings("paths")) == [
        "c/alpha.png",
        "c/grey.png",
        "c/palette.gif",
    ]


def test_cli_refuses_bad_options_with_one_line(toy: dict[str, Path], tmp_path: Path) -> None:
    base = ["--weights", str(toy["weights"]), "--backbone", "resnet18", "--pretrained-on", "none"]
    out = ["--out", str(tmp_path / "o"), "--quiet"]
    code, output = _cli("--images", str(tmp_path / "missing"), *base, *out)
    assert code == 1 and "no such folder or image list" in output
    code, output = _cli("--images", str(toy["images"]), *base, *out, "--precision", "fp8")
    assert code == 1 and "precision:" in output and "fp16" in output
    code, output = _cli("--images", str(toy["images"]), *base, *out, "--preprocessing", "gbu")
    assert code == 1 and "unknown preset 'gbu'" in output
    bad_steps = tmp_path / "steps.yaml"
    bad_steps.write_text("resize: 256\ncrop: null\n")
    code, output = _cli(
        "--images", str(toy["images"]), *base, *out, "--preprocessing", str(bad_steps)
    )
    assert code == 1 and "must be an exact [height, width]" in output
    code, output = _cli(
        "--images", str(toy["images"]), *base, *out, "--pretrained-on-wnids", str(bad_steps)
    )
    assert code == 1 and "not both" in output
    assert "Traceback" not in output
