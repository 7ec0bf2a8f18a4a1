"""Class-embedding kinds and the CLIP zero-shot packages (issue 30).

A spec's class embedding says what it is (``kind``; ``attributes`` by default, so the shipped
specs keep their hashes), a package says which kind it uses (``declarations.class_embedding``),
and the harness gives it those embeddings only, or refuses, skips or reports it as not
applicable where the benchmark has none. ``clip-zero-shot`` scores ``logit_scale * cos``;
``clip-template-selection`` chooses the template set on the validation classes alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from harness.bundles import Bundle, TrainTask, write_model_bundles
from harness.ci.pr import PackageOutcome, _not_applicable, _package_outcome, render_report
from harness.class_embedding import (
    CLASS_EMBEDDING_USES,
    EMBEDDING_KINDS,
    EmbeddingChoice,
    check_applicable,
    embeddings_for,
    not_applicable_reason,
)
from harness.cli.main import app
from harness.cli.run import _applicable_pairs
from harness.core.errors import NotApplicableError, SpecError, SubmissionError
from harness.data.prepare import load_benchmark
from harness.features.sets import write_set
from harness.spec import Spec, load_spec, parse_spec
from harness.submission.package import load_package
from tests.conftest import REPO, SPECS, SUBMISSIONS

CLIP_PACKAGES = ("clip-template-selection", "clip-zero-shot")
DEMO = SPECS / "demo.yaml"

# -- spec hashes: a kind left at its default changes no hash --------------------------------

#: (spec hash, data hash) of every shipped spec, as computed before kinds existed (fb7070d).
HASHES = {
    "demo.yaml": ("1d5139afaab7938bd0cc20ce3a7c71302ce303f6927f318921bedab0e0dfc3bb", "8988694d9776dc91bf456c87e3d24ec7d87359ea3da7b03de8661a785c5cf26d"),
    "imagenet/all.yaml": ("2fe49eddfa37a56180dd3d608dc38502bc7607725917210cb33a0628062bc986", "16a10e9edcca68b3cdc8339d57e124ad0ea62a018bb951c1928aa52fe09edc2e"),
    "imagenet/goz.yaml": ("d3220555fef1cebac066e474f5feed29a07ef010c62f7b80476cddcbf74f0970", "da9bd151dec44cbebdd10e8c7999d0074032d7b8d57fe721c0124e34bcf8c50a"),
    "imagenet/literature-2-hops.yaml": ("4174ee8b44a2d60f505b5488650634305813329f5029dc5b25e0cc5dcccfa35a", "1180cc6fbdebd1f6de16ea1af27fbfdf84fdfc337fd2b87b6a286cd031c840d4"),
    "imagenet/literature-3-hops.yaml": ("8d15fc1bd8868b4e33eaad628dd00662d5cd2bc9e95eb29a587c7708ea3004fb", "9d49f8973223507dc7c890028df0a68a7d18e48c45824d1324dff4b588c13cca"),
    "imagenet/within-1-hop.yaml": ("1452a851fd183500229b669ef5767b323e16aabc01b4acda94a62534c893a173", "cf2c2e305dc16979aba5be5b04ad403311f4f3df2b083f641f30adc2c1f25c05"),
    "imagenet/within-2-hops.yaml": ("1feae7bf2304852a9d83a2a0f7eb12c07560a0251b12320093d797fd19032a43", "85e1cca2fecc1fa8b05bc01de19b6be5e3e363e5f5eb118a09f5684cac22920d"),
    "xlsa17/apy-ps-val2.yaml": ("fa5deaa4c9f91439642369d60e1300b67136cdc7931ce180ddd179518713c465", "801c480f02e965784336d0193d4a01d5378d9cc087826e72dcf632e5dfbadef2"),
    "xlsa17/apy-ps-val3.yaml": ("1112f5384b72fd8c16eaef60867c505704536d713c5f38f538d2162089c2247e", "ae2e1073dbbea75c55814ddf195e7fd02276625c7fcee3f70590831646a40307"),
    "xlsa17/apy-ps.yaml": ("f921be68f2791746111164092d2524cb1236ab7e47a99a82e2c38d6002abdce2", "18d8a7c7e5d52268760e0230630ff24676b91c20822faf1a6a8dadd55135ff1a"),
    "xlsa17/apy-ss.yaml": ("94941032e0c7d1709bf4e2dfb909339654114d554e61aef3c2fc0547e04170dc", "44b3d86553ff63732999f67b61811261376aedcc8f850df4c87e2ef53401a75b"),
    "xlsa17/awa1-ps-val2.yaml": ("d44ba77828eee9a2910e89cbe6f994e5a16b94a88b0acdfbf9d3d9049f5c9d3e", "7ab578493cb7ef4ae48022a876af0b08cfb7664433246615a89faaa81984974d"),
    "xlsa17/awa1-ps-val3.yaml": ("d424407caa8cccb66c35b4780252b9b1d6894733178e9aebae020cb0cd815962", "aaeba293631b6f436ab7b175074a280c922b0145353737ace6dd0a056a9f6c6b"),
    "xlsa17/awa1-ps.yaml": ("1cb95bf09d2c4a6f5764a618d1d97d31c30721a79401320243848da05afb5701", "34c6d059c74ac45d8fdfe563591375e05a835396a9bb9e2a2f663ba538bbdb56"),
    "xlsa17/awa1-ss.yaml": ("455357b5b82c4d8053fedb760a301fcf04b9bc17d4a414cc08666246d77ec4da", "a77108d16d7b9d11fa490cdc94a2a28e8f35cfccb26726f20048746cb77fd618"),
    "xlsa17/awa2-ps-val2.yaml": ("dca421d5ee470e2e341dd9d7d67fc3d00293fd2e967cddd385876620f413951a", "cbeabcba905589d94240f8e9becd4749e9efb161a76c0d01d05b8e73fe2924b8"),
    "xlsa17/awa2-ps-val3.yaml": ("4ef3c533cb5f29f8f110bcb19a349bff519d3f75a2456bae0a233c7f03c539cf", "7353ee9eb8fdef7c9c304e2d7efc2f86632cc57131d5a889a2264c0878b83838"),
    "xlsa17/awa2-ps.yaml": ("a4b74551fee08ba68a38c703f20c4d873b50ea27cb95748f6d40cab11cc58699", "ff4ec927e9e554034b762c81089b2f047be83cff7541b586fa5be0db6e858695"),
    "xlsa17/awa2-ss.yaml": ("608b7cb388dd99c8d1ce2f144f2e6a521aeff8bace8b62f0b411f59f733faa2c", "aec35183d4beabf68ebfbecaf81e496d90c1212b76a4945a111c5047f5b049ff"),
    "xlsa17/cub-ps-val2.yaml": ("f0e683676578c6f1e91448b023f5b03482a95504c82559174b123790cb889dc5", "3f3cfe42578c2c6f842e02a87e20ce838b6249b4d1d4911f3c42d1ab847fd9d1"),
    "xlsa17/cub-ps-val3.yaml": ("a8e80499cd73f61584acc7f8301d62187ac130ac58da29f9f130ad4ccd6a685e", "cf7944b62e306d42650e16e505235dc70fe603bcf06483dba419f7719f32093c"),
    "xlsa17/cub-ps.yaml": ("c9c76445a6d60c7cdaeaa23f19cc2e90845b1872ab7677ae455854baf0acd802", "251b0357d1a85db8ee00b8948e8e94f92818b921a02e3dfca05386204bb053f3"),
    "xlsa17/cub-ss.yaml": ("94d7f7e6df235f7cb88e9f28f576d3fbdc28e7d61e5b5bfd55c04657b1f5da5d", "cbe3a427ef68bf4e58c6a43321f3caf1ae613ccf6d4db6a5027c650fc85db6a6"),
    "xlsa17/sun-ps-val2.yaml": ("b0c5a54f2ffe67800a2e0ca51d7f4a2cfb12c64318ad8c7bc3a2a975ba0fea1d", "2ba2ca5f8ed8cb6b351dbce2404c45b2901a18eed06bcb85a47c8e589c438dd5"),
    "xlsa17/sun-ps-val3.yaml": ("1b4ee978907d87e3e42d426579df7b17764bb5d78dda77514ed65d491a791611", "6f14099b35f6873bb4f4dfb7d136cfd1a53c0f9438c6da9d5148285f8ae75291"),
    "xlsa17/sun-ps.yaml": ("dbdcd090e121519615a37aa06d0f1634d49fb4fd7bff935926ed5803f9d6cbd4", "4ffbe06ea70f8db0b8355bd11820e31ee57ebb71202379b87cc0337a34fb0518"),
    "xlsa17/sun-ss.yaml": ("0019f3e22d5f52d3a90703dfc0decd7d74ff6b4489cacd5f2f494e1608447d1a", "2cf20a664ca7a7cb0a8a79bfc0707f63f9636fd83d49d3c13a62b53ba9718094"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HASHES))
def test_the_shipped_specs_keep_their_hashes(name: str) -> None:
    spec = load_spec(SPECS / name)
    assert all(e.kind == "attributes" for e in spec.class_embeddings)  # the default kind
    assert (spec.spec_hash(), spec.data_hash()) == tuple(f"sha256:{h}" for h in HASHES[name])


def _demo_with(tmp_path: Path, **entry: object) -> Spec:
    """The demo spec with its class embedding's entry updated by ``entry``, loaded from a file."""
    data = yaml.safe_load(DEMO.read_text())
    data["class_embeddings"][0].update(entry)
    data["hierarchy"]["file"] = str(SPECS / "demo" / "hierarchy.json")
    path = tmp_path / f"demo-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def test_a_kind_is_hashed_only_when_it_is_not_the_default(tmp_path: Path) -> None:
    plain, explicit = _demo_with(tmp_path), _demo_with(tmp_path, kind="attributes")
    assert explicit.spec_hash() == plain.spec_hash()
    # As wide as the features, as a clip-text embedding must be (the demo's are 128-d).
    wide, clip = _demo_with(tmp_path, dim=128), _demo_with(tmp_path, dim=128, kind="clip-text")
    # Which packages may run on it changes, so the spec hash does; no array changes.
    assert clip.spec_hash() != wide.spec_hash()
    assert clip.data_hash() == wide.data_hash()


def test_an_unknown_kind_is_refused_with_the_file_line_and_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        _demo_with(tmp_path, kind="clip-txt")
    written = (tmp_path / "demo-0.yaml").read_text().splitlines()
    line = written.index("  kind: clip-txt") + 1
    assert (
        f"demo-0.yaml:{line}: class_embeddings[0].kind: must be one of 'attributes',"
        " 'word-vectors', 'sentence', 'clip-text'; got 'clip-txt'. Did you mean 'clip-text'?"
    ) in str(err.value)


def test_an_unknown_declaration_is_refused_with_the_file_line_and_key(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    (package / "model.py").write_text((SUBMISSIONS / "clip-zero-shot" / "model.py").read_text())
    manifest = (SUBMISSIONS / "clip-zero-shot" / "submission.yaml").read_text()
    (package / "submission.yaml").write_text(manifest.replace(": clip-text", ": clip"))
    line = manifest.splitlines().index("  class_embedding: clip-text") + 1
    with pytest.raises(SubmissionError) as err:
        load_package(package)
    allowed = ", ".join(repr(u) for u in CLASS_EMBEDDING_USES)
    assert (
        f"submission.yaml:{line}: declarations.class_embedding: must be one of {allowed}; got"
        " 'clip'. Did you mean 'clip-text'?"
    ) in str(err.value)
    assert ("default", "none", *EMBEDDING_KINDS) == CLASS_EMBEDDING_USES


# -- which embeddings a package sees ----------------------------------------------------------

THREE_EMBEDDINGS = """\
benchmark: three
version: 1
title: three embeddings
data: {adapter: feature-set}
features: {name: f, dim: 8, backbone: b, pretrained_on: {class_set: none}}
class_embeddings:
  - {name: attributes, dim: 3, default: true}
  - {name: photo, dim: 8, kind: clip-text}
  - {name: imagenet-80, dim: 8, kind: clip-text}
settings: [zsl]
metrics: [{name: per_class_top_k_accuracy, key: top1, k: 1}]
primary: {zsl: top1}
"""


def test_a_kind_gives_the_embeddings_of_that_kind_only() -> None:
    spec = parse_spec(THREE_EMBEDDINGS)
    everything = EmbeddingChoice(("attributes", "photo", "imagenet-80"), "attributes")
    assert embeddings_for("default", spec, package="p") == everything
    assert embeddings_for("none", spec, package="p") == EmbeddingChoice((), "")  # given none
    # The spec's default is no clip-text embedding: the first clip-text one stands in.
    clip = EmbeddingChoice(("photo", "imagenet-80"), "photo")
    assert embeddings_for("clip-text", spec, package="p") == clip
    assert embeddings_for("attributes", spec, package="p") == EmbeddingChoice(
        ("attributes",), "attributes"
    )
    moved = parse_spec(
        THREE_EMBEDDINGS.replace("3, default: true}", "3}").replace(
            "imagenet-80, dim: 8,", "imagenet-80, dim: 8, default: true,"
        )
    )
    assert embeddings_for("clip-text", moved, package="p").default == "imagenet-80"
    with pytest.raises(
        NotApplicableError,
        match=r"^package 'p' declares class_embedding: sentence, but benchmark 'three' v1 has no class embedding of kind 'sentence' \(it has attributes \(kind attributes\), photo \(kind clip-text\), imagenet-80 \(kind clip-text\)\)",
    ):
        embeddings_for("sentence", spec, package="p")


# -- refused by zsl run, skipped by the demo and the matrix, not applicable in CI ------------


def test_zsl_run_refuses_a_package_whose_kind_the_benchmark_lacks() -> None:
    result = CliRunner().invoke(
        app, ["run", str(SUBMISSIONS / "clip-zero-shot"), "--spec", str(DEMO), "--no-store"]
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    message = " ".join(result.output.split())
    assert (
        f"error: package 'clip-zero-shot' declares class_embedding: clip-text, but benchmark"
        f" 'demo' v1 (spec {DEMO.resolve()}) has no class embedding of kind 'clip-text' (it has"
        " attributes (kind attributes)); run it on a benchmark whose spec lists a class"
        " embedding with kind: clip-text"
    ) in message


def test_only_the_clip_packages_are_not_applicable_to_the_demo() -> None:
    # What `zsl demo` asks of each shipped package before running it.
    demo = load_spec(DEMO)
    declared = {
        p.parent.name: load_package(p.parent).manifest.declarations.class_embedding
        for p in SUBMISSIONS.glob("*/submission.yaml")
    }
    left_out = {name for name, uses in declared.items() if not_applicable_reason(uses, demo)}
    assert left_out == set(CLIP_PACKAGES)
    check_applicable("eszsl", declared["eszsl"], demo)  # refuses nothing


def test_the_demo_skips_the_clip_packages_with_one_line_each(tmp_path: Path) -> None:
    # `zsl demo` over a folder of the two packages (the shipped demo's records are held to the
    # committed ones by tests/test_demo_records.py, which a record of theirs would break).
    for name in CLIP_PACKAGES:
        shutil.copytree(SUBMISSIONS / name, tmp_path / "submissions" / name)
    result = CliRunner().invoke(
        app,
        [
            "demo",
            "--spec",
            str(DEMO),
            "--submissions",
            str(tmp_path / "submissions"),
            "--out",
            str(tmp_path / "site"),
            "--database-url",
            f"sqlite:///{tmp_path / 'runs.sqlite3'}",
        ],
    )
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    for name in CLIP_PACKAGES:
        assert (
            f"note: skipped {name}: not applicable: benchmark 'demo' v1 has no class embedding"
            " of kind 'clip-text' (it has attributes (kind attributes))"
        ) in output
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_matrix_leaves_out_the_pairs_a_package_cannot_run() -> None:
    eszsl, clip = SUBMISSIONS / "eszsl", SUBMISSIONS / "clip-zero-shot"
    assert _applicable_pairs([eszsl, clip], [DEMO]) == [(eszsl, DEMO)]


def test_ci_reports_a_package_for_no_listed_benchmark_as_not_applicable() -> None:
    uses = {"submissions/clip-zero-shot": "clip-text", "submissions/eszsl": "default"}
    reasons = _not_applicable(uses, [DEMO], [REPO])
    assert list(reasons) == [("submissions/clip-zero-shot", DEMO)]
    why = reasons["submissions/clip-zero-shot", DEMO]
    assert why.startswith("specs/demo.yaml: benchmark 'demo' v1 has no class embedding of kind")
    outcome = _package_outcome(
        "submissions/clip-zero-shot", [], repo_root=REPO, spec_root=REPO, not_applicable=[why]
    )
    assert outcome == PackageOutcome("submissions/clip-zero-shot", "not-applicable", why)
    assert not outcome.failed
    ok = PackageOutcome("submissions/eszsl", "ok", "scored on demo v1")
    report = render_report([ok, outcome], "")
    assert "All 1 changed packages passed." in report
    assert "1 package not applicable to any benchmark CI scores on" in report
    assert "| submissions/clip-zero-shot | ➖ not applicable: specs/demo.yaml: benchmark" in report


# -- the packages, by hand --------------------------------------------------------------------


def _package(name: str) -> ModuleType:
    path = SUBMISSIONS / name / "model.py"
    spec = importlib.util.spec_from_file_location(f"clip_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _task(
    embeddings: dict[str, np.ndarray],
    default: str,
    *,
    val_features: np.ndarray,
    val_labels: np.ndarray,
    val_classes: np.ndarray,
    n_classes: int,
) -> TrainTask:
    """A TrainTask whose training images are NaN: whatever a package computed from them would
    be NaN, and the exact expectations below would fail."""
    width = val_features.shape[1]
    return TrainTask(
        train_features=np.full((4, width), np.nan, dtype=np.float32),
        train_labels=np.zeros(4, dtype=np.int64),
        val_features=val_features.astype(np.float32),
        val_labels=val_labels,
        train_classes=np.array([0]),
        val_classes=val_classes,
        class_ids=np.array([f"c{i}" for i in range(n_classes)]),
        class_names=np.array([f"class {i}" for i in range(n_classes)]),
        class_embeddings=embeddings,
        default_embedding=default,
        hierarchy=None,
        seed=0,
    )


TEXT = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])  # 3 classes, 2-d
IMAGES = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 0.0]], dtype=np.float32)


def test_clip_zero_shot_scores_logit_scale_times_the_cosine() -> None:
    model = _package("clip-zero-shot").CLIPZeroShot()
    task = _task(
        {"photo": TEXT},
        "photo",
        val_features=IMAGES[:1],
        val_labels=np.array([1]),
        val_classes=np.array([1]),
        n_classes=3,
    )
    model.fit(task)
    assert model.hyperparameters_ == {"logit_scale": 100.0, "template_set": "photo"}
    scores = model.predict(IMAGES, np.array([2, 0]))  # columns: classes 2 then 0
    r = 1 / np.sqrt(2)
    expected = 100 * np.array([[0.6 * r + 0.8 * r, 0.6], [r, 1.0], [0.0, 0.0]])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, expected, rtol=1e-6)  # a zero image: zeros, not NaN
    half = _package("clip-zero-shot").CLIPZeroShot(logit_scale=50.0)
    half.fit(task)
    np.testing.assert_allclose(half.predict(IMAGES, np.array([2, 0])), expected / 2, rtol=1e-6)


def test_clip_features_of_another_width_are_refused() -> None:
    module = _package("clip-zero-shot")
    task = _task(
        {"photo": np.ones((3, 5))},
        "photo",
        val_features=IMAGES[:1],
        val_labels=np.array([1]),
        val_classes=np.array([1]),
        n_classes=3,
    )
    with pytest.raises(
        ValueError, match=r"2-d image features, but the clip-text class embedding is 5-d"
    ):
        module.CLIPZeroShot().fit(task)
    with pytest.raises(ValueError, match=r"logit_scale: expected a finite positive number"):
        module.CLIPZeroShot(logit_scale=0.0)


def _two_template_sets(rng: np.random.Generator) -> tuple[TrainTask, np.ndarray]:
    """Eight classes (5, 6 validation; 7 a test class): ``photo`` mislabels the validation
    classes, ``imagenet-80`` is right on them. Returns the task and the class prototypes."""
    prototypes = np.linalg.qr(rng.normal(size=(8, 8)))[0]  # orthonormal class directions
    photo, imagenet = prototypes.copy(), prototypes.copy()
    photo[[5, 6]] = prototypes[[6, 5]]
    labels = np.repeat([5, 6], 10)
    images = prototypes[labels] + 0.05 * rng.normal(size=(20, 8))
    task = _task(
        {"photo": photo, "imagenet-80": imagenet},
        "photo",
        val_features=images,
        val_labels=labels,
        val_classes=np.array([5, 6]),
        n_classes=8,
    )
    return task, prototypes


def test_template_selection_keeps_the_set_best_on_the_validation_classes() -> None:
    module = _package("clip-template-selection")
    task, prototypes = _two_template_sets(np.random.default_rng(0))
    model = module.CLIPTemplateSelection()
    model.fit(task)  # its training images are NaN: never read
    assert model.val_accuracies_ == {"photo": 0.0, "imagenet-80": 1.0}
    assert model.hyperparameters_ == {
        "template_set": "imagenet-80",
        "val_accuracy": 1.0,
        "template_sets_compared": 2,
        "logit_scale": 100.0,
    }
    # A test class's row takes no part: imagenet-80's row of class 7 made as wrong as can be
    # (photo's is right), the choice stays.
    rows = dict(task.class_embeddings)
    rows["imagenet-80"] = rows["imagenet-80"].copy()
    rows["imagenet-80"][7] = -prototypes[7]
    again = module.CLIPTemplateSelection()
    again.fit(replace(task, class_embeddings=rows))
    assert again.template_set_ == "imagenet-80"
    # Prediction is CLIP zero-shot with the chosen set.
    zero_shot = _package("clip-zero-shot").CLIPZeroShot()
    only = {"imagenet-80": rows["imagenet-80"]}
    zero_shot.fit(replace(task, class_embeddings=only, default_embedding="imagenet-80"))
    images, candidates = np.eye(8, dtype=np.float32), np.arange(8)
    np.testing.assert_array_equal(
        again.predict(images, candidates), zero_shot.predict(images, candidates)
    )


def test_template_selection_breaks_ties_towards_the_default_then_the_first() -> None:
    module = _package("clip-template-selection")
    task, _ = _two_template_sets(np.random.default_rng(1))
    same = task.class_embeddings["imagenet-80"]
    tied = {"first": same, "second": same, "third": same}
    for default, chosen in (("second", "second"), ("elsewhere", "first")):
        model = module.CLIPTemplateSelection()
        model.fit(replace(task, class_embeddings=tied, default_embedding=default))
        assert model.template_set_ == chosen


@pytest.mark.parametrize("name", CLIP_PACKAGES)
def test_the_fitted_state_round_trips(name: str, tmp_path: Path) -> None:
    module = _package(name)
    model_class = next(v for k, v in vars(module).items() if k.startswith("CLIP"))
    task, _ = _two_template_sets(np.random.default_rng(2))
    model = model_class(logit_scale=42.0)
    model.fit(task)
    model.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.npz"]
    loaded = model_class.load(tmp_path)
    images = np.random.default_rng(3).normal(size=(5, 8)).astype(np.float32)
    candidates = np.array([7, 0, 5])
    np.testing.assert_array_equal(
        loaded.predict(images, candidates), model.predict(images, candidates)
    )
    assert (loaded.logit_scale, loaded.template_set_) == (42.0, model.template_set_)


# -- end to end on a synthetic feature set with three embeddings ----------------------------

N_CLASSES, WIDTH, PER_CLASS = 10, 8, 12
UNSEEN, VAL = ("c7", "c8", "c9"), ("c5", "c6")


#: The model both towers of the synthetic benchmark claim to come from (its features' backbone
#: and weights, its prompt embeddings' ``clip`` provenance).
TOWERS = {
    "arch": "tiny",
    "weights": {"source": "file", "name": "tiny.pt", "sha256": "sha256:" + "ab" * 32},
}


def _prompt_provenance(name: str, **clip: object) -> dict[str, object]:
    """A clip-text set's provenance as ``zsl embeddings build --model clip-text`` writes it (the
    parts the adapter reads), with ``clip`` overriding :data:`TOWERS`."""
    templates = ["a photo of a {}."]
    return {
        "model": "clip-text",
        "clip": {**TOWERS, **clip},
        "templates": {
            "name": name,
            "source": "preset",
            "count": 1,
            "sha256": "sha256:" + "cd" * 32,
            "templates": templates,
        },
    }


def _synthetic_benchmark(
    root: Path, provenance: dict[str, dict[str, object]] | None = None
) -> Path:
    """A feature-set spec with CLIP-like features and two clip-text template sets: ``photo``
    mislabels the validation classes and is right on the unseen ones, ``imagenet-80`` the other
    way round; plus a 3-d attribute embedding (the spec's default). ``provenance`` replaces a
    set's provenance by name."""
    rng = np.random.default_rng(0)
    prototypes = np.linalg.qr(rng.normal(size=(WIDTH, WIDTH)))[0]
    prototypes = np.vstack([prototypes, -prototypes[:2]])  # 10 classes, 8-d
    labels = np.repeat(np.arange(N_CLASSES), PER_CLASS)
    features = prototypes[labels] + 0.05 * rng.normal(size=(len(labels), WIDTH))
    ids = np.array([f"c{i}" for i in range(N_CLASSES)])
    write_set(
        root / "features",
        {"features": features.astype(np.float32), "labels": labels, "class_ids": ids},
        "features",
        {
            "backbone": {"name": f"open_clip:{TOWERS['arch']}", "layer": "encode_image"},
            "weights": TOWERS["weights"],
            "pretrained_on": {"class_set": "none"},
            "preprocessing": {},
            "preprocessing_summary": "",
            "precision": "fp32",
            "device": "cpu",
            "images": {"count": len(labels)},
            "skipped": [],
            "versions": {},
        },
    )
    photo, imagenet = prototypes.copy(), prototypes.copy()
    photo[[5, 6]] = prototypes[[6, 5]]
    imagenet[[7, 8, 9]] = prototypes[[8, 9, 7]]
    tables = {"photo": photo, "imagenet-80": imagenet, "attributes": rng.normal(size=(10, 3))}
    for name, table in tables.items():
        arrays = {"embeddings": table.astype(np.float32), "class_ids": ids, "class_names": ids}
        made = _prompt_provenance(name) if name != "attributes" else {"model": "synthetic"}
        made = (provenance or {}).get(name, made)
        write_set(root / name, arrays, "class-embeddings", made)
    (root / "unseen.txt").write_text("\n".join(UNSEEN) + "\n")
    (root / "val.txt").write_text("\n".join(VAL) + "\n")
    spec = f"""\
benchmark: clip-synthetic
version: 1
title: CLIP-like synthetic features with two template sets
experimental: true
data:
  adapter: feature-set
  params:
    features: features
    embeddings: {{attributes: {{path: attributes}}, photo: {{path: photo}}, imagenet-80: {{path: imagenet-80}}}}
    unseen_classes: unseen.txt
    val_classes: val.txt
features: {{name: synthetic-clip, dim: {WIDTH}, backbone: open_clip:tiny, pretrained_on: {{class_set: none}}}}
class_embeddings:
  - {{name: attributes, dim: 3, default: true}}
  - {{name: photo, dim: {WIDTH}, kind: clip-text}}
  - {{name: imagenet-80, dim: {WIDTH}, kind: clip-text}}
settings: [zsl]
metrics: [{{name: per_class_top_k_accuracy, key: top1, k: 1}}]
primary: {{zsl: top1}}
uncertainty: {{n_boot: 0}}
"""
    (root / "spec.yaml").write_text(spec)
    return root / "spec.yaml"


@pytest.mark.parametrize(
    ("name", "provenance", "message"),
    [
        ("photo", _prompt_provenance("photo", arch="other"), "must be one model's"),
        (
            "photo",
            _prompt_provenance(
                "photo", weights={**TOWERS["weights"], "sha256": "sha256:" + "ef" * 32}
            ),
            "must be one model's",
        ),
        ("imagenet-80", {"model": "glove-6b-50d"}, "kind is clip-text, but its set was built"),
        ("attributes", _prompt_provenance("attributes"), "declare kind: clip-text"),
    ],
    ids=["other-arch", "other-weights", "not-prompts", "prompts-declared-attributes"],
)
def test_prompt_embeddings_must_come_from_the_image_features_model(
    tmp_path: Path, name: str, provenance: dict[str, object], message: str
) -> None:
    spec = load_spec(_synthetic_benchmark(tmp_path / "data", {name: provenance}))
    with pytest.raises(SpecError, match=message) as caught:
        load_benchmark(spec)
    assert f"class_embeddings '{name}'" in str(caught.value) and str(spec.path) in str(caught.value)


def test_a_package_declaring_a_kind_gets_only_those_embeddings(tmp_path: Path) -> None:
    bench = load_benchmark(load_spec(_synthetic_benchmark(tmp_path / "data")))
    choice = embeddings_for("clip-text", bench.spec, package="clip-zero-shot")
    write_model_bundles(bench, tmp_path / "b", tmp_path / "secret", embeddings=choice)
    task = Bundle(tmp_path / "b" / "main").train_task()
    assert list(task.class_embeddings) == ["photo", "imagenet-80"]
    assert task.default_embedding == "photo"
    files = sorted(p.name for p in (tmp_path / "b" / "main" / "embeddings").iterdir())
    assert files == ["imagenet-80.npy", "photo.npy"]  # the attributes are not in the bundle
    info = json.loads((tmp_path / "b" / "main" / "task.json").read_text())
    assert (info["embeddings"], info["default_embedding"]) == (["photo", "imagenet-80"], "photo")
    write_model_bundles(bench, tmp_path / "all", tmp_path / "secret-all")
    everything = Bundle(tmp_path / "all" / "main").train_task()
    assert list(everything.class_embeddings) == ["attributes", "photo", "imagenet-80"]
    assert everything.default_embedding == "attributes"


def test_both_packages_run_end_to_end_and_validation_alone_picks_the_set(tmp_path: Path) -> None:
    from harness.pipeline import run_submission

    spec = _synthetic_benchmark(tmp_path / "data")
    runs = {
        name: run_submission(SUBMISSIONS / name, spec, runner="local", store=False, quiet=True)
        for name in CLIP_PACKAGES
    }
    top1 = {n: next(s.value for s in r.scores if s.metric == "top1") for n, r in runs.items()}
    chosen = {n: r.hyperparameters["main"]["template_set"] for n, r in runs.items()}
    # clip-zero-shot uses the first clip-text set (photo), right on the unseen classes;
    # validation makes the other package choose imagenet-80, wrong on every unseen class: it
    # never saw them.
    assert chosen == {"clip-zero-shot": "photo", "clip-template-selection": "imagenet-80"}
    assert top1 == {"clip-zero-shot": 1.0, "clip-template-selection": 0.0}
    assert all(r.submission.declarations["class_embedding"] == "clip-text" for r in runs.values())


def test_zsl_ci_pr_passes_a_package_that_applies_to_no_listed_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for role in ("AUTHOR", "COMMITTER"):  # no user identity, configuration or hooks
        monkeypatch.setenv(f"GIT_{role}_NAME", "CI Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "ci@example.org")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = tmp_path / "repo"

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)

    (repo / "specs").mkdir(parents=True)
    shutil.copy(DEMO, repo / "specs" / "demo.yaml")
    shutil.copytree(SPECS / "demo", repo / "specs" / "demo")
    (repo / "leaderboard" / "results").mkdir(parents=True)
    (repo / "leaderboard" / "results" / ".gitkeep").write_text("")
    (repo / "leaderboard" / "ci.yaml").write_text("specs:\n  - specs/demo.yaml\n")
    git("init", "--quiet", "-b", "main")
    git("add", "--all")
    git("commit", "--quiet", "-m", "base")
    git("checkout", "--quiet", "-b", "add-clip")
    shutil.copytree(SUBMISSIONS / "clip-zero-shot", repo / "submissions" / "clip-zero-shot")
    git("add", "--all")
    git("commit", "--quiet", "-m", "add clip-zero-shot")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["ci", "pr", "--base", "main", "--runner", "local", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "not-applicable submissions/clip-zero-shot: specs/demo.yaml: benchmark 'demo' v1" in (
        " ".join(result.stdout.split())
    )
    report = (repo / "build" / "ci" / "leaderboard-diff.md").read_text(encoding="utf-8")
    assert "1 package not applicable to any benchmark CI scores on" in report
    assert "failed" not in report


def test_a_clip_text_embedding_of_another_width_than_the_features_is_refused() -> None:
    wrong = THREE_EMBEDDINGS.replace("{name: imagenet-80, dim: 8,", "{name: imagenet-80, dim: 7,")
    with pytest.raises(SpecError) as err:
        parse_spec(wrong, source="clip.yaml")
    line = wrong.splitlines().index("  - {name: imagenet-80, dim: 7, kind: clip-text}") + 1
    assert (
        f"clip.yaml:{line}: class_embeddings[2].dim: 7, but a clip-text embedding lives in the"
        " image features' space (features.dim 8)"
    ) in str(err.value)
    parse_spec(THREE_EMBEDDINGS.replace("{name: attributes, dim: 3,", "{name: attributes, dim: 7,"))


def test_a_package_declaring_no_embedding_is_given_none(tmp_path: Path) -> None:
    bench = load_benchmark(load_spec(_synthetic_benchmark(tmp_path / "data")))
    choice = embeddings_for("none", bench.spec, package="flat")
    write_model_bundles(bench, tmp_path / "b", tmp_path / "secret", embeddings=choice)
    task = Bundle(tmp_path / "b" / "main").train_task()
    assert task.class_embeddings == {}
    assert not (tmp_path / "b" / "main" / "embeddings").exists()
    with pytest.raises(LookupError, match="declares `class_embedding: none`"):
        task.embedding  # noqa: B018  (the property raises)
