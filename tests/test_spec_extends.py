"""``extends:``: one level of spec bases, merged by top-level key, every error at its file and line.

The shipped xlsa17 specs extend a protocol file each; the strongest check that the restructuring
changed nothing is that each resolves to exactly the spec its two files give when pasted into one
by hand (a text merge here, independent of the loader), hashes included.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core import yamlio
from harness.core.errors import SpecError
from harness.spec import (
    json_schema,
    load_spec,
    load_spec_base,
    load_spec_data,
    parse_spec,
    spec_files,
)
from tests.conftest import SPECS

DEMO_TEXT = (SPECS / "demo.yaml").read_text()
TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")
SHARED = ("settings", "metrics", "primary", "predictions", "uncertainty")


def _blocks(text: str) -> dict[str, str]:
    """Top-level key → its lines as written (comment lines above the first key dropped)."""
    blocks: dict[str, str] = {}
    key = None
    for line in text.splitlines(keepends=True):
        match = TOP_LEVEL_KEY.match(line)
        if match:
            key = match.group(1)
            assert key not in blocks, f"{key} twice"
            blocks[key] = ""
        if key is not None:
            blocks[key] += line
    return blocks


def _flatten(path: Path) -> str:
    """The spec at ``path`` and its base pasted into one text, by the documented rule."""
    spec = _blocks(path.read_text())
    base_name = spec.pop("extends").removeprefix("extends:").strip()
    base = _blocks((path.parent / base_name).read_text())
    return "".join(spec.values()) + "".join(v for k, v in base.items() if k not in spec)


def _line(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


# -- the shipped specs ------------------------------------------------------------------------------

EXTENDING = [p for p in spec_files(SPECS) if re.search(r"^extends:", p.read_text(), re.M)]


def test_the_xlsa17_specs_extend_their_protocol_files() -> None:
    xlsa17 = spec_files(SPECS / "xlsa17")
    assert len(xlsa17) == 20 and set(xlsa17) <= set(EXTENDING)
    bases = {p.name: load_spec(p).base_path for p in xlsa17}
    assert {b.name for b in bases.values() if b is not None} == {
        "_protocol-gbu.yaml",
        "_protocol-gbu-no-hierarchy.yaml",
    }
    assert all(
        b == SPECS / "xlsa17" / "_protocol-gbu-no-hierarchy.yaml"
        for n, b in bases.items()
        if n.startswith("sun-")
    )
    assert load_spec(SPECS / "demo.yaml").base_path is None


@pytest.mark.parametrize("path", EXTENDING, ids=lambda p: str(p.relative_to(SPECS)))
def test_shipped_spec_resolves_to_its_files_pasted_together(path: Path) -> None:
    flat_text = _flatten(path)
    assert "extends" not in flat_text
    flat = parse_spec(flat_text, source=f"{path} (flattened)", path=path.resolve())
    spec = load_spec(path)
    assert spec.model_dump(mode="json") == flat.model_dump(mode="json")
    assert spec.data_hash() == flat.data_hash()
    assert spec.spec_hash() == flat.spec_hash()
    assert load_spec_data(path) == yamlio.load(flat_text, "flat")


@pytest.mark.parametrize(
    "path", sorted(SPECS.rglob("_*.yaml")), ids=lambda p: str(p.relative_to(SPECS))
)
def test_shipped_bases_are_bases(path: Path) -> None:
    assert path not in spec_files(SPECS)
    assert set(load_spec_base(path)) <= {"citation", "features", *SHARED}
    with pytest.raises(SpecError, match=r"a spec base \(its name starts with '_'\), not a spec"):
        load_spec(path)
    # every base is extended by some spec, and each of its keys is used by at least one of them
    users = [p for p in EXTENDING if f"extends: {path.name}\n" in p.read_text()]
    assert users
    assert any(set(load_spec_base(path)) - set(_blocks(p.read_text())) for p in users)


def test_zsl_spec_validate_passes_on_every_shipped_spec() -> None:
    result = CliRunner().invoke(app, ["spec", "validate", *map(str, spec_files(SPECS))])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok ") == len(spec_files(SPECS))


# -- a demo family: the demo spec split into a spec and a base -------------------------------------


@pytest.fixture
def family(tmp_path: Path) -> Path:
    folder = tmp_path / "specs"
    shutil.copytree(SPECS / "demo", folder / "demo")
    blocks = _blocks(DEMO_TEXT)
    (folder / "_base.yaml").write_text(
        "# the demo's protocol\n" + "".join(blocks[k] for k in SHARED)
    )
    (folder / "child.yaml").write_text(
        "# the demo, through a base\nextends: _base.yaml\n"
        + "".join(v for k, v in blocks.items() if k not in SHARED)
    )
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_split_demo_is_the_demo(family: Path) -> None:
    spec, demo = load_spec(family / "child.yaml"), load_spec(SPECS / "demo.yaml")
    assert spec.model_dump() == demo.model_dump()
    assert spec.spec_hash() == demo.spec_hash() and spec.data_hash() == demo.data_hash()
    assert spec.base_path == (family / "_base.yaml").resolve()
    assert spec.hierarchy_path() == (family / "demo" / "hierarchy.json").resolve()
    assert spec_files(family) == [family / "child.yaml"]


def test_the_spec_replaces_a_base_key_wholesale(family: Path) -> None:
    (family / "child.yaml").write_text(
        (family / "child.yaml").read_text() + "uncertainty:\n  n_boot: 0\n"
    )
    spec = load_spec(family / "child.yaml")
    # not merged into the base's mapping: the keys the spec leaves out take their defaults
    assert spec.uncertainty.n_boot == 0
    assert load_spec_data(family / "child.yaml")["uncertainty"] == {"n_boot": 0}
    _edit(family / "_base.yaml", "  seed: 0", "  seed: 7")
    assert load_spec(family / "child.yaml").uncertainty.seed == 0
    _edit(family / "child.yaml", "  n_boot: 0\n", "  n_boot: 0\nsettings: [zsl]\n")
    message = _error(family / "child.yaml")  # the base's gzsl metrics now dangle
    base = family / "_base.yaml"
    assert message.endswith(
        f"\n  {base}:{_line(base, 'name: gzsl_seen_accuracy')}: metrics[11]:"
        " 'gzsl_seen_accuracy' applies to none of the settings ['zsl']"
    )


def test_a_bad_key_in_the_base_is_reported_in_the_base(family: Path) -> None:
    base = family / "_base.yaml"
    _edit(base, "    key: top5\n    k: 5", "    key: top5\n    k: 0")
    message = _error(family / "child.yaml")
    assert f"{base}:{_line(base, 'k: 0')}: metrics[1].k: Input should be greater" in message
    assert message.startswith(f"1 problem in {family / 'child.yaml'}:")


def test_problems_in_both_files_are_reported_at_once_each_at_its_line(family: Path) -> None:
    base, child = family / "_base.yaml", family / "child.yaml"
    _edit(base, "    key: top5\n    k: 5", "    key: top5\n    k: 0")
    _edit(base, "predictions:", "predictionz: {}\npredictions:")
    _edit(child, "version: 1", "version: 0")
    _edit(child, "  dim: 128", "  dim: many")
    message = _error(child)
    lines = message.splitlines()
    assert lines[0] == f"4 problems in {child}:"
    assert [line.split(": ")[0] for line in lines[1:]] == [
        f"  {child}:{_line(child, 'version: 0')}",
        f"  {child}:{_line(child, 'dim: many')}",
        f"  {base}:{_line(base, 'k: 0')}",
        f"  {base}:{_line(base, 'predictionz')}",
    ]
    assert re.search(
        r"predictionz: unknown key 'predictionz'\. Did you mean 'predictions'\?", message
    )


def test_a_whole_spec_check_names_the_line_of_its_key_in_the_base(family: Path) -> None:
    base = family / "_base.yaml"
    _edit(base, "gzsl: H", "gzsl: hm")
    assert _error(family / "child.yaml").endswith(
        f"\n  {base}:{_line(base, 'gzsl: hm')}: primary.gzsl: 'hm' is not a metric key of that"
        " setting; one of ['AUSUC', 'H', 'cH', 'seen', 'top1', 'unseen']"
    )


def test_paths_in_messages_are_named_as_the_user_named_the_spec(
    family: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(family.parent)
    _edit(family / "_base.yaml", "    key: top5\n    k: 5", "    key: top5\n    k: 0")
    message = _error(Path("specs/child.yaml"))
    line = _line(family / "_base.yaml", "k: 0")
    assert f"\n  specs/_base.yaml:{line}: metrics[1].k:" in message


def test_yaml_problems_in_the_base_name_the_base(family: Path) -> None:
    base, child = family / "_base.yaml", family / "child.yaml"
    text = base.read_text()
    base.write_text(text.replace("settings: [zsl, gzsl]", "settings: [zsl, gzsl"))
    assert re.search(rf"^{re.escape(str(base))}:\d+: not valid YAML", _error(child))
    base.write_text(text.replace("primary:", "settings: [zsl]  # again\nprimary:"))
    message = _error(child)
    assert message == (
        f"{base}:{_line(base, '# again')}: settings: duplicate key (first at line"
        f" {_line(base, 'settings: [zsl, gzsl]')})"
    )
    base.write_text("")
    assert _error(child) == f"{base}: the spec base is empty"
    base.write_text("- settings\n")
    assert _error(child) == f"{base}:1: a spec base must be a mapping of keys, got list"


def test_a_duplicate_key_in_the_spec_names_the_spec(family: Path) -> None:
    child = family / "child.yaml"
    _edit(child, "title:", "extends: _base.yaml\ntitle:")
    assert _error(child).startswith(
        f"{child}:{_line(child, 'title:') - 1}: extends: duplicate key (first at line 2)"
    )


def test_one_level_only(family: Path) -> None:
    base = family / "_base.yaml"
    (family / "_grand.yaml").write_text("citation: x\n")
    base.write_text(base.read_text() + "extends: _grand.yaml\n")
    line = _line(base, "extends:")
    assert _error(family / "child.yaml") == (
        f"{base}:{line}: extends: not allowed in a spec base: a base cannot extend another file"
        f" (one level of extends only) ({family / 'child.yaml'} extends it)"
    )


@pytest.mark.parametrize("key", ["benchmark", "version"])
def test_a_base_does_not_name_the_benchmark_or_its_version(family: Path, key: str) -> None:
    base = family / "_base.yaml"
    base.write_text(base.read_text() + f"{key}: 2\n")
    message = _error(family / "child.yaml")
    assert message.startswith(
        f"{base}:{_line(base, f'{key}: 2')}: {key}: not allowed in a spec base"
    )


def test_a_missing_base(family: Path) -> None:
    child = family / "child.yaml"
    (family / "_base.yaml").unlink()
    assert _error(child) == f"{child}:2: extends: spec base {family / '_base.yaml'} not found"


@pytest.mark.parametrize(
    "value",
    [
        "/etc/passwd",
        "../_base.yaml",
        "demo/../_base.yaml",
        "./_base.yaml",
        "sub/_base.yaml",
        "base.yaml",
        "_base.yml",
        "_base",
        "_.yaml",
        "~/_base.yaml",
        '"_base.yaml\\0"',
        "''",
        "[_base.yaml]",
        "{a: 1}",
        "null",
        "3",
    ],
)
def test_extends_names_a_base_in_the_same_folder_only(family: Path, value: str) -> None:
    child = family / "child.yaml"
    _edit(child, "extends: _base.yaml", f"extends: {value}")
    message = _error(child)
    assert message.startswith(f"{child}:2: extends: must be the file name of a spec base in the")


def _link_base(family: Path, target: Path | str) -> None:
    base = family / "_base.yaml"
    if not (family / "_real.yaml").exists():
        base.rename(family / "_real.yaml")
    base.unlink(missing_ok=True)
    base.symlink_to(target)


def test_a_link_out_of_the_folder_is_refused(family: Path, tmp_path: Path) -> None:
    outside = tmp_path / "_outside.yaml"
    shutil.copy(family / "_base.yaml", outside)
    child = family / "child.yaml"
    for target in (outside, Path("..") / outside.name):  # absolute; relative through '..'
        _link_base(family, target)
        message = _error(child)
        assert message.startswith(f"{child}:2: extends: "), message
        assert "resolves to a file outside" in message and message.endswith("; refused")


def test_a_link_within_the_folder_is_followed(family: Path) -> None:
    _link_base(family, "_real.yaml")
    assert (
        load_spec(family / "child.yaml").spec_hash() == load_spec(SPECS / "demo.yaml").spec_hash()
    )


def test_a_loop_of_links_is_refused(family: Path) -> None:
    base = family / "_base.yaml"
    base.unlink()
    base.symlink_to("_loop.yaml")
    (family / "_loop.yaml").symlink_to("_base.yaml")
    message = _error(family / "child.yaml")
    assert message.startswith(f"{family / 'child.yaml'}:2: extends: "), message
    assert "symbolic links" in message or "cannot read spec base" in message


def test_a_directory_or_fifo_is_refused(family: Path) -> None:
    base = family / "_base.yaml"
    base.unlink()
    base.mkdir()
    assert _error(family / "child.yaml").endswith("not a regular file; refused")
    base.rmdir()
    os.mkfifo(base)
    assert _error(family / "child.yaml").endswith("not a regular file; refused")


def test_a_huge_or_exploding_base_is_refused(family: Path) -> None:
    base = family / "_base.yaml"
    with base.open("w") as handle:
        handle.write("citation: x\n# " + "x" * yamlio.MAX_BYTES + "\n")
    assert _error(family / "child.yaml").endswith(
        f"larger than the {yamlio.MAX_BYTES}-byte limit for YAML; refused"
    )
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
    )
    base.write_text("citation: x\n" + bomb.replace("a:", "description:", 1))
    assert "(an alias bomb?); refused" in _error(family / "child.yaml")


def test_extends_needs_the_spec_file() -> None:
    with pytest.raises(
        SpecError, match=r"^<string>:1: extends: a spec that extends a base must be"
    ):
        parse_spec("extends: _base.yaml\nbenchmark: x\n")


def test_a_base_is_not_a_spec(family: Path) -> None:
    base = family / "_base.yaml"
    with pytest.raises(SpecError, match=r"_base\.yaml: a spec base .*'extends: _base\.yaml'"):
        load_spec(base)
    with pytest.raises(SpecError, match=r"a spec base"):
        load_spec_data(base)
    assert set(load_spec_base(base)) == set(SHARED)
    _edit(base, "predictions:", "predictionz: {}\npredictions:")
    with pytest.raises(
        SpecError,
        match=rf"^{re.escape(str(base))}:{_line(base, 'predictionz')}: predictionz: unknown key"
        r" 'predictionz'\. Did you mean 'predictions'\?",
    ):
        load_spec_base(base)
    with pytest.raises(SpecError, match=r"child\.yaml: not a spec base"):
        load_spec_base(family / "child.yaml")


def test_json_schema_knows_extends() -> None:
    schema = json_schema()
    assert schema["properties"]["extends"]["type"] == "string"
    assert schema["then"] == {"required": ["benchmark", "version"]}
    assert "metrics" in schema["else"]["required"] and "required" not in schema


def test_a_bad_key_in_a_shipped_base_is_reported_in_the_base(tmp_path: Path) -> None:
    """The docs' example (Spec bases): a mistake in the protocol file names that file and its line."""
    folder = tmp_path / "xlsa17"
    shutil.copytree(SPECS / "xlsa17", folder)
    base = folder / "_protocol-gbu.yaml"
    text = base.read_text()
    base.write_text(text.replace("    key: hp@5\n    k: 5", "    key: hp@5\n    k: 0"))
    message = _error(folder / "awa2-ps.yaml")
    assert f"\n  {base}:30: metrics[3].k: Input should be greater than or equal to 1" in message
    assert message.startswith(f"1 problem in {folder / 'awa2-ps.yaml'}:")
