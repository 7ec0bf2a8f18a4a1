"""Run records as files: ids, stable text, safe paths, tamper checks, all-or-nothing imports."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from sqlalchemy import Engine

from harness.core.errors import HarnessError, IntegrityError
from harness.records import ClassValues, Interval, RunRecord, ScoreEntry
from harness.results.records_io import (
    RECORD_FORMAT,
    dump_record,
    load_record,
    read_records,
    record_id,
    record_path,
    safe_component,
    write_records,
)
from harness.results.store_io import export_store, import_folder
from harness.store import count_runs, load_runs, open_store, save_run
from tests.store_records import make_record

HOSTILE_NAMES = [
    "<script>alert(1)</script>",
    "../x",
    "..",
    ".",
    ".hidden",
    "a/b",
    "a\\b",
    "x@y",
    "%41",
    "A",
    "ünïcødé 名前",
    "tab\tnew\nline",
    "nul\x00byte",
    "long" * 100,
    "long" * 100 + "!",
]


@pytest.fixture
def store(tmp_path: Path) -> Engine:
    return open_store(f"sqlite:///{tmp_path / 'store.sqlite3'}")


@pytest.fixture
def fresh_store(tmp_path: Path) -> Engine:
    return open_store(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")


def _canonical_sha256(payload: object) -> str:
    """The id as the format defines it, written out independently of the module."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _records() -> list[RunRecord]:
    return [
        make_record(name="ale"),
        make_record(name="eszsl", version="2.0", zsl_top1=0.625),
        make_record(benchmark="awa2", name="ale", gzsl=None, zsl_top1=0.125),
    ]


# -- one record -----------------------------------------------------------------------------------


def test_dump_is_the_documented_envelope_with_a_content_id() -> None:
    record = make_record(zsl_top1=0.1)
    text = dump_record(record)
    envelope = json.loads(text)
    assert list(envelope) == ["format", "id", "record"]
    assert envelope["format"] == RECORD_FORMAT == "zsl-run-record/2"
    assert envelope["id"] == _canonical_sha256(envelope["record"]) == record_id(record)
    assert envelope["record"]["scores"][0]["value"] == 0.1
    # indent 2, sorted keys, non-ASCII kept as UTF-8, one trailing newline
    assert text.startswith('{\n  "format": "zsl-run-record/2",\n  "id": "sha256:')
    assert text.endswith("}\n") and not text.endswith("\n\n")
    unicode = dump_record(make_record(name="ünï"))
    assert '"name": "ünï"' in unicode
    assert load_record(text, "x.json") == record


def test_same_record_gives_the_same_bytes_whatever_the_dict_order() -> None:
    one = make_record()
    payload = one.model_dump(mode="json")
    payload["environment"] = dict(reversed(list(payload["environment"].items())))
    payload["scores"][0]["details"] = dict(reversed(list(payload["scores"][0]["details"].items())))
    other = RunRecord.model_validate(dict(reversed(list(payload.items()))))
    assert list(other.environment) != list(one.environment)  # really built in another order
    assert dump_record(other) == dump_record(one)
    assert record_id(other) == record_id(one)
    # ...and any change of content changes the id
    assert record_id(make_record(zsl_top1=0.5000000000000001)) != record_id(one)


def _envelope(record: RunRecord) -> dict[str, object]:
    return json.loads(dump_record(record))  # type: ignore[no-any-return]


def _text(envelope: dict[str, object], *, reseal: bool = True) -> str:
    if reseal:
        envelope["id"] = _canonical_sha256(envelope["record"])
    return json.dumps(envelope, indent=2)


@pytest.mark.parametrize(
    ("mutate", "reseal", "expected"),
    [
        (lambda e: e["record"]["scores"][0].update(value=0.9), False, "id: the record's content"),
        (lambda e: e.update(format="zsl-run-record/1"), False, "format: expected"),
        (lambda e: e.update(extra=1), False, "unknown key 'extra'"),
        (lambda e: e.pop("id"), False, "missing key 'id'"),
        (lambda e: e["record"].pop("runner"), True, "record.runner: Field required"),
        (lambda e: e["record"]["scores"][1].update(value="high"), True, "record.scores[1].value"),
        (lambda e: e["record"].update(surprise=True), True, "record.surprise"),
    ],
)
def test_load_refuses_a_bad_file_naming_it_and_the_key(mutate, reseal, expected) -> None:  # type: ignore[no-untyped-def]
    envelope = _envelope(make_record())
    mutate(envelope)
    with pytest.raises(HarnessError) as err:
        load_record(_text(envelope, reseal=reseal), "leaderboard/results/x.json")
    message = str(err.value)
    assert message.startswith("leaderboard/results/x.json: ")
    assert expected in message
    assert "\n" not in message


def test_tampering_is_an_integrity_error() -> None:
    envelope = _envelope(make_record(zsl_top1=0.5))
    envelope["record"]["scores"][0]["value"] = 0.95  # type: ignore[index]
    with pytest.raises(IntegrityError, match=r"f\.json: id: .* not to the recorded sha256:"):
        load_record(json.dumps(envelope), "f.json")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{", "not valid JSON (line 1, column 2"),
        ("[]", "expected a JSON object"),
        ('{"format": "zsl-run-record/2", "format": "x"}', "key 'format' appears twice"),
        ('{"value": NaN}', "NaN is not a number records may hold"),
    ],
)
def test_load_refuses_malformed_json(text: str, expected: str) -> None:
    with pytest.raises(HarnessError) as err:
        load_record(text, "bad.json")
    assert str(err.value).startswith("bad.json: ") and expected in str(err.value)


def test_dump_refuses_a_non_finite_value() -> None:
    record = make_record()
    record.scores[0].value = float("nan")
    with pytest.raises(HarnessError, match=r"ale@1\.0 on cub-demo v1 cannot be exported"):
        dump_record(record)


def test_the_id_covers_the_record_as_written_so_older_files_still_verify() -> None:
    # A file written before BenchmarkInfo.structure existed lacks the key; it must still load.
    envelope = _envelope(make_record())
    del envelope["record"]["benchmark"]["structure"]  # type: ignore[index]
    loaded = load_record(_text(envelope), "old.json")
    assert loaded.benchmark.structure == {}
    assert record_id(loaded) != envelope["id"]  # re-exporting it writes the new field


# -- paths ----------------------------------------------------------------------------------------


def test_safe_component_examples() -> None:
    assert safe_component("eszsl-1.0_b+c") == "eszsl-1.0_b+c"
    assert safe_component("a/b") == "a%2Fb"
    assert safe_component("..") == "%2E."
    assert safe_component(".hidden") == "%2Ehidden"
    assert safe_component("<s>") == "%3Cs%3E"
    assert safe_component("%41") == "%2541"  # '%' itself is encoded: no collision with "A"
    assert safe_component("é") == "%C3%A9"
    with pytest.raises(HarnessError, match="submission name is empty"):
        safe_component("", "submission name")


def test_record_path_layout() -> None:
    root = Path("/results")
    path = record_path(root, make_record(benchmark="cub-demo", name="ale", version="1.0"))
    assert path == root / "cub-demo" / "v1" / "ale@1.0.json"


def test_hostile_names_get_distinct_safe_paths_inside_root(tmp_path: Path) -> None:
    root = tmp_path / "results"
    paths = []
    for name in HOSTILE_NAMES:
        for benchmark in ("cub", name):
            path = record_path(root, make_record(benchmark=benchmark, name=name, version=name))
            relative = path.relative_to(root)  # raises if outside
            assert len(relative.parts) == 3, path
            assert path.resolve().is_relative_to(root.resolve())
            for part in relative.parts:
                assert part.isascii() and part.isprintable() and not part.startswith(".")
                assert "/" not in part and "\\" not in part and len(part.encode()) <= 255
            paths.append(path)
    assert len(set(paths)) == len(paths)  # injective: no two runs share a file
    # "x@y" version "1" and "x" version "y@1" must not collide either
    a = record_path(root, make_record(name="x@y", version="1"))
    b = record_path(root, make_record(name="x", version="y@1"))
    assert a != b


def test_hostile_names_round_trip_through_files(tmp_path: Path) -> None:
    records = [make_record(name=name, version=name) for name in HOSTILE_NAMES if name != "A"]
    root = tmp_path / "results"
    paths = write_records(records, root).paths
    written = sorted(p for p in root.rglob("*") if p.is_file())
    assert written == sorted(paths)
    assert all(p.resolve().is_relative_to(root.resolve()) for p in written)
    assert not (tmp_path / "x").exists() and not (tmp_path / "b").exists()
    assert sorted(r.submission.name for r in read_records(root)) == sorted(
        r.submission.name for r in records
    )


def test_names_differing_only_in_case_are_refused(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="differ only in letter case"):
        write_records([make_record(name="ALE"), make_record(name="ale")], tmp_path)
    assert not any(tmp_path.iterdir())


def test_two_records_of_one_run_are_refused(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"two records of the run ale@1\.0 on cub-demo v1"):
        write_records([make_record(), make_record(zsl_top1=0.7)], tmp_path)


# -- folders and the store ------------------------------------------------------------------------


def test_store_export_import_round_trip(store: Engine, fresh_store: Engine, tmp_path: Path) -> None:
    rich = make_record(
        benchmark="rich-benchmark",  # structure belongs to the benchmark: its own
        name="rich",
        structure={"structural_ratio": 0.25, "hops": {"n01": 2}},
        extra_scores=[
            ScoreEntry(
                setting="zsl",
                metric="top1-paired",
                function="f",
                version="3",
                value=0.375,
                interval=Interval(lo=0.25, hi=0.5, scheme="classes", n_boot=10),
                class_values=ClassValues(
                    combine="class_mean",
                    classes=[0, 2],
                    counts=[3, 5],
                    groups=[0, 0],
                    means=[0.5, 0.25],
                ),
            )
        ],
    )
    hostile = make_record(name="<script>alert(1)</script>", version="../x")
    for record in [*_records(), rich, hostile]:
        save_run(store, record)
    stored = load_runs(store)
    assert next(r for r in stored if r.submission.name == "rich") == rich  # nothing dropped
    root = tmp_path / "results"
    result = export_store(store, root)
    assert len(result.paths) == len(stored) == 5
    imported = import_folder(fresh_store, root)
    assert imported == stored
    assert load_runs(fresh_store) == stored
    # and exporting the re-imported store gives the same bytes
    again = export_store(fresh_store, tmp_path / "again")
    for one, two in zip(result.paths, again.paths, strict=True):
        assert one.read_bytes() == two.read_bytes()


def test_export_is_byte_stable_and_leaves_unchanged_files_alone(tmp_path: Path) -> None:
    root = tmp_path / "results"
    first = write_records(_records(), root)
    assert first.written == first.paths
    snapshot = {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in first.paths}
    second = write_records(list(reversed(_records())), root)
    assert second.written == []
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in first.paths} == (
        snapshot
    )
    changed = [make_record(name="ale", zsl_top1=0.75), *_records()[1:]]
    third = write_records(changed, root)
    assert third.written == [record_path(root, changed[0])]
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_prune_removes_only_stale_record_files_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_records(_records(), root)
    notes = root / "README.md"
    notes.write_text("kept\n")
    kept = _records()[:1]
    without = write_records(kept, root)
    assert without.removed == [] and len(list(root.rglob("*.json"))) == 3
    pruned = write_records(kept, root, prune=True)
    assert sorted(pruned.removed) == sorted(record_path(root, r) for r in _records()[1:])
    assert sorted(root.rglob("*.json")) == [record_path(root, kept[0])]
    assert not (root / "awa2").exists()  # its folders were emptied and removed
    assert notes.read_text() == "kept\n"


def test_prune_with_no_records_refuses_to_delete_everything(tmp_path: Path) -> None:
    root = tmp_path / "results"
    paths = write_records(_records(), root).paths
    with pytest.raises(HarnessError, match="--prune would delete every record under"):
        write_records([], root, prune=True)
    assert all(p.is_file() for p in paths)
    assert write_records([], tmp_path / "empty", prune=True).paths == []


def test_import_is_all_or_nothing(store: Engine, tmp_path: Path) -> None:
    root = tmp_path / "results"
    paths = write_records(_records(), root).paths
    save_run(store, make_record(name="already", zsl_top1=0.25))
    before = load_runs(store)
    victim = paths[-1]
    victim.write_text(victim.read_text().replace('"value": 0.125', '"value": 0.999'))
    with pytest.raises(IntegrityError) as err:
        import_folder(store, root)
    assert str(victim) in str(err.value)
    assert load_runs(store) == before and count_runs(store) == 1


def test_import_is_one_transaction_when_the_store_refuses_a_record(
    store: Engine, tmp_path: Path
) -> None:
    save_run(store, make_record(name="stored", benchmark_hash="sha256:" + "1" * 64))
    before = load_runs(store)
    root = tmp_path / "results"
    # valid files, but the second was scored on other data under the same benchmark version
    write_records(
        [
            make_record(name="aaa-new", benchmark_hash="sha256:" + "1" * 64),
            make_record(name="zzz-other-data"),
        ],
        root,
    )
    with pytest.raises(IntegrityError, match="stored with hash"):
        import_folder(store, root)
    assert load_runs(store) == before


def test_import_refuses_two_files_of_one_run(tmp_path: Path) -> None:
    root = tmp_path / "results"
    (path,) = write_records([make_record()], root).paths
    copy = path.with_name("copy.json")
    copy.write_bytes(path.read_bytes())
    with pytest.raises(HarnessError, match=r"copy\.json: holds the run ale@1\.0 on cub-demo v1"):
        read_records(root)


def test_import_refuses_symlinks_and_missing_folders(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(dump_record(make_record()))
    os.symlink(outside, root / "link.json")
    with pytest.raises(HarnessError, match=r"link\.json: is a symbolic link"):
        read_records(root)
    with pytest.raises(HarnessError, match="no such folder of run records"):
        read_records(tmp_path / "missing")


def test_scores_keep_their_order(tmp_path: Path) -> None:
    extra = [
        ScoreEntry(setting="zsl", metric="z-last", function="f", version="1", value=0.1),
        ScoreEntry(setting="zsl", metric="a-first", function="f", version="1", value=0.2),
    ]
    record = make_record(extra_scores=extra)
    (path,) = write_records([record], tmp_path).paths
    (loaded,) = read_records(tmp_path)
    assert [e.metric for e in loaded.scores] == [e.metric for e in record.scores]
    assert path.read_text().index('"z-last"') < path.read_text().index('"a-first"')
