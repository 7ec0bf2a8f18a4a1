"""Vision–language models (issue 30): open_clip image towers as feature backbones, ``clip-text``
prompt embeddings, and the leakage audit of web-scale pre-training.

Everything runs on a tiny random-initialised open_clip configuration registered for the test
(one layer per tower, width 32): its random state dict, saved to a file, is "the weights file".
The prompt embeddings are checked against a hand computation with open_clip's own
``encode_text`` and against open_clip's ``build_zero_shot_classifier``; the image features
against ``encode_image`` on the same input, and open_clip's own preprocessing on images of the
model's input size.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.audit import AuditStatus, LeakageAudit, freeze_audit, plan_audit, spec_audit
from harness.cli.main import app
from harness.core.errors import HarnessError, SpecError
from harness.core.hashing import file_sha256
from harness.features.sets import ArtifactSet
from harness.records import BenchmarkProvenance
from harness.spec import parse_spec
from tests.conftest import REPO
from tests.site_records import make_record
from tests.tiny_clip import ARCH, TINY, register, save_random_weights
from tests.toy_images import make_images

open_clip = pytest.importorskip("open_clip", reason="the features extra (make install-features)")
torch = pytest.importorskip("torch")

from harness.features import clip  # noqa: E402  (after the skip: it needs open_clip)
from harness.features.embeddings import EmbeddingError, build_class_embeddings  # noqa: E402

CLASSES = "dog\tdog\npanda\tgiant panda\ncar\tsports car, red\n"
TEMPLATES = "# three templates\na photo of a {}.\n\na drawing of the {}.\nitap of my {}.\n"
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _fails(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two random weights files of the tiny architecture (seeds 0 and 1)."""
    folder = tmp_path_factory.mktemp("weights")
    return save_random_weights(folder / "tiny.safetensors", 0), save_random_weights(
        folder / "other.safetensors", 1
    )


@pytest.fixture(autouse=True)
def tiny_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the tiny configuration with open_clip for this test only."""
    register(monkeypatch)


@pytest.fixture
def inputs(tmp_path: Path, weights: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with the weights, a class list and a templates file."""
    monkeypatch.chdir(tmp_path)
    for source in weights:
        (tmp_path / source.name).write_bytes(source.read_bytes())
    (tmp_path / "classes.txt").write_text(CLASSES)
    (tmp_path / "templates.txt").write_text(TEMPLATES)
    return tmp_path


def _model(path: Path) -> Any:
    ref = clip.resolve_clip_weights(ARCH, str(path))
    return clip.load_clip_model(ARCH, ref)


# --- templates -----------------------------------------------------------------------------------


def test_the_imagenet_80_preset_is_open_clips_own_80_templates() -> None:
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

    preset = clip.template_preset("imagenet-80")
    assert len(preset.templates) == 80 == len(set(preset.templates))
    assert preset.templates[0] == "a bad photo of a {}."
    assert list(preset.templates) == [t("{}") for t in OPENAI_IMAGENET_TEMPLATES]
    assert all(t.count("{}") == 1 for t in preset.templates)
    assert clip.template_preset("photo").templates == ("a photo of a {}.",)
    assert preset.to_json()["count"] == 80
    assert preset.sha256 != clip.template_preset("photo").sha256


def test_a_templates_file_is_read_in_order_without_comments(tmp_path: Path) -> None:
    path = tmp_path / "templates.txt"
    path.write_text(TEMPLATES)
    read = clip.read_templates(path)
    assert read.templates == ("a photo of a {}.", "a drawing of the {}.", "itap of my {}.")
    assert (read.name, read.source) == ("templates.txt", "file")
    assert read.fill("giant panda")[1] == "a drawing of the giant panda."
    assert clip.resolve_templates("templates.txt", tmp_path) == read


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a photo of a {}.\na photo\n", r"templates\.txt:2: template 'a photo' holds 0 '\{\}'"),
        ("# x\n{} and {}\n", r"templates\.txt:2: template '\{\} and \{\}' holds 2 '\{\}'"),
        ("a {}.\n\na {}.\n", r"templates\.txt:3: template 'a \{\}\.' repeats line 1"),
        ("# only a comment\n\n", r"templates\.txt: holds no template"),
        (b"\xff\xfe{}".decode("latin-1"), r"templates\.txt: cannot read it as UTF-8"),
    ],
)
def test_a_bad_templates_file_is_refused_naming_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "templates.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(EmbeddingError, match=message):
        clip.read_templates(path)


def test_templates_that_are_neither_preset_nor_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match=r"'imagenet80': not a preset \(imagenet-80, photo\)"):
        clip.resolve_templates("imagenet80", tmp_path)


# --- weights ------------------------------------------------------------------------------------


def test_a_missing_weights_file_is_refused_saying_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"weights file .*nowhere\.safetensors does not exist"):
        clip.resolve_clip_weights(ARCH, "nowhere.safetensors", base=tmp_path)
    with pytest.raises(HarnessError, match="never downloads"):
        clip.resolve_clip_weights(ARCH, "nowhere.safetensors", base=tmp_path)


def test_a_pretrained_tag_is_found_in_the_cache_and_never_downloaded(
    weights: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from open_clip import pretrained

    tag = pretrained._pcfg(hf_hub="zsl/tiny-clip/", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    monkeypatch.setitem(pretrained._PRETRAINED, ARCH, {"tiny_web": tag})
    cache = tmp_path / "hub"
    with pytest.raises(HarnessError, match=r"'tiny_web' are not in the cache .*never downloads"):
        clip.resolve_clip_weights(ARCH, "tiny_web", cache_dir=cache)
    with pytest.raises(
        HarnessError, match=r"nor a pretrained tag of open_clip .*its tags: tiny_web"
    ):
        clip.resolve_clip_weights(ARCH, "laion2b", cache_dir=cache)
    # the Hugging Face cache layout open_clip's hf_hub_download leaves behind
    repo = cache / "models--zsl--tiny-clip"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "open_clip_model.safetensors").write_bytes(weights[0].read_bytes())
    ref = clip.resolve_clip_weights(ARCH, "tiny_web", cache_dir=cache)
    assert (ref.source, ref.name, ref.sha256) == ("open_clip", "tiny_web", file_sha256(weights[0]))
    # the tag's own preprocessing, as open_clip's create_model sets it
    assert clip.clip_preprocessing(ARCH, ref).mean == (0.5, 0.5, 0.5)
    with clip._quiet_open_clip():
        made = open_clip.create_model(ARCH, pretrained=str(ref.path), force_preprocess_cfg=tag)
    assert clip.open_clip_preprocess_config(ARCH, ref) == {
        **made.visual.preprocess_cfg,
        "size": 32,
    }


def test_weights_of_another_architecture_are_refused(tmp_path: Path) -> None:
    wider = {**TINY, "embed_dim": 8}
    path = save_random_weights(tmp_path / "wider.safetensors", 0, wider)
    ref = clip.resolve_clip_weights(ARCH, str(path))
    with pytest.raises(
        HarnessError, match=r"wider\.safetensors do not fit open_clip zsl-tiny-clip"
    ):
        clip.load_clip_model(ARCH, ref)
    with pytest.raises(HarnessError, match=r"unknown open_clip architecture 'ViT-B-3'.*ViT-B-32"):
        clip.load_clip_model("ViT-B-3", ref)


def test_the_declared_preprocessing_is_open_clips_own(weights: tuple[Path, Path]) -> None:
    ref = clip.resolve_clip_weights(ARCH, str(weights[0]))
    declared = clip.clip_preprocessing(ARCH, ref)
    with clip._quiet_open_clip():
        made = open_clip.create_model(ARCH, pretrained=str(weights[0]))
    own = made.visual.preprocess_cfg
    assert own["size"] == (32, 32) and own["resize_mode"] == "shortest"
    assert (declared.resize, declared.crop) == (32, 32)
    assert (declared.mean, declared.std) == (tuple(own["mean"]), tuple(own["std"]))
    assert declared.interpolation == own["interpolation"] == "bicubic"


# --- image features -----------------------------------------------------------------------------


def test_image_features_are_encode_image_recorded_and_deterministic(inputs: Path) -> None:
    from PIL import Image

    make_images(inputs / "images", per_class=2, corrupt=False, classes=("crimson", "navy"))
    exact = inputs / "images" / "navy" / "exact.png"  # the input size: no resampling anywhere
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8)).save(exact)
    common = (
        "features", "extract", "--images", "images", "--backbone", f"open_clip:{ARCH}",
        "--pretrained-on-web", "LAION-2B", "--batch-size", "2", "--workers", "0", "--quiet",
    )  # fmt: skip
    _invoke(*common, "--weights", "tiny.safetensors", "--out", "a")
    _invoke(*common, "--weights", "tiny.safetensors", "--out", "b")
    _invoke(*common, "--weights", "other.safetensors", "--out", "c")
    a, b, c = (ArtifactSet(inputs / name, kind="features") for name in "abc")
    assert a.hash == b.hash and np.array_equal(a.array("features"), b.array("features"))
    assert (
        c.hash != a.hash and c.provenance["weights"]["sha256"] != a.provenance["weights"]["sha256"]
    )

    p = a.provenance
    assert p["backbone"]["name"] == f"open_clip:{ARCH}" and p["backbone"]["arch"] == ARCH
    assert p["backbone"]["layer"] == "encode_image"
    assert p["weights"] == {
        "source": "file",
        "name": "tiny.safetensors",
        "sha256": file_sha256(inputs / "tiny.safetensors"),
    }
    assert p["pretrained_on"] == {"web": "LAION-2B"}
    assert tuple(p["preprocessing"]["mean"]) == OPENAI_MEAN and p["preprocessing"]["crop"] == 32
    assert p["versions"]["open_clip_torch"] == "3.3.0"

    features = a.array("features")
    assert features.shape == (5, 16)
    assert not np.allclose(np.linalg.norm(features, axis=1), 1.0)  # not L2-normalised
    model = _model(inputs / "tiny.safetensors")
    row = a.strings("paths").index("navy/exact.png")
    with torch.no_grad():
        # open_clip's own preprocessing and encode_image, independently of the harness
        _, _, preprocess = open_clip.create_model_and_transforms(
            ARCH, pretrained=str(inputs / "tiny.safetensors")
        )
        own = model.encode_image(preprocess(Image.open(exact)).unsqueeze(0))[0].numpy()
    np.testing.assert_allclose(features[row], own, rtol=1e-4, atol=1e-5)


def test_an_open_clip_backbone_takes_no_layer_nor_download(inputs: Path) -> None:
    make_images(inputs / "images", per_class=1, corrupt=False, classes=("crimson",))
    base = (
        "features", "extract", "--images", "images", "--backbone", f"open_clip:{ARCH}",
        "--weights", "tiny.safetensors", "--pretrained-on-web", "LAION-2B", "--out", "x",
        "--quiet", "--workers", "0",
    )  # fmt: skip
    assert "--layer 'blocks.0' is for torchvision backbones" in _fails(*base, "--layer", "blocks.0")
    assert "open_clip weights are never downloaded" in _fails(*base, "--download")
    both = _fails(*base, "--pretrained-on", "none")
    assert "--pretrained-on and --pretrained-on-web: give one of them, not both" in both
    missing = _fails(*base[:8], "--out", "x", "--quiet")
    assert "declare what it was trained on" in missing and "web: LAION-2B" in missing


# --- prompt embeddings --------------------------------------------------------------------------


def test_prompt_embeddings_equal_a_hand_computation_with_encode_text(inputs: Path) -> None:
    built = build_class_embeddings(
        "classes.txt",
        "clip-text",
        "emb",
        arch=ARCH,
        weights="tiny.safetensors",
        templates="templates.txt",
    )
    rows = built.array("embeddings")
    model = _model(inputs / "tiny.safetensors")
    tokenizer = open_clip.get_tokenizer(ARCH)
    names = ["dog", "giant panda", "sports car, red"]
    templates = ["a photo of a {}.", "a drawing of the {}.", "itap of my {}."]
    with torch.no_grad():
        for row, name in zip(rows, names, strict=True):
            tokens = tokenizer([t.replace("{}", name) for t in templates])
            each = model.encode_text(tokens).double().numpy()
            each /= np.linalg.norm(each, axis=1, keepdims=True)
            mean = each.mean(axis=0)
            np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-6)
        # and open_clip's own zero-shot classifier, built the same way (float32)
        weights = open_clip.build_zero_shot_classifier(
            model, tokenizer, names, templates, num_classes_per_batch=None
        )
    np.testing.assert_allclose(rows, weights.T.numpy(), atol=1e-5)
    assert built.strings("class_names") == names
    assert built.provenance["text"] == "name in prompt templates, averaged"


def test_prompt_embeddings_are_deterministic_and_hash_weights_and_templates(inputs: Path) -> None:
    def build(out: str, weights: str, templates: str) -> ArtifactSet:
        return build_class_embeddings(
            "classes.txt", "clip-text", out, arch=ARCH, weights=weights, templates=templates
        )

    a = build("a", "tiny.safetensors", "templates.txt")
    b = build("b", "tiny.safetensors", "templates.txt")
    other_weights = build("c", "other.safetensors", "templates.txt")
    other_templates = build("d", "tiny.safetensors", "photo")
    assert a.hash == b.hash and np.array_equal(a.array("embeddings"), b.array("embeddings"))
    assert len({a.hash, other_weights.hash, other_templates.hash}) == 3
    p = a.provenance
    assert p["model"] == "clip-text"
    assert p["model_files"] == {"tiny.safetensors": file_sha256(inputs / "tiny.safetensors")}
    assert p["clip"]["arch"] == ARCH and p["clip"]["weights"]["source"] == "file"
    assert p["clip"]["logit_scale"] == pytest.approx(1 / 0.07, rel=1e-5)
    assert p["templates"]["templates"] == list(clip.read_templates("templates.txt").templates)
    assert (p["templates"]["name"], p["templates"]["count"]) == ("templates.txt", 3)
    assert p["templates"]["sha256"] != other_templates.provenance["templates"]["sha256"]
    assert other_weights.provenance["model_files"] != p["model_files"]


def test_clip_text_options_are_checked(inputs: Path) -> None:
    with pytest.raises(EmbeddingError, match="'clip-text' needs --weights, --templates"):
        build_class_embeddings("classes.txt", "clip-text", "o", arch=ARCH)
    with pytest.raises(EmbeddingError, match="--arch, --templates: only for model 'clip-text'"):
        build_class_embeddings("classes.txt", "glove-6b-50d", "o", arch=ARCH, templates="photo")
    with pytest.raises(EmbeddingError, match=r"templates\.txt:2: template 'no slot' holds 0"):
        (inputs / "templates.txt").write_text("a {}\nno slot\n")
        build_class_embeddings(
            "classes.txt", "clip-text", "o", arch=ARCH, weights="tiny.safetensors",
            templates="templates.txt",
        )  # fmt: skip
    assert not (inputs / "o").exists()


def test_zsl_embeddings_build_clip_text(inputs: Path) -> None:
    output = _invoke(
        "embeddings", "build", "--classes", "classes.txt", "--model", "clip-text", "--arch",
        ARCH, "--weights", "tiny.safetensors", "--templates", "photo", "--out", "emb", "--quiet",
    )  # fmt: skip
    built = ArtifactSet(inputs / "emb", kind="class-embeddings")
    templates = built.provenance["templates"]
    assert f"templates: photo (1, {templates['sha256']})" in " ".join(output.split())
    assert built.hash in output


# --- the spec and the leakage audit -------------------------------------------------------------


def _web_spec(web: str = "LAION-2B") -> Any:
    text = (REPO / "specs" / "demo.yaml").read_text()
    text = text.replace(
        "  pretrained_on:\n    class_set: none", f"  pretrained_on:\n    web: {web}"
    )
    assert f"web: {web}" in text
    return parse_spec(text, "web.yaml", REPO / "specs" / "demo.yaml")


def test_pretrained_on_takes_exactly_one_form() -> None:
    text = (REPO / "specs" / "demo.yaml").read_text()
    both = text.replace("    class_set: none", "    class_set: none\n    web: LAION-2B")
    with pytest.raises(SpecError, match="exactly one of 'class_set', 'wnids' or 'web'; got"):
        parse_spec(both, "both.yaml", REPO / "specs" / "demo.yaml")
    blank = text.replace("    class_set: none", "    web: ' '")
    with pytest.raises(SpecError, match=r"features\.pretrained_on\.web"):
        parse_spec(blank, "blank.yaml", REPO / "specs" / "demo.yaml")


def test_the_spec_hashes_cover_the_web_corpus() -> None:
    laion, other = _web_spec(), _web_spec("LAION-400M")
    assert laion.features.pretrained_on.web == "LAION-2B"
    assert laion.spec_hash() != other.spec_hash() and laion.data_hash() != other.data_hash()
    demo = parse_spec((REPO / "specs" / "demo.yaml").read_text(), "d", REPO / "specs" / "demo.yaml")
    assert "web" not in json.dumps(demo.model_dump(mode="json")["features"])  # hashes as before


def test_web_pre_training_is_not_auditable_against_a_class_list() -> None:
    spec = _web_spec()
    plan = plan_audit(spec, without_audit="ignored: one frozen form")
    assert plan.status == AuditStatus.NOT_AUDITABLE and plan.source == "LAION-2B"
    frozen = freeze_audit(spec, plan, ["n1", "n2"], {})
    for audit in (frozen, spec_audit(spec, ["n1", "n2"], {})):
        assert audit.status == "not auditable against a class list"
        assert not audit.audited and audit.n_overlap == 0 and audit.inputs_text() == ""
        assert audit.summary().startswith("not auditable against a class list: ")
        assert "LAION-2B" in audit.summary() and "may have been seen" in audit.summary()
    # a record carries it through JSON unchanged
    assert LeakageAudit.model_validate_json(frozen.model_dump_json()) == frozen


# --- the site -----------------------------------------------------------------------------------


def _clip_record(template_name: str) -> Any:
    audit = LeakageAudit(
        source="LAION-2B", n_test=50, status=AuditStatus.NOT_AUDITABLE, match="descendants"
    )
    record = make_record("clip-zero-shot", zsl={"top1": 0.5}, leakage=audit)
    provenance = BenchmarkProvenance.model_validate(
        {
            "features": {
                "set_hash": "sha256:" + "1" * 64,
                "backbone": "open_clip:ViT-B-32",
                "layer": "encode_image",
                "weights": {
                    "source": "file",
                    "name": "vit.safetensors",
                    "sha256": "sha256:" + "2" * 64,
                },
                "pretrained_on": {"web": "LAION-2B"},
                "preprocessing": {},
                "preprocessing_summary": "RGB, resize shorter side to 224 (bicubic)",
                "precision": "fp32",
                "device": "cpu",
                "images": {"n_extracted": 10},
            },
            "class_embeddings": {
                "prompts": {
                    "set_hash": "sha256:" + "3" * 64,
                    "model": "clip-text",
                    "model_files": {"vit.safetensors": "sha256:" + "4" * 64},
                    "text": "name in prompt templates, averaged",
                    "arch": "ViT-B-32",
                    "templates": {
                        "name": template_name,
                        "count": 80,
                        "sha256": "sha256:" + "5" * 64,
                    },
                }
            },
        }
    )
    return record.model_copy(
        update={"benchmark": record.benchmark.model_copy(update={"provenance": provenance})}
    )


def test_the_benchmark_page_shows_the_image_model_text_model_and_templates(tmp_path: Path) -> None:
    from harness.site import build_site

    hostile = "<b>bold</b> & templates.txt"
    build_site([_clip_record(hostile)], tmp_path / "site")
    html = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "the image tower of open_clip ViT-B-32 (encode_image, not L2-normalised)" in text
    assert "text model: the text tower of open_clip ViT-B-32, weights vit.safetensors" in text
    for digest in "245":  # the image model's and the text model's weights, the templates
        assert "sha256:" + digest * 64 in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; templates.txt (80 templates)" in text  # escaped
    assert "<b>bold</b>" not in html
    # the audit's status, on every page that shows the leakage badge, never "no overlap"
    assert "not auditable against a class list" in text
    assert "(backbone pre-trained on LAION-2B)" in text
    assert "none: no test class is related" not in text
    index = (tmp_path / "site" / "index.html").read_text()
    assert "not auditable against a class list" in index
    submissions = list((tmp_path / "site").rglob("*clip-zero-shot*.html"))
    assert submissions, "no submission page"
    for page in submissions:
        assert "not auditable against a class list" in page.read_text()
