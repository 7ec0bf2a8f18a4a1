"""Bring your own images: `zsl features extract` + `zsl embeddings build` + a spec of adapter
``feature-set`` → `zsl run`, end to end; and a spec whose ``features.extract`` makes
`zsl data prepare` extract (cached by the inputs' hashes).

The toy task (tests/toy_images.py): 8 colour-and-stripe classes, a randomly initialised
ResNet-18, and class "word vectors" that are the classes' visual attributes. ESZSL trained on
5 seen classes must beat chance (1/3) on the 3 unseen ones.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import SpecError
from harness.core.hashing import file_sha256
from harness.core.home import zsl_home
from harness.data.prepare import prepare
from harness.features.sets import ArtifactSet
from harness.spec import load_spec
from harness.store import load_runs, open_store
from tests.toy_images import CLASS_NAMES, make_images, random_weights, write_attribute_vectors

pytest.importorskip("torchvision", reason="the features extra (make install-features)")

SUBMISSIONS = Path(__file__).resolve().parents[2] / "submissions"
UNSEEN = ("amber", "navy", "olive")


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _spec_text(data_params: str, features: str) -> str:
    return f"""\
benchmark: toy-images
version: 1
title: "Toy images: colours and stripes"
data:
  adapter: feature-set
  params:
{data_params}
    unseen_classes: unseen.txt
    n_val: 1
    test_seen_fraction: 0.25
features:
{features}
class_embeddings:
  - name: attributes
    dim: 4
    default: true
settings: [zsl, gzsl]
metrics:
  - name: per_class_top_k_accuracy
    key: top1
    k: 1
  - name: gzsl_seen_accuracy
    key: seen
  - name: gzsl_unseen_accuracy
    key: unseen
  - name: gzsl_harmonic_mean
    key: H
primary:
  zsl: top1
  gzsl: H
uncertainty:
  n_boot: 100
"""


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    make_images(tmp_path / "images", per_class=16)
    random_weights(tmp_path / "resnet18.pth")
    (tmp_path / "prep.yaml").write_text("resize: [64, 64]\ncrop: null\n")
    (tmp_path / "classes.txt").write_text("".join(f"{c}\t{c}\n" for c in CLASS_NAMES))
    write_attribute_vectors(tmp_path / "vectors.txt")
    (tmp_path / "unseen.txt").write_text("\n".join(UNSEEN) + "\n")
    return tmp_path


@pytest.mark.slow
def test_extract_embed_spec_run_end_to_end(
    inputs: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(inputs)
    extracted = _invoke(
        "features", "extract", "--images", "images", "--weights", "resnet18.pth",
        "--backbone", "resnet18", "--pretrained-on", "none", "--preprocessing", "prep.yaml",
        "--out", "feats", "--skip-bad", "--batch-size", "16", "--quiet",
    )  # fmt: skip
    assert "skipped crimson/broken.jpg: corrupt or truncated image" in extracted
    _invoke(
        "embeddings", "build", "--classes", "classes.txt", "--model", "glove",
        "--vectors", "vectors.txt", "--out", "emb",
    )  # fmt: skip
    features, embeddings = ArtifactSet("feats"), ArtifactSet("emb")
    params = (
        f"    features: feats\n    features_hash: {features.hash}\n"
        f"    embeddings:\n      attributes: {{path: emb, hash: {embeddings.hash}}}"
    )
    declared = "  name: resnet18-random\n  dim: 512\n  backbone: resnet18\n"
    declared += "  pretrained_on: {class_set: none}"
    (inputs / "toy.yaml").write_text(_spec_text(params, declared))
    _invoke(
        "run", str(SUBMISSIONS / "eszsl"), "--spec", "toy.yaml", "--runner", "local",
        "--database-url", db,
    )  # fmt: skip
    (record,) = load_runs(open_store(db))
    provenance = record.benchmark.provenance
    assert provenance is not None
    assert provenance.features.set_hash == features.hash
    assert provenance.features.weights["sha256"] == file_sha256(inputs / "resnet18.pth")
    assert provenance.features.preprocessing["resize"] == [64, 64]
    assert provenance.features.preprocessing["crop"] is None
    assert provenance.features.pretrained_on == {"class_set": "none"}
    assert provenance.features.skipped == 1
    assert provenance.class_embeddings["attributes"].set_hash == embeddings.hash
    assert provenance.class_embeddings["attributes"].model == "glove"
    assert record.benchmark.n_unseen == 3
    scores = {(s.setting, s.metric): s.value for s in record.scores}
    assert scores[("zsl", "top1")] > 1 / 3 + 0.15, scores  # chance is 1/3
    # the exported record file carries it too
    _invoke("results", "export", "--database-url", db, "--results", "exported")
    (exported,) = Path("exported").rglob("*.json")
    saved = json.loads(exported.read_text())
    assert (
        saved["record"]["benchmark"]["provenance"]["features"]["weights"]["sha256"]
        == (provenance.features.weights["sha256"])
    )
    # the benchmark page shows how the features and class embeddings were made
    _invoke("leaderboard", "build", "--out", "site", "--database-url", db)
    (page,) = [p for p in Path("site").rglob("*.html") if "toy-images" in p.name]
    html = page.read_text()
    weights_hash = provenance.features.weights["sha256"]
    assert weights_hash in html and "<code><bdi>resnet18</bdi></code>" in html
    assert "resize whole image to 64x64" in html and "(1 unreadable, left out)" in html
    assert embeddings.hash in html and "name tokens, averaged" in html
    assert record.environment.get("torchvision") == metadata.version("torchvision")
    # and it reads back (import, round trip)
    _invoke("results", "import", "--database-url", f"{db}-copy", "--results", "exported")
    (imported,) = load_runs(open_store(f"{db}-copy"))
    assert imported.benchmark.provenance == provenance


@pytest.mark.slow
def test_spec_features_extract_is_run_by_prepare_and_cached(
    inputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(inputs)
    _invoke(
        "embeddings", "build", "--classes", "classes.txt", "--model", "glove",
        "--vectors", "vectors.txt", "--out", "emb",
    )  # fmt: skip
    params = "    embeddings:\n      attributes: {path: emb}"
    extract = (
        "  name: resnet18-random\n  dim: 512\n  backbone: resnet18\n  extract:\n"
        "    images: images\n    backbone: resnet18\n    weights: resnet18.pth\n"
        f"    weights_sha256: {file_sha256(inputs / 'resnet18.pth')}\n"
        "    pretrained_on: {class_set: none}\n"
        "    preprocessing: {resize: [64, 64], crop: null}\n    skip_bad: true\n"
    )
    (inputs / "toy.yaml").write_text(_spec_text(params, extract))
    spec = load_spec(inputs / "toy.yaml")
    assert spec.features.pretrained_on.class_set == "none"
    frozen = prepare(spec)
    provenance = frozen.meta["provenance"]["features"]
    assert provenance["weights"]["sha256"] == file_sha256(inputs / "resnet18.pth")
    (cached,) = (zsl_home() / "features").iterdir()
    manifest = cached / "manifest.json"
    stamp = manifest.stat().st_mtime_ns
    # a second version of the spec with the same extraction: the cache is reused
    (inputs / "toy2.yaml").write_text(
        (inputs / "toy.yaml").read_text().replace("version: 1", "version: 2")
    )
    again = prepare(load_spec(inputs / "toy2.yaml"))
    assert again.meta["provenance"]["features"]["set_hash"] == provenance["set_hash"]
    assert manifest.stat().st_mtime_ns == stamp
    assert len(list(cached.parent.iterdir())) == 1
    # other weights than the declared hash are refused before anything is extracted
    (inputs / "toy3.yaml").write_text(
        (inputs / "toy.yaml")
        .read_text()
        .replace("version: 1", "version: 3")
        .replace(file_sha256(inputs / "resnet18.pth"), "sha256:" + "1" * 64)
    )
    with pytest.raises(Exception, match="refusing weights that are not the declared ones"):
        prepare(load_spec(inputs / "toy3.yaml"))


def test_feature_set_adapter_refuses_mismatches(
    inputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(inputs)
    make_images(inputs / "few", per_class=2, corrupt=False, classes=CLASS_NAMES[:4])
    _invoke(
        "features", "extract", "--images", "few", "--weights", "resnet18.pth",
        "--backbone", "resnet18", "--pretrained-on", "ilsvrc2012",
        "--preprocessing", "prep.yaml", "--out", "feats", "--quiet",
    )  # fmt: skip
    (inputs / "some.txt").write_text("".join(f"{c}\t{c}\n" for c in CLASS_NAMES[:3]))
    _invoke(
        "embeddings", "build", "--classes", "some.txt", "--model", "glove",
        "--vectors", "vectors.txt", "--out", "emb",
    )  # fmt: skip
    declared = "  name: r\n  dim: 512\n  backbone: resnet18\n  pretrained_on: {class_set: none}"
    base = "    features: feats\n    embeddings:\n      attributes: {path: emb}"
    (inputs / "unseen.txt").write_text("crimson\n")
    cases = [
        (base, declared, r"features.pretrained_on is \{'class_set': 'none'\}, but the feature"),
        (
            base.replace("feats\n", f"feats\n    features_hash: sha256:{'2' * 64}\n"),
            declared,
            "not the pinned",
        ),
        (
            base,
            declared.replace("class_set: none", "class_set: ilsvrc2012"),
            "1 class\\(es\\) of the features have no embedding, first 'olive'",
        ),
        (
            base.replace("path: emb", "path: feats"),
            declared.replace("class_set: none", "class_set: ilsvrc2012"),
            "holds features, not class-embeddings",
        ),
    ]
    for number, (params, features, message) in enumerate(cases, start=1):
        spec_file = inputs / f"bad{number}.yaml"
        text = _spec_text(params, features).replace("toy-images", f"bad-{number}")
        spec_file.write_text(text)
        with pytest.raises(SpecError, match=message):
            prepare(load_spec(spec_file), no_audit="test")
