"""Submission pages (issue 14, item 7): per-class bars named by class with the nearest training
class, the hyperparameters a model chose (protocol, worker, runner outputs, record, store, page),
links and BibTeX from ``submission.yaml``, and store migration 0005."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from alembic import command
from pydantic import ValidationError
from sqlalchemy import inspect

from harness.core.errors import RunnerError, SubmissionError
from harness.data.structure import nearest_training_classes
from harness.hierarchy import Hierarchy
from harness.hyperparameters import HyperparameterError, check_hyperparameters
from harness.records import RunRecord, ScoredClass
from harness.runners.outputs import WORKER_JSON, worker_hyperparameters
from harness.site import build_site
from harness.store import load_runs, open_store, save_run
from harness.store.migrations import alembic_config, upgrade
from harness.submission.package import BIBTEX_MAX_CHARS, load_package
from tests import site_records, store_records
from tests.conftest import SPECS, SUBMISSIONS
from tests.html_elements import Elements
from tests.store_fixtures import store_url

__all__ = ["store_url"]  # the fixture: the migration test runs on both databases

DEMO = SPECS / "demo.yaml"
KINDS = "a JSON scalar (str, int, float, bool or None)"


# -- the page: parsed, not grepped ----------------------------------------------------------


class BodyRows(HTMLParser):
    """The body rows (cell texts) of every table of one class, in document order."""

    def __init__(self, css: str) -> None:
        super().__init__(convert_charrefs=True)
        self.css = css
        self.rows: list[list[str]] = []
        self._inside = self._body = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._inside = self.css in (dict(attrs).get("class") or "").split()
        elif self._inside and tag == "tbody":
            self._body = True
        elif self._body and tag == "tr":
            self.rows.append([])
        elif self._body and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tbody":
            self._body = False
        elif tag == "table":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def body_rows(page: Path, css: str) -> list[list[str]]:
    parser = BodyRows(css)
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.rows


def _page(site: Path) -> tuple[Path, Elements]:
    (page,) = sorted((site / "submissions").glob("*.html"))
    parser = Elements()
    parser.feed(page.read_text(encoding="utf-8"))
    return page, parser


def _classes(
    *entries: tuple[str, str, bool, int, str | None, int | None, str | None],
) -> list[ScoredClass]:
    return [
        ScoredClass(
            id=cid,
            name=name,
            unseen=unseen,
            columns={"zsl": column},
            nearest=None if near is None else f"t-{near}",
            nearest_name=near,
            hops=hops,
            relation=relation,
        )
        for cid, name, unseen, column, near, hops, relation in entries
    ]


def _page_record() -> RunRecord:
    record = site_records.make_record(
        "demo-method", zsl={"top1": 0.55}, class_means={"top1": [0.25, 0.9, 0.5, 0.9]}
    )
    benchmark = record.benchmark.model_copy(
        update={
            "test_classes": _classes(
                ("c0", "okapi", True, 0, "giraffe", 2, "sibling"),
                ("c1", "zebra", True, 1, "horse", 2, "sibling"),
                ("c2", "bat", True, 2, None, None, "unconnected"),
                ("c3", "aardvark", True, 3, "mammal", 1, "parent"),
            )
        }
    )
    submission = record.submission.model_copy(
        update={
            "code": "https://github.com/example/demo-method",
            "bibtex": "@article{key,\n  note = {<script>window.__pwned = 1</script>}\n}\n",
            "readme": "# Demo method\n\n<img src=x onerror=alert(1)> in the README\n",
        }
    )
    return record.model_copy(
        update={
            "benchmark": benchmark,
            "submission": submission,
            "hyperparameters": {"main": {"lambda": 0.1, "gamma": 100.0, "solver": "closed"}},
        }
    )


def test_bars_are_sorted_best_first_with_class_names_and_nearest_class(tmp_path: Path) -> None:
    build_site([_page_record()], tmp_path / "site")
    _, page = _page(tmp_path / "site")
    names = [text for _, text in page.select("th", "class-name")]
    # means 0.25, 0.9, 0.5, 0.9: best first, ties by name (aardvark before zebra)
    assert names == ["aardvark", "zebra", "bat", "okapi"]
    nearest = [text for _, text in page.select("td", "nearest")]
    assert nearest == [
        "mammal: parent, 1 hop",
        "horse: sibling, 2 hops",
        "no training class connected",
        "giraffe: sibling, 2 hops",
    ]
    widths = [a["width"] for a, _ in page.select("rect", "bar-fg")]
    assert widths == ["144.0", "144.0", "80.0", "40.0"]  # 160 px at 100 %
    (summary,) = [t for _, t in page.select("summary") if t.startswith("Per-class")]
    assert summary == "Per-class top1, ZSL: 4 classes, best first"


def test_old_records_name_bars_by_column(tmp_path: Path) -> None:
    record = site_records.make_record("old", zsl={"top1": 0.5}, class_means={"top1": [0.1, 0.7]})
    build_site([record], tmp_path / "site")
    _, page = _page(tmp_path / "site")
    assert [t for _, t in page.select("th", "class-name")] == ["column 1", "column 0"]
    assert [t for _, t in page.select("td", "nearest")] == ["not recorded", "not recorded"]


def test_links_bibtex_readme_and_hyperparameters_render_escaped(tmp_path: Path) -> None:
    build_site([_page_record()], tmp_path / "site")
    path, page = _page(tmp_path / "site")
    html = path.read_text(encoding="utf-8")
    hrefs = [a.get("href") for a, _ in page.select("a")]
    assert "https://github.com/example/demo-method" in hrefs
    (bibtex,) = page.select("pre", "bibtex")
    assert bibtex[1] == "@article{key,\n  note = {<script>window.__pwned = 1</script>}\n}\n"
    # inert: no script element but the site's own, the payload is text
    assert [a.get("src") for a, _ in page.select("script")] == ["../static/site.js"]
    assert "&lt;script&gt;window.__pwned" in html
    (button,) = page.select("button", "copy-button")
    assert button[0]["data-copy"] == "bibtex" and "hidden" in button[0]
    (readme,) = page.select("pre", "readme-text")
    assert "<img src=x onerror=alert(1)>" in readme[1]
    assert [a for a, _ in page.select("img")] == []
    assert body_rows(path, "hyperparameters") == [
        ["main", "gamma", "100"],
        ["main", "lambda", "0.1"],
        ["main", "solver", "closed"],
    ]


# -- nearest training class on a hand-built hierarchy ---------------------------------------


def test_nearest_training_class_and_relation_by_hand() -> None:
    # r -> a -> {a1, a2};  r -> b -> b1 -> b11;  c has parents a and b;  z alone
    h = Hierarchy(
        ["r", "a", "b", "a1", "a2", "b1", "b11", "c", "z", "y"],
        [("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1"), ("b1", "b11"),
         ("a", "c"), ("b", "c"), ("z", "y")],
    )  # fmt: skip
    train = h.indices(["a1", "b11", "y"])
    cases = {
        "a2": ("a1", 2.0, "sibling"),  # shares parent a
        "a": ("a1", 1.0, "child"),  # a1 is a's child
        "b1": ("b11", 1.0, "child"),
        "b": ("b11", 2.0, "descendant"),
        "z": ("y", 1.0, "child"),
        "c": ("a1", 2.0, "sibling"),  # c and a1 share parent a (c's other parent is b)
        "r": ("a1", 2.0, "descendant"),
    }
    test = h.indices(list(cases))
    found = nearest_training_classes(h, train, test)
    got = {
        node: (str(h.node_ids[near]), hops, relation)
        for node, near, hops, relation in zip(
            cases, found.nearest.tolist(), found.hops.tolist(), found.relation, strict=True
        )
    }
    assert got == cases
    # parent / ancestor / relative / unconnected
    h2 = Hierarchy(
        ["r", "a", "a1", "a11", "b", "b1", "q"],
        [("r", "a"), ("a", "a1"), ("a1", "a11"), ("r", "b"), ("b", "b1")],
    )
    found = nearest_training_classes(h2, h2.indices(["a"]), h2.indices(["a1", "a11", "b1", "q"]))
    assert found.relation == ["parent", "ancestor", "relative", "unconnected"]
    assert found.hops.tolist() == [1.0, 2.0, 3.0, np.inf]
    assert found.nearest.tolist()[-1] == -1


def test_ties_go_to_the_training_class_given_first() -> None:
    h = Hierarchy(["p", "x", "y", "t"], [("p", "x"), ("p", "y"), ("p", "t")])
    for order in (["x", "y"], ["y", "x"]):
        found = nearest_training_classes(h, h.indices(order), h.indices(["t"]))
        assert h.node_ids[found.nearest[0]] == order[0]


# -- the hyperparameters protocol -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"lam": np.zeros(2)}, f"M.hyperparameters_['lam'] is a ndarray; expected {KINDS}"),
        ({"lam": [0.1]}, f"M.hyperparameters_['lam'] is a list; expected {KINDS}"),
        ({"lam": float("nan")}, "M.hyperparameters_['lam'] is nan; expected a finite number"),
        ({"s": "x" * 257}, "M.hyperparameters_['s'] is a string of 257 characters; at most 256"),
        ([("lam", 1)], "M.hyperparameters_ is a list; expected a dict of names to JSON scalars"),
        ({3: 1}, "M.hyperparameters_ has the key 3; keys are strings of 1 to 64 characters"),
        ({f"k{i}": i for i in range(65)}, "M.hyperparameters_ has 65 keys; at most 64"),
    ],
)
def test_bad_hyperparameters_are_refused_naming_the_key(value: object, message: str) -> None:
    with pytest.raises(HyperparameterError) as err:
        check_hyperparameters(value, "M.hyperparameters_")
    assert str(err.value) == message


def test_numpy_scalars_are_read_as_python_values() -> None:
    got = check_hyperparameters(
        {"b": np.float64(0.5), "a": np.int64(3), "c": np.bool_(True), "d": None}, "M"
    )
    assert got == {"a": 3, "b": 0.5, "c": True, "d": None}
    assert [type(v) for v in got.values()] == [int, float, bool, type(None)]


def test_a_tampered_worker_json_is_a_runner_error(tmp_path: Path) -> None:
    status = {"hyperparameters": {"main": {"lam": {"nested": 1}}}}
    with pytest.raises(RunnerError) as err:
        worker_hyperparameters(status, tmp_path)
    assert str(err.value) == (
        f"{tmp_path / WORKER_JSON}: hyperparameters['main']['lam'] is a dict; expected {KINDS}"
    )
    with pytest.raises(RunnerError, match="names the fit 'other'; fits are main, validation"):
        worker_hyperparameters({"hyperparameters": {"other": {}}}, tmp_path)
    assert worker_hyperparameters({}, tmp_path) == {}


def test_a_record_with_unbounded_hyperparameters_is_refused() -> None:
    record = store_records.make_record()
    data = json.loads(record.model_dump_json())
    data["hyperparameters"] = {"main": {"big": "x" * 1000}}
    with pytest.raises(ValidationError, match=r"hyperparameters\['main'\]\['big'\] is a string"):
        RunRecord.model_validate(data)


# -- submission.yaml: links and BibTeX ------------------------------------------------------


def _manifest(tmp_path: Path, extra: str) -> Path:
    package = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / "submission.yaml"
    text = path.read_text(encoding="utf-8")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("paper:"))
    path.write_text(text + "\n" + extra, encoding="utf-8")
    return package


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("code: javascript:alert(1)", "'javascript:alert(1)': not an http(s) URL"),
        ("paper: 10.1109/TPAMI.2015.2487986", "'10.1109/TPAMI.2015.2487986': not an http(s) URL"),
        ("url: file:///etc/passwd", "'file:///etc/passwd': not an http(s) URL"),
        ("code: 'https://x.org/a b'", "holds a space, a control character or a backslash"),
        ("bibtex: 'not bibtex'", "a BibTeX entry starts with '@'"),
    ],
)
def test_bad_links_and_bibtex_are_refused(tmp_path: Path, line: str, message: str) -> None:
    package = _manifest(tmp_path, line + "\n")
    with pytest.raises(SubmissionError) as err:
        load_package(package)
    assert message in str(err.value)
    assert line.split(":")[0] in str(err.value)  # the message names the key


def test_bibtex_is_size_limited(tmp_path: Path) -> None:
    entry = "@misc{k, note = {" + "x" * BIBTEX_MAX_CHARS + "}}"
    package = _manifest(tmp_path, f"bibtex: '{entry}'\n")
    with pytest.raises(SubmissionError, match=f"at most {BIBTEX_MAX_CHARS} characters"):
        load_package(package)


def test_good_links_and_bibtex_load(tmp_path: Path) -> None:
    package = _manifest(
        tmp_path,
        "paper: https://doi.org/10.1109/x\ncode: https://github.com/x/y\n"
        "bibtex: |\n  @article{k,\n    title = {T}\n  }\n",
    )
    manifest = load_package(package).manifest
    assert (manifest.paper, manifest.code) == (
        "https://doi.org/10.1109/x",
        "https://github.com/x/y",
    )
    assert manifest.bibtex == "@article{k,\n  title = {T}\n}\n"


# -- a real run: model package -> worker -> runner outputs -> record -> store -> page --------

TINY = """\
import numpy as np


class Tiny:
    def fit(self, task):
        self.embedding_ = task.embedding
        self.hyperparameters_ = {HYPER}

    def save(self, directory):
        np.save(directory / "embedding.npy", self.embedding_)

    @classmethod
    def load(cls, directory):
        model = cls()
        model.embedding_ = np.load(directory / "embedding.npy")
        return model

    def predict(self, features, candidates):
        return np.asarray(features[:, :1] * 0 + self.embedding_[candidates, 0], dtype=np.float32)
"""


def _tiny(tmp_path: Path, hyper: str) -> Path:
    package = tmp_path / "tiny"
    package.mkdir()
    (package / "model.py").write_text(TINY.replace("{HYPER}", hyper), encoding="utf-8")
    (package / "README.md").write_text("# Tiny\n\nScores <b>by</b> the first attribute.\n")
    (package / "submission.yaml").write_text(
        "name: tiny\nversion: '1'\nauthors: [T. Ester]\nkind: model\n"
        "model:\n  entrypoint: model:Tiny\n"
        "code: https://example.org/tiny\n"
        "bibtex: '@misc{tiny, note = {<script>x</script>}}'\n",
        encoding="utf-8",
    )
    return package


@pytest.mark.slow
def test_hyperparameters_flow_from_a_model_into_the_store_and_the_page(tmp_path: Path) -> None:
    from harness.pipeline import run_submission

    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    package = _tiny(tmp_path, '{"alpha": np.float64(0.25), "depth": np.int64(3), "kind": "x"}')
    record = run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    chosen = {"alpha": 0.25, "depth": 3, "kind": "x"}
    assert record.hyperparameters == {"main": chosen, "validation": chosen}
    assert record.submission.code == "https://example.org/tiny"
    assert record.submission.readme.startswith("# Tiny")
    unseen = [c for c in record.benchmark.test_classes if c.unseen]
    assert len(unseen) == record.benchmark.n_unseen == 20
    assert all(c.relation is not None for c in unseen)
    (stored,) = load_runs(open_store(db))
    assert stored == record
    build_site([stored], tmp_path / "site")
    path, page = _page(tmp_path / "site")
    assert body_rows(path, "hyperparameters") == [
        ["main", "alpha", "0.25"],
        ["main", "depth", "3"],
        ["main", "kind", "x"],
        ["validation", "alpha", "0.25"],
        ["validation", "depth", "3"],
        ["validation", "kind", "x"],
    ]
    summaries = [t for _, t in page.select("summary") if t.startswith("Per-class")]
    assert summaries == [
        "Per-class top1, ZSL: 20 classes, best first",
        "Per-class accuracy behind H (seen and unseen groups), GZSL: 100 classes, best first",
    ]
    names = {c.name for c in record.benchmark.test_classes if "zsl" in c.columns}
    shown = [t for _, t in page.select("th", "class-name")]
    assert set(shown[: len(names)]) == names  # the ZSL bars come first, all named


@pytest.mark.slow
def test_bad_hyperparameters_fail_the_run_with_the_key_named(tmp_path: Path) -> None:
    from harness.pipeline import run_submission

    db = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    package = _tiny(tmp_path, '{"weights": np.zeros(3)}')
    with pytest.raises(RunnerError) as err:
        run_submission(package, DEMO, runner="sandbox", database_url=db, quiet=True)
    assert f"after fit(): Tiny.hyperparameters_['weights'] is a ndarray; expected {KINDS}" in str(
        err.value
    )


def test_reference_methods_expose_what_validation_chose() -> None:
    for name in ("eszsl", "sae", "ale", "sje", "devise", "conse", "dap", "flat-seen-classifier"):
        text = (SUBMISSIONS / name / "model.py").read_text(encoding="utf-8")
        assert "self.hyperparameters_ = {" in text, name


# -- the store ------------------------------------------------------------------------------


def _full_record() -> RunRecord:
    record = store_records.make_record()
    return record.model_copy(
        update={
            "benchmark": record.benchmark.model_copy(
                update={"test_classes": _classes(("c0", "okapi", True, 0, "giraffe", 2, "sibling"))}
            ),
            "submission": record.submission.model_copy(
                update={"code": "https://x.org/c", "bibtex": "@misc{k}", "readme": "# R\n"}
            ),
            "hyperparameters": {"main": {"lambda": 0.1, "flag": True, "none": None}},
        }
    )


def test_new_fields_round_trip_through_the_store(store_url: str) -> None:
    engine = open_store(store_url)
    record = _full_record()
    save_run(engine, record)
    assert load_runs(engine) == [record]
    engine.dispose()


def test_migration_0005_keeps_rows_stored_at_0004(store_url: str) -> None:
    engine = open_store(store_url)
    save_run(engine, _full_record())
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0004")
    columns = {c["name"] for c in inspect(engine).get_columns("zsl_run")}
    assert "hyperparameters" not in columns
    # the run is now as a 0004 store holds it: without the new columns, rows kept
    upgrade(engine)
    for table, name in (
        ("zsl_run", "hyperparameters"),
        ("zsl_benchmark", "test_classes"),
        ("zsl_submission", "bibtex"),
        ("zsl_submission", "code"),
        ("zsl_submission", "readme"),
    ):
        assert name in {c["name"] for c in inspect(engine).get_columns(table)}
    (loaded,) = load_runs(engine)
    old = _full_record()
    assert loaded == old.model_copy(
        update={
            "hyperparameters": {},
            "benchmark": old.benchmark.model_copy(update={"test_classes": []}),
            "submission": old.submission.model_copy(
                update={"code": None, "bibtex": None, "readme": ""}
            ),
        }
    )
    later = old.model_copy(update={"created_at": old.created_at + timedelta(hours=1)})
    save_run(engine, later)
    assert load_runs(engine) == [later]
    engine.dispose()
