"""Identities that read alike are one: NFC names, no hidden characters, no look-alike duplicates.

Attacks: a name typed decomposed ("cafe" + U+0301) beside the composed one; a bidi override,
isolate or mark, a zero-width space, a tag character or a no-break space hidden in a name,
version, benchmark id or author; "ESZSL", Cyrillic "еszsl", "es\\u200bzsl", fullwidth and
mathematical letters, digits for letters, beside "eszsl" -- in record files, in the site build
and in the store. Rules: harness.core.identity, the validators of harness.records.

The tests of harness.core.identity's own functions import it where they use it: on a harness without
the module the other tests still run (and fail one by one) instead of the file failing to load.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.core.errors import HarnessError
from harness.core.hashing import json_sha256
from harness.records import RunRecord, run_key
from harness.results.records_io import dump_record, load_record, read_records, write_records
from harness.site import build_site
from harness.store import count_runs, load_runs, open_store, save_run, save_runs
from tests.conftest import REPO
from tests.site_records import make_record

NFC = "caf\u00e9"
NFD = "cafe\u0301"
BIDI = {
    "U+202E RIGHT-TO-LEFT OVERRIDE": "\u202e",
    "U+2067 RIGHT-TO-LEFT ISOLATE": "\u2067",
    "U+200F RIGHT-TO-LEFT MARK": "\u200f",
    "U+061C ARABIC LETTER MARK": "\u061c",
    "U+202A LEFT-TO-RIGHT EMBEDDING": "\u202a",
    "U+2069 POP DIRECTIONAL ISOLATE": "\u2069",
}
INVISIBLE = {
    "U+200B ZERO WIDTH SPACE": "\u200b",
    "U+2060 WORD JOINER": "\u2060",
    "U+FEFF ZERO WIDTH NO-BREAK SPACE": "\ufeff",
    "U+00AD SOFT HYPHEN": "\u00ad",
    "U+3164 HANGUL FILLER": "\u3164",
    "U+FE0F VARIATION SELECTOR-16": "\ufe0f",
    "U+E0041 TAG LATIN CAPITAL LETTER A": "\U000e0041",
    "U+00A0 NO-BREAK SPACE": "\u00a0",
    "U+2029 PARAGRAPH SEPARATOR": "\u2029",
    "U+E000 unnamed character": "\ue000",  # private use
}
#: Look-alikes of "eszsl", each refused beside it.
LOOKALIKES = [
    "ESZSL",  # case
    "\u0435szsl",  # Cyrillic е
    "eѕzsl",  # Cyrillic ѕ (dze)
    "\uff45\uff53\uff5a\uff53\uff4c",  # fullwidth
    "\U0001d41e\U0001d42c\U0001d433\U0001d42c\U0001d425",  # mathematical bold
    "eszs1",  # digit one for l
    "eszsI",  # capital i for l
    " eszsl ",  # surrounding spaces
]


def file_text(record: RunRecord, **submission: Any) -> str:
    """A record file whose submission fields are replaced as given, with a matching id (as a
    harness without these rules would have exported it)."""
    envelope = json.loads(dump_record(record))
    envelope["record"]["submission"].update(submission)
    envelope["id"] = json_sha256(envelope["record"])
    return json.dumps(envelope, ensure_ascii=False)


def escaped(text: str) -> str:
    """``text`` as messages quote it: every non-ASCII character spelled out."""
    return "'" + text.encode("ascii", "backslashreplace").decode("ascii") + "'"


def bypass(record: RunRecord, **submission: Any) -> RunRecord:
    """``record`` with submission fields set without validation (model_copy skips validators):
    what a caller that builds records by hand could pass on."""
    return record.model_copy(update={"submission": record.submission.model_copy(update=submission)})


# -- one spelling -------------------------------------------------------------------------------


def test_a_decomposed_name_loads_in_nfc() -> None:
    assert unicodedata.is_normalized("NFD", NFD) and NFD != NFC
    loaded = load_record(file_text(make_record(NFC, zsl={"top1": 0.5}), name=NFD), "nfd.json")
    assert loaded.submission.name == NFC
    assert run_key(loaded) == ("cub-demo", 1, NFC, "1.0")
    # the constructor too, and authors and versions and benchmark ids
    record = make_record(NFD, version=f"v-{NFD}", benchmark=f"b-{NFD}", zsl={"top1": 0.5})
    assert record.submission.name == NFC and record.submission.version == f"v-{NFC}"
    assert record.benchmark.id == f"b-{NFC}"
    authored = record.submission.model_validate(
        {**record.submission.model_dump(), "authors": [f"R. {NFD}"]}
    )
    assert authored.authors == [f"R. {NFC}"]


def test_composed_and_decomposed_records_are_one_run(tmp_path: Path) -> None:
    composed = make_record(NFC, zsl={"top1": 0.5})
    root = tmp_path / "results"
    write_records([composed], root)
    # a second file, the same run with the name decomposed: one run held by two files
    other = root / "cub-demo" / "v1" / "cafe%CC%81@1.0.json"
    other.write_text(file_text(composed, name=NFD), encoding="utf-8")
    with pytest.raises(HarnessError, match=r"holds the run café@1\.0 on cub-demo v1, which .* too"):
        read_records(root)
    decomposed = load_record(other.read_text(encoding="utf-8"), str(other))
    with pytest.raises(HarnessError, match=r"two runs of café@1\.0 on cub-demo v1"):
        build_site([composed, decomposed], tmp_path / "site")


def test_the_store_keeps_one_run_for_both_spellings(tmp_path: Path) -> None:
    engine = open_store(f"sqlite:///{tmp_path / 'zsl.sqlite3'}")
    save_run(engine, make_record(NFC, zsl={"top1": 0.5}))
    save_run(engine, load_record(file_text(make_record(NFC, zsl={"top1": 0.7}), name=NFD), "f"))
    assert count_runs(engine) == 1
    (run,) = load_runs(engine)
    assert run.submission.name == NFC and run.scores[0].value == 0.7


# -- nothing hidden -----------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "char"), sorted({**BIDI, **INVISIBLE}.items()))
@pytest.mark.parametrize(
    ("field", "path", "message"),
    [
        ("name", "record.submission.name", "submission name"),
        ("version", "record.submission.version", "submission version"),
        ("authors", "record.submission.authors", "author 2"),
    ],
)
def test_hidden_characters_in_submission_identity_are_refused(
    what: str, char: str, field: str, path: str, message: str
) -> None:
    value: Any = f"ale{char}x"
    if field == "authors":
        value = ["A. Author", value]
    text = file_text(make_record("ale", zsl={"top1": 0.5}), **{field: value})
    with pytest.raises(HarnessError) as caught:
        load_record(text, "results/x.json")
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"results/x.json: {path}: ")
    assert f"{message} {escaped(f'ale{char}x')} holds" in line  # the character spelled out
    assert f"holds {what} at position 3" in line


@pytest.mark.parametrize("char", ["\u202e", "\u200b", "\u2066"])
def test_hidden_characters_in_a_benchmark_id_are_refused(char: str) -> None:
    with pytest.raises(ValidationError, match=r"benchmark id 'cub.* holds U\+"):
        make_record("ale", benchmark=f"cub{char}", zsl={"top1": 0.5})


def test_authors_keep_the_joiners_their_names_need() -> None:
    persian = "\u0645\u06cc\u200c\u0631\u0648\u0632"  # ZWNJ inside a Persian name
    record = make_record("ale", zsl={"top1": 0.5})
    info = record.submission.model_validate(
        {**record.submission.model_dump(), "authors": [persian]}
    )
    assert info.authors == [persian]
    with pytest.raises(ValidationError, match="submission name"):
        record.submission.model_validate({**record.submission.model_dump(), "name": persian})


def test_visible_unicode_names_still_load() -> None:
    for name in ("ünïcødé 名前", "مدل", "модель", "a b", "<b>x</b>", "x@y"):
        assert make_record(name, zsl={"top1": 0.5}).submission.name == name


def test_the_committed_records_still_load() -> None:
    records = read_records(REPO / "leaderboard" / "results")
    assert len(records) >= 10
    assert len({r.submission.name for r in records}) == len(records)


# -- no look-alikes -----------------------------------------------------------------------------


@pytest.mark.parametrize("lookalike", LOOKALIKES)
def test_lookalike_names_are_refused_when_files_are_read(tmp_path: Path, lookalike: str) -> None:
    folder = tmp_path / "results" / "cub-demo" / "v1"
    folder.mkdir(parents=True)
    # written by hand: export refuses file names that differ in case only ("ESZSL")
    for i, name in enumerate(("eszsl", lookalike)):
        (folder / f"run-{i}.json").write_text(dump_record(make_record(name, zsl={"top1": 0.5})))
    with pytest.raises(HarnessError, match="look alike") as caught:
        read_records(tmp_path / "results")
    line = str(caught.value)
    assert "\n" not in line and line.startswith("submission names ")
    assert "'eszsl' (run eszsl@1.0 on cub-demo v1)" in line
    assert f"and {escaped(lookalike)} (run " in line  # every non-ASCII character spelled out
    assert "rename one" in line


@pytest.mark.parametrize("lookalike", [*LOOKALIKES, "es\u200bzsl", "e\u202eszsl", "eszsl\u00ad"])
def test_lookalike_names_are_refused_by_the_site(tmp_path: Path, lookalike: str) -> None:
    first = make_record("eszsl", zsl={"top1": 0.5})
    # hidden characters can't pass the validators: built by hand, as a caller could
    second = bypass(make_record("other", zsl={"top1": 0.4}), name=lookalike)
    with pytest.raises(HarnessError, match=r"submission names 'eszsl' .* look alike"):
        build_site([first, second], tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_the_zero_width_space_example_is_refused_with_its_position(tmp_path: Path) -> None:
    text = file_text(make_record("eszsl", zsl={"top1": 0.5}), name="es\u200bzsl")
    with pytest.raises(HarnessError, match=r"U\+200B ZERO WIDTH SPACE at position 2"):
        load_record(text, "x.json")


def test_the_message_shows_the_difference() -> None:
    from harness.core.identity import check_distinct_identities

    records = [
        make_record("eszsl", zsl={"top1": 0.5}),
        make_record("\u0435szsl", zsl={"top1": 0.4}),
    ]
    with pytest.raises(HarnessError) as caught:
        check_distinct_identities(records, where=lambda r: f"file of {r.submission.name}")
    assert "'eszsl' (file of eszsl) and '\\u0435szsl' (file of \u0435szsl)" in str(caught.value)


def test_lookalike_benchmark_ids_and_versions_are_refused(tmp_path: Path) -> None:
    from harness.core.identity import check_distinct_identities

    a = make_record("ale", benchmark="cub-demo", zsl={"top1": 0.5})
    b = make_record("ale", benchmark="cub\u2010demo", zsl={"top1": 0.5})  # U+2010 HYPHEN
    with pytest.raises(HarnessError, match=r"benchmark ids 'cub-demo' .* 'cub\\u2010demo'"):
        build_site([a, b], tmp_path / "site")
    one = make_record("ale", version="1.0", zsl={"top1": 0.5})
    oh = make_record("ale", version="1.O", zsl={"top1": 0.5})
    with pytest.raises(HarnessError, match=r"versions of 'ale' '1\.0' .* '1\.O'"):
        check_distinct_identities([one, oh])


def test_different_names_stay_apart() -> None:
    from harness.core.identity import check_distinct_identities, skeleton

    names = ["ale", "sje", "sae", "eszsl", "devise", "conse", "dap", "method-01", "method-10"]
    check_distinct_identities([make_record(n, zsl={"top1": 0.5}) for n in names])
    assert len({skeleton(n) for n in names}) == len(names)
    # a visible accent is a different letter, not a look-alike
    check_distinct_identities([make_record(n, zsl={"top1": 0.5}) for n in ("cafe", NFC)])


def test_the_store_refuses_a_lookalike_of_a_stored_name(tmp_path: Path) -> None:
    engine = open_store(f"sqlite:///{tmp_path / 'zsl.sqlite3'}")
    save_run(engine, make_record("eszsl", zsl={"top1": 0.5}))
    for lookalike in ("ESZSL", "\u0435szsl", "eszs1"):
        with pytest.raises(
            HarnessError, match=r"submission names 'eszsl' \(already in the store\)"
        ):
            save_run(engine, make_record(lookalike, zsl={"top1": 0.9}))
    with pytest.raises(HarnessError, match="look alike"):  # all or nothing: "b" is not saved
        save_runs(engine, [make_record("b", zsl={"top1": 0.1}), make_record("ESZSL", zsl={})])
    # the same name again, another version, and an unrelated name are fine
    save_run(engine, make_record("eszsl", zsl={"top1": 0.6}))
    save_run(engine, make_record("eszsl", version="2.0", zsl={"top1": 0.6}))
    save_run(engine, make_record("sje", zsl={"top1": 0.6}))
    assert sorted(r.submission.name for r in load_runs(engine)) == ["eszsl", "eszsl", "sje"]


def test_skeleton_folds_what_a_reader_cannot_tell_apart() -> None:
    from harness.core.identity import skeleton

    assert skeleton("Ρaypal") == skeleton("paypal")  # Greek capital rho
    assert skeleton("rnethod") == skeleton("method")
    assert skeleton("a\u00a0b") == skeleton("a b")  # no-break space
    assert skeleton("a\u200db") == skeleton("ab")  # zero width joiner
    assert skeleton("ale") != skeleton("alé")
