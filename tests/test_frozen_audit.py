"""The leakage audit is frozen with the benchmark (issue 14, item 13).

Before, a run was audited when it was scored, so its badge depended on the scorer's environment:
the xlsa17 AWA2 proposed split showed 3 of 10 test classes seen in pre-training where
ZSL_IMAGENET_DIR and WordNet were set, and "leakage audit unavailable" elsewhere. Now the audit
is made once, by ``zsl data prepare``, stored in the frozen manifest under the benchmark hash, and
every run of the benchmark carries it. These tests freeze the real AWA2 split files (synthetic
features, ``tests/xlsa17_fixture.py``) with and without the audit's inputs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner
from xlsa17_fixture import XLSA17

from harness.audit import (
    AuditInputsMissing,
    AuditStatus,
    LeakageAudit,
    spec_audit,
    unseen_classes_of,
)
from harness.cli.main import app
from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import json_sha256
from harness.data.artifacts import FORMAT, FrozenBenchmark, OutdatedFormatError, benchmark_dir
from harness.data.prepare import PreparedBenchmark, prepare
from harness.hierarchy.class_sets import class_list_sha256, read_wnids
from harness.spec import Spec, load_spec, load_spec_data
from tests.conftest import REPO, SHARED_DATA, WORDNET_DIR, WORDNET_LEXNAMES

XLSA17_SPECS = REPO / "specs" / "xlsa17"
IMAGENET = SHARED_DATA / "imagenet"
DIM = 64
#: ILSVRC-2012 classes that are kinds of AWA2's proposed-split test classes (the spec's
#: description names them): sea lion < seal, sorrel < horse, ram < sheep.
AWA2_PS_LEAKED = {"seal", "horse", "sheep"}

needs_inputs = pytest.mark.skipif(
    not (
        (XLSA17 / "AWA2" / "att_splits.mat").is_file()
        and (IMAGENET / "ilsvrc2012_synsets.txt").is_file()
        and (WORDNET_DIR / "data.noun").is_file()
        and WORDNET_LEXNAMES.is_file()
    ),
    reason="shared xlsa17 split files, ImageNet class lists or WordNet 3.0 absent",
)


def _with_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZSL_IMAGENET_DIR", str(IMAGENET))
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(WORDNET_DIR))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(WORDNET_LEXNAMES))


def _without_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No class lists, no WordNet (a missing directory also rules out NLTK's own copy)."""
    monkeypatch.delenv("ZSL_IMAGENET_DIR", raising=False)
    monkeypatch.setenv("ZSL_WORDNET_DIR", "/nonexistent/wordnet")
    monkeypatch.delenv("ZSL_WORDNET_LEXNAMES", raising=False)


def _awa2_spec(folder: Path, release: Path, **overrides: Any) -> Spec:
    """The shipped AWA2 proposed-split spec, on the fixture release (class ids are WordNet ids)."""
    data = load_spec_data(XLSA17_SPECS / "awa2-ps.yaml")
    data["hierarchy"]["file"] = str(XLSA17_SPECS / data["hierarchy"]["file"])
    data["data"]["params"]["class_map"] = str(XLSA17_SPECS / data["data"]["params"]["class_map"])
    data["data"]["params"]["path"] = str(release)
    data["features"]["dim"] = DIM
    data["uncertainty"]["n_boot"] = 100
    for key, value in overrides.items():
        data[key] = {**data.get(key, {}), **value}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "awa2-ps.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, xlsa17_release: Callable[..., Path]) -> Path:
    root = tmp_path_factory.mktemp("xlsa17")
    xlsa17_release(root, "AWA2", dim=DIM)
    return root


@pytest.fixture(scope="module")
def audited(
    release: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Spec, FrozenBenchmark]]:
    """AWA2 PS frozen once with its audit's inputs, in a home of its own (copied per test)."""
    if not (XLSA17 / "AWA2" / "att_splits.mat").is_file():
        pytest.skip("shared xlsa17 split files absent")
    home = tmp_path_factory.mktemp("audited-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZSL_HOME", str(home))
        _with_inputs(patch)
        spec = _awa2_spec(tmp_path_factory.mktemp("spec"), release)
        yield spec, prepare(spec)


def _copy_frozen(frozen: FrozenBenchmark, home: Path) -> Path:
    """Put a copy of ``frozen`` where ``prepare`` looks for it under ``home``."""
    root = home / frozen.root.relative_to(frozen.root.parents[2])
    shutil.copytree(frozen.root, root)
    return root


# -- the audit frozen, with its inputs' identity -------------------------------------------------


@needs_inputs
def test_freeze_records_the_audit_and_its_inputs(
    audited: tuple[Spec, FrozenBenchmark],
) -> None:
    _, frozen = audited
    audit = frozen.audit
    assert audit.status == AuditStatus.AUDITED
    assert (audit.n_overlap, audit.n_test) == (3, 10)
    assert {c.label for c in audit.leaked} == AWA2_PS_LEAKED
    ilsvrc = read_wnids(IMAGENET / "ilsvrc2012_synsets.txt")
    assert audit.inputs is not None
    assert audit.inputs.class_set == "ilsvrc2012"
    assert audit.inputs.n_pretrained == len(ilsvrc) == 1000
    assert audit.inputs.class_list_sha256 == "sha256:" + class_list_sha256(ilsvrc)
    assert audit.inputs.wordnet_version == "3.0"
    assert audit.inputs.wordnet_map_sha256 is None  # AWA ids are WordNet ids: no audit map
    manifest = json.loads((frozen.root / "manifest.json").read_text())
    assert manifest["format"] == FORMAT == "zsl-frozen/3"
    assert LeakageAudit.model_validate(manifest["leakage_audit"]) == audit


@needs_inputs
def test_same_spec_frozen_twice_with_inputs_gives_the_same_benchmark(
    audited: tuple[Spec, FrozenBenchmark],
    release: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, first = audited
    _with_inputs(monkeypatch)
    again = prepare(_awa2_spec(tmp_path / "other-checkout", release))
    assert again.root != first.root
    assert again.hash == first.hash
    assert again.audit == first.audit


@needs_inputs
@pytest.mark.parametrize(
    ("missing", "named"),
    [("imagenet", "ZSL_IMAGENET_DIR"), ("wordnet", "ZSL_WORDNET_DIR")],
)
def test_freeze_without_the_inputs_is_refused_never_silently_different(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str, named: str
) -> None:
    _with_inputs(monkeypatch)
    if missing == "imagenet":
        monkeypatch.delenv("ZSL_IMAGENET_DIR")
    else:
        monkeypatch.setenv("ZSL_WORDNET_DIR", str(tmp_path / "no-wordnet"))
    spec = _awa2_spec(tmp_path, release)
    with pytest.raises(AuditInputsMissing) as caught:
        prepare(spec)
    message = str(caught.value)
    assert message.startswith(
        "xlsa17-awa2-ps v1: cannot freeze the benchmark with its leakage audit (its test classes"
        " related, through WordNet 3.0, to the ilsvrc2012 classes its features were pre-trained"
        " on): "
    )
    assert named in message
    assert f'`zsl data prepare {spec.path} --no-audit "REASON"`' in message
    assert "recorded as 'not audited: REASON'" in message
    assert not benchmark_dir(spec.benchmark, spec.version).exists()  # nothing was written


@needs_inputs
def test_freezing_without_an_audit_is_explicit_and_changes_the_hash(
    audited: tuple[Spec, FrozenBenchmark],
    release: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, with_audit = audited
    _without_inputs(monkeypatch)
    spec = _awa2_spec(tmp_path / "a", release)
    frozen = prepare(spec, no_audit="no ImageNet class lists on this machine")
    audit = frozen.audit
    assert audit.status == AuditStatus.NOT_AUDITED
    assert audit.error == "no ImageNet class lists on this machine"
    assert audit.summary() == (
        "not audited (ilsvrc2012): frozen without a leakage audit: no ImageNet class lists on"
        " this machine"
    )
    assert not audit.audited and audit.classes == []
    assert frozen.hash != with_audit.hash  # the artifacts differ, and say why
    # A spec that pins the audited hash refuses the unaudited freeze.
    pinned = _awa2_spec(
        tmp_path / "b", release, data={"checksum": with_audit.hash, "adapter": "xlsa17"}
    )
    shutil.rmtree(frozen.root)
    with pytest.raises(IntegrityError, match=r"differs from data\.checksum"):
        prepare(pinned, no_audit="no ImageNet class lists on this machine")


def test_no_audit_needs_a_reason(tmp_path: Path) -> None:
    spec = load_spec(REPO / "specs" / "xlsa17" / "awa2-ps.yaml")
    with pytest.raises(HarnessError, match=r"^--no-audit needs a reason"):
        prepare(spec, no_audit="  ")


# -- runs inherit the frozen audit -------------------------------------------------------------


@pytest.mark.slow  # up to 15 s in `make test-fast` on a busy 2-core machine (issue 28)
@needs_inputs
def test_run_scored_without_the_inputs_inherits_the_frozen_audit(
    audited: tuple[Spec, FrozenBenchmark],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`zsl run` where neither class lists nor WordNet exist: the record carries 3 overlaps."""
    from harness.store import load_runs, open_store

    spec, frozen = audited
    _copy_frozen(frozen, isolated_home)
    _without_inputs(monkeypatch)
    bench = PreparedBenchmark(spec, prepare(spec))
    # What a run scored here got before: the audit made here, unavailable.
    here = spec_audit(spec, *unseen_classes_of(bench))
    assert here.status == AuditStatus.UNAVAILABLE and here.error is not None
    result = CliRunner().invoke(
        app, ["run", str(REPO / "submissions" / "eszsl"), "--spec", str(spec.path)]
    )
    assert result.exit_code == 0, result.output
    (record,) = load_runs(open_store())
    assert record.benchmark.hash == frozen.hash
    assert record.leakage == frozen.audit
    assert record.leakage is not None and record.leakage.n_overlap == 3


# -- the audit cannot be edited afterwards ------------------------------------------------------


def _edit_manifest(root: Path, edit: Any) -> None:
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


@needs_inputs
def test_tampering_with_the_frozen_audit_breaks_the_hash_check(
    audited: tuple[Spec, FrozenBenchmark], isolated_home: Path
) -> None:
    spec, frozen = audited
    root = _copy_frozen(frozen, isolated_home)

    def clean(manifest: dict[str, Any]) -> None:  # "no class leaked"
        manifest["leakage_audit"]["classes"] = []

    _edit_manifest(root, clean)
    with pytest.raises(IntegrityError, match="manifest hash mismatch") as caught:
        prepare(spec)
    assert "the leakage audit" in str(caught.value)
    result = CliRunner().invoke(app, ["data", "verify", str(spec.path)])
    assert result.exit_code == 2 and "manifest hash mismatch" in result.output


def test_tampering_with_a_not_applicable_audit_breaks_the_hash_check(
    isolated_home: Path,
) -> None:
    spec = load_spec(REPO / "specs" / "demo.yaml")
    frozen = prepare(spec)

    def claim_audited(manifest: dict[str, Any]) -> None:
        manifest["leakage_audit"]["status"] = "audited"

    _edit_manifest(frozen.root, claim_audited)
    with pytest.raises(IntegrityError, match="manifest hash mismatch"):
        FrozenBenchmark(frozen.root)


@needs_inputs
def test_a_frozen_audit_made_under_another_rule_is_refused(
    audited: tuple[Spec, FrozenBenchmark],
    release: Path,
    isolated_home: Path,
    tmp_path: Path,
) -> None:
    _, frozen = audited
    _copy_frozen(frozen, isolated_home)
    spec = _awa2_spec(tmp_path, release, audit={"match": "exact"})
    with pytest.raises(IntegrityError, match=r"leakage audit made under another audit\.match"):
        prepare(spec)


# -- benchmarks without a pre-trained backbone, older formats ------------------------------------


def test_demo_records_not_applicable_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without_inputs(monkeypatch)
    spec = load_spec(REPO / "specs" / "demo.yaml")
    frozen = prepare(spec)
    assert frozen.audit.status == AuditStatus.NOT_APPLICABLE
    assert frozen.audit.summary() == (
        "not applicable: the features were not pre-trained on a class set"
    )
    assert frozen.hash == spec.data.checksum  # the pinned hash covers the audit
    # --no-audit does not apply to it: one frozen form per spec.
    monkeypatch.setenv("ZSL_HOME", str(tmp_path / "home"))
    assert prepare(spec, no_audit="anything").hash == frozen.hash


def _as_format_1(root: Path) -> None:
    """Rewrite a frozen manifest as the harness of format 1 wrote it (no audit, entries hash)."""

    def downgrade(manifest: dict[str, Any]) -> None:
        del manifest["leakage_audit"], manifest["raw_inputs"]
        manifest["format"] = "zsl-frozen/1"
        manifest["hash"] = json_sha256(
            {name: manifest["artifacts"][name] for name in sorted(manifest["artifacts"])}
        )

    _edit_manifest(root, downgrade)


def _as_format_2(root: Path) -> None:
    """Rewrite a frozen manifest as the harness of format 2 wrote it (no raw inputs)."""

    def downgrade(manifest: dict[str, Any]) -> None:
        del manifest["raw_inputs"]
        manifest["format"] = "zsl-frozen/2"

    _edit_manifest(root, downgrade)


@pytest.mark.parametrize(
    ("downgrade", "found", "why"),
    [
        (
            _as_format_1,
            "zsl-frozen/1",
            "it holds no leakage audit (its runs were audited when scored, so their badge"
            " depended on the scorer's environment)",
        ),
        (
            _as_format_2,
            "zsl-frozen/2",
            "it does not record where its raw inputs came from (a release, a synthetic stand-in,"
            " generated or your own data) nor the hashes of the files it was frozen from",
        ),
    ],
)
def test_a_benchmark_of_an_older_format_is_refused_with_the_command_to_freeze_it_again(
    isolated_home: Path, downgrade: Callable[[Path], None], found: str, why: str
) -> None:
    spec = load_spec(REPO / "specs" / "demo.yaml")
    frozen = prepare(spec)
    root, before = frozen.root, frozen.hash
    downgrade(root)
    expected = (
        f"{root} was frozen by an older harness (format '{found}'; this harness reads"
        f" 'zsl-frozen/3'): {why}. Nothing is converted silently: freeze it again,"
        f" `zsl data prepare {spec.path} --refresh` (the benchmark hash stays the same when the"
        " raw inputs are the same)"
    )
    with pytest.raises(OutdatedFormatError) as caught:
        prepare(spec)
    assert str(caught.value) == expected
    with pytest.raises(OutdatedFormatError, match=r"zsl data prepare SPEC --refresh`"):
        FrozenBenchmark(root)
    result = CliRunner().invoke(app, ["data", "prepare", str(spec.path)])
    assert result.exit_code == 1
    assert "was frozen by an older harness" in result.output
    # The command it names works, and the hash it promises holds.
    result = CliRunner().invoke(app, ["data", "prepare", str(spec.path), "--refresh"])
    assert result.exit_code == 0, result.output
    assert FrozenBenchmark(root).hash == before
    assert "leakage audit: not applicable" in result.output


def test_records_of_older_harnesses_keep_their_meaning() -> None:
    """Records scored before the audit was frozen carry no status: it is derived."""
    unavailable = LeakageAudit.model_validate(
        {"source": "ilsvrc2012", "n_test": 10, "error": "no WordNet database found"}
    )
    assert unavailable.status == AuditStatus.UNAVAILABLE and not unavailable.audited
    assert unavailable.summary().startswith("leakage audit unavailable (ilsvrc2012)")
    clean = LeakageAudit.model_validate({"source": "ilsvrc2012", "n_test": 10})
    assert clean.status == AuditStatus.AUDITED and clean.inputs is None
    none = LeakageAudit.model_validate({"source": "none", "n_test": 10})
    assert none.status == AuditStatus.NOT_APPLICABLE


# -- the CLI -------------------------------------------------------------------------------------


@needs_inputs
def test_cli_prepare_refuses_then_freezes_without_an_audit_on_request(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_inputs(monkeypatch)
    spec = _awa2_spec(tmp_path, release)
    refused = CliRunner().invoke(app, ["data", "prepare", str(spec.path)])
    assert refused.exit_code == 1
    assert "cannot freeze the benchmark with its leakage audit" in refused.output
    assert "--no-audit" in refused.output
    done = CliRunner().invoke(
        app, ["data", "prepare", str(spec.path), "--no-audit", "no class lists here"]
    )
    assert done.exit_code == 0, done.output
    output = " ".join(done.output.split())
    assert "leakage audit: not audited (ilsvrc2012): frozen without a leakage audit: no class" in (
        output
    )
    root = benchmark_dir(spec.benchmark, spec.version)
    assert f"to freeze it with its audit: rm -r {root} && zsl data prepare {spec.path}" in output


@pytest.mark.skipif(os.name != "posix", reason="paths")
def test_cli_prepare_prints_the_frozen_audit_of_the_demo() -> None:
    result = CliRunner().invoke(app, ["data", "prepare", str(REPO / "specs" / "demo.yaml")])
    assert result.exit_code == 0, result.output
    assert "leakage audit: not applicable: the features were not pre-trained on a class set" in (
        result.output
    )


# -- the site shows the benchmark's frozen audit -------------------------------------------------


def _site_pages(tmp_path: Path, audit: LeakageAudit) -> tuple[str, str]:
    from harness.site import build_site
    from tests.site_records import make_record

    records = [
        make_record("a", zsl={"top1": 0.5}, leakage=audit),
        make_record("b", zsl={"top1": 0.4}, leakage=audit),
    ]
    build_site(records, tmp_path / "site")
    bench = (tmp_path / "site" / "benchmarks" / "cub-demo-v1.html").read_text(encoding="utf-8")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    return bench, index


def test_site_shows_where_the_frozen_audit_comes_from(tmp_path: Path) -> None:
    from harness.audit import AuditInputs, ClassAudit, Relation, Relative

    sea_lion = Relative(wordnet_id="n02077923", name="sea lion", relation=Relation.HYPONYM, hops=2)
    audit = LeakageAudit(
        source="ilsvrc2012",
        n_test=10,
        status=AuditStatus.AUDITED,
        inputs=AuditInputs(
            class_set="ilsvrc2012",
            n_pretrained=1000,
            class_list_sha256="sha256:" + "c" * 64,
            wordnet_version="3.0",
        ),
        classes=[
            ClassAudit(
                class_id="n04131690",
                name="seal",
                wordnet_id="n04131690",
                mapping="id",
                counts={Relation.HYPONYM: 1},
                relatives=[sea_lion],
            )
        ],
    )
    bench, index = _site_pages(tmp_path, audit)
    badge = "leakage: 1 of 10 test classes seen in pre-training"
    assert badge in bench and badge in index
    assert (
        "(audited when the benchmark was frozen, from class set ilsvrc2012 (1000 classes, list"
        f" sha256:{'c' * 64}); WordNet 3.0)"
    ) in bench


def test_site_says_not_applicable_and_not_audited(tmp_path: Path) -> None:
    not_applicable = LeakageAudit(source="none", n_test=10, status=AuditStatus.NOT_APPLICABLE)
    bench, index = _site_pages(tmp_path / "a", not_applicable)
    assert "not applicable: the benchmark&#39;s features were not pre-trained on a class set" in (
        bench
    )
    assert "leakage" not in index.split("<tbody", 1)[-1].split("</tbody>", 1)[0].lower()

    not_audited = LeakageAudit(
        source="ilsvrc2012",
        n_test=10,
        status=AuditStatus.NOT_AUDITED,
        error="no ImageNet class lists here",
    )
    bench, index = _site_pages(tmp_path / "b", not_audited)
    title = 'title="frozen without a leakage audit: no ImageNet class lists here"'
    assert f"{title}><bdi>not audited</bdi></span>" in bench  # the benchmark's, and each run's
    assert f"{title}>not audited</span>" in index
    assert "leakage audit unavailable" not in bench
