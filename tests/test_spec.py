"""Spec loading: the shipped specs validate; each malformed spec gets its precise message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.spec import json_schema, load_spec, parse_spec, spec_files
from tests.conftest import SPECS

DEMO_TEXT = (SPECS / "demo.yaml").read_text()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    (tmp_path / "demo").mkdir(exist_ok=True)
    (tmp_path / "demo" / "hierarchy.json").write_text(
        (SPECS / "demo" / "hierarchy.json").read_text()
    )
    path.write_text(text)
    return path


def _line(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def test_demo_spec_is_valid() -> None:
    spec = load_spec(SPECS / "demo.yaml")
    assert spec.benchmark == "demo"
    assert spec.settings == ["zsl", "gzsl"]
    zsl = [m.result_key for m in spec.metrics_for("zsl")]
    gzsl = [m.result_key for m in spec.metrics_for("gzsl")]
    assert zsl[:4] == ["top1", "top5", "hp@2", "hp@5"] and "darts" in zsl and "H" not in zsl
    assert gzsl == ["top1", "seen", "unseen", "H", "AUSUC", "cH"]
    # GZSL-only metrics entries without `settings` apply only where the metric applies.
    assert spec.validation_settings() == ["zsl_val", "gzsl_val"]
    assert spec.scale_settings() == ["scale", "scale_val"]
    assert spec.prediction_settings() == [
        "zsl",
        "gzsl",
        "scale",
        "zsl_val",
        "gzsl_val",
        "scale_val",
    ]
    assert spec.default_embedding == "attributes"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", spec.spec_hash())


# Each case: (id, text transformation, the needle whose line the error must name, message regex).
CASES = [
    (
        "unknown-top-level-key",
        lambda t: t.replace("metrics:\n", "metric:\n  - name: x\nmetrics:\n", 1),
        "metric:",
        r"metric: unknown key 'metric'\. Did you mean 'metrics'\? Allowed keys: audit, benchmark,",
    ),
    (
        "metric-param-out-of-range",
        lambda t: t.replace("    key: top5\n    k: 5", "    key: top5\n    k: 0"),
        "k: 0",
        r"metrics\[1\]\.k: Input should be greater than or equal to 1; got 0",
    ),
    (
        "unknown-metric-name",
        lambda t: t.replace("name: gzsl_harmonic_mean", "name: gzsl_harmonic_men"),
        "gzsl_harmonic_men",
        r"metrics\[\d+\]\.name: unknown metric 'gzsl_harmonic_men'\. Did you mean 'gzsl_harmonic_mean'\?",
    ),
    (
        "unknown-metric-param",
        lambda t: t.replace("    key: top1\n    k: 1", "    key: top1\n    kk: 1"),
        "kk: 1",
        r"metrics\[0\]\.kk: unknown key for metric 'per_class_top_k_accuracy'",
    ),
    (
        "missing-required-key",
        lambda t: t.replace("benchmark: demo\n", ""),
        None,
        r"bad\.yaml:\d+: benchmark: required key is missing",
    ),
    (
        "version-not-positive",
        lambda t: t.replace("version: 1\n", "version: 0\n"),
        "version: 0",
        r"version: Input should be greater than 0; got 0",
    ),
    (
        "bad-setting",
        lambda t: t.replace("settings: [zsl, gzsl]", "settings: [zsl, transductive]"),
        "settings: [zsl, transductive]",
        r"settings\[1\]: must be one of 'zsl', 'gzsl'; got 'transductive'$",
    ),
    (
        "primary-key-not-a-setting",  # at the entry's own line, not at 'primary:'
        lambda t: t.replace("gzsl: H", "gzsl: H\n  gzls: H"),
        "gzls: H",
        r"primary\.gzls: key must be one of 'zsl', 'gzsl'; got 'gzls'\. Did you mean 'gzsl'\?$",
    ),
    (
        "topk-without-k",  # a nested model's check, at the key it names
        lambda t: t.replace("  format: dense\n", "  format: topk\n"),
        "format: topk",
        r"predictions\.format: format 'topk' needs 'k'$",
    ),
    (
        "k-without-topk",
        lambda t: t.replace("  format: dense\n", "  format: dense\n  k: 7\n"),
        "k: 7",
        r"predictions\.k: 'k' is only for format 'topk'$",
    ),
    (
        "duplicate-key",
        lambda t: t.replace("title:", "version: 2\ntitle:", 1),
        "version: 2",
        r"version: duplicate key \(first at line \d+\)",
    ),
    (
        "yaml-syntax",
        lambda t: t.replace("settings: [zsl, gzsl]", "settings: [zsl, gzsl"),
        None,
        r"not valid YAML",
    ),
    (
        "primary-not-a-metric-key",
        lambda t: t.replace("gzsl: H", "gzsl: hm"),
        "gzsl: hm",
        r"primary\.gzsl: 'hm' is not a metric key of that setting; one of \['AUSUC', 'H', 'cH',",
    ),
    (
        "two-default-embeddings",
        lambda t: t.replace(
            "    default: true\n",
            "    default: true\n  - name: words\n    dim: 300\n    default: true\n",
        ),
        "class_embeddings:",
        r"class_embeddings: at most one class embedding may be 'default: true'",
    ),
    (
        "pretrained-on-both",
        lambda t: t.replace(
            "    class_set: none\n", "    class_set: none\n    wnids: [n02084071]\n"
        ),
        "class_set: none",
        r"features\.pretrained_on\.class_set: give exactly one of 'class_set', 'wnids' or 'web';"
        " got class_set and wnids",
    ),
    (
        "bad-checksum",
        lambda t: re.sub(r"checksum: sha256:\w+", "checksum: md5:abc", t),
        "checksum: md5:abc",
        r"data\.checksum: String should match pattern",
    ),
    (
        "bad-benchmark-id",
        lambda t: t.replace("benchmark: demo\n", "benchmark: Demo Set\n"),
        "benchmark: Demo Set",
        r"benchmark: String should match pattern .*; got 'Demo Set'",
    ),
    (
        "duplicate-result-key",
        lambda t: t.replace("key: top5", "key: top1  # again"),
        "key: top1  # again",
        r"metrics\[1\]\.key: key 'top1' is used twice in 'zsl'",
    ),
    (
        "metric-wrong-setting",
        lambda t: t.replace(
            "  - name: gzsl_seen_accuracy\n",
            "  - name: gzsl_seen_accuracy\n    settings: [zsl]  # here\n",
        ),
        "settings: [zsl]  # here",
        r"metric 'gzsl_seen_accuracy' does not apply to setting 'zsl'",
    ),
    (
        "wrong-type",
        lambda t: t.replace("  dim: 128", "  dim: many"),
        "dim: many",
        r"features\.dim: Input should be a valid integer.*; got 'many'",
    ),
]


@pytest.mark.parametrize(
    ("transform", "needle", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_spec_message(tmp_path: Path, transform, needle, pattern) -> None:  # type: ignore[no-untyped-def]
    text = transform(DEMO_TEXT)
    assert text != DEMO_TEXT, "the case must change the spec"
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert re.search(pattern, message), message
    assert str(path) in message
    if needle is not None:
        assert f"{path}:{_line(text, needle)}:" in message, message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = DEMO_TEXT.replace("version: 1\n", "version: 0\n").replace(
        "gzsl: H", "gzsl: H\n  extra: top1"
    )
    path = _write(tmp_path, text.replace("    key: top5\n    k: 5", "    key: top5\n    k: -1"))
    with pytest.raises(SpecError, match=r"^3 problems in ") as info:
        load_spec(path)
    message = str(info.value)
    assert "version: Input should be greater than 0" in message
    assert "metrics[1].k: Input should be greater than or equal to 1" in message
    # The bad key at its own line (it used to be placed at the line of 'primary:').
    extra = _line(text, "extra: top1")
    assert (
        f"{path}:{extra}: primary.extra: key must be one of 'zsl', 'gzsl'; got 'extra'" in message
    )


def test_empty_and_non_mapping_specs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="the spec is empty"):
        load_spec(_write(tmp_path, ""))
    with pytest.raises(SpecError, match="must be a mapping of keys, got list"):
        load_spec(_write(tmp_path, "- a\n- b\n"))


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")
    path = tmp_path / "spec.yaml"
    path.write_text(DEMO_TEXT)
    with pytest.raises(SpecError, match=r"hierarchy\.file: 'demo/hierarchy\.json' not found"):
        load_spec(path)


def test_yaml_is_loaded_safely() -> None:
    text = DEMO_TEXT.replace("title:", "evil: !!python/object/apply:os.system ['true']\ntitle:")
    with pytest.raises(SpecError, match="not valid YAML"):
        parse_spec(text)


def test_spec_hash_tracks_data_not_titles(tmp_path: Path) -> None:
    base = load_spec(_write(tmp_path, DEMO_TEXT))
    retitled = load_spec(_write(tmp_path, DEMO_TEXT.replace('title: "Demo', 'title: "Other')))
    reseeded = load_spec(_write(tmp_path, DEMO_TEXT.replace("seed: 0", "seed: 1")))
    assert base.data_hash() == retitled.data_hash() != reseeded.data_hash()
    assert base.spec_hash() != retitled.spec_hash()


def test_json_schema_lists_top_level_keys() -> None:
    schema = json_schema()
    json.dumps(schema)
    assert {"benchmark", "version", "data", "metrics", "primary"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("path", spec_files(SPECS), ids=lambda p: str(p.relative_to(SPECS)))
def test_every_shipped_spec_validates(path: Path) -> None:
    spec = load_spec(path)
    assert spec.benchmark and spec.metrics
    for setting in spec.settings:
        assert spec.primary[setting] in {m.result_key for m in spec.metrics_for(setting)}


# -- the leakage audit's rule ---------------------------------------------------------------------


def test_audit_rule_defaults_and_its_errors(tmp_path: Path) -> None:
    spec = load_spec(SPECS / "demo.yaml")
    assert (spec.audit.match, spec.audit.related_within, spec.audit.wordnet_map) == (
        "descendants",
        1,
        None,
    )
    cases = [
        (
            "audit:\n  match: cousins\n",
            r"audit\.match: must be one of 'exact', 'descendants', 'ancestors', 'both';"
            r" got 'cousins'",
        ),
        ("audit:\n  related_within: 11\n", r"audit\.related_within: Input should be less than"),
        (
            "audit:\n  wordnet: x.tsv\n",
            r"audit\.wordnet: unknown key 'wordnet'\. Did you mean 'wordnet_map'",
        ),
    ]
    for extra, pattern in cases:
        path = _write(tmp_path, DEMO_TEXT + extra)
        with pytest.raises(SpecError) as info:
            load_spec(path)
        message = str(info.value)
        assert re.search(pattern, message), message
        assert f"bad.yaml:{_line(DEMO_TEXT + extra, extra.split(chr(10))[1].strip())}:" in message


def test_spec_hash_covers_the_audit_map(tmp_path: Path) -> None:
    path = _write(tmp_path, DEMO_TEXT + "audit:\n  wordnet_map: map.tsv\n")
    (tmp_path / "map.tsv").write_text("a\tn02084071\tdog\n")
    spec = load_spec(path)
    assert spec.audit_map_path() == tmp_path / "map.tsv"
    first = spec.spec_hash()
    (tmp_path / "map.tsv").write_text("a\tn02084071\tdog\tbroader\n")
    assert load_spec(path).spec_hash() != first  # the map decides what the records' audit says
    (tmp_path / "map.tsv").unlink()
    with pytest.raises(SpecError, match=r"cannot read audit\.wordnet_map .*map\.tsv"):
        load_spec(path).spec_hash()
