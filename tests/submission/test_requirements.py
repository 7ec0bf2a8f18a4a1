"""Declared requirements against an environment's installed distributions (issue 29, item 5).

``model.requirements: [lightgbm==4.5.0]`` used to be ignored until the sandbox's import failed
with ModuleNotFoundError. :func:`compare_requirements` decides from the environment's metadata:
a missing distribution, or a version outside the specifier; markers and name normalisation as
pip reads them. Requirements pip would read as a URL, an option or an editable install never
reach it: package validation refuses them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.errors import SubmissionError
from harness.submission.package import load_package
from harness.submission.requirements import (
    Distributions,
    RequirementReport,
    UnmetRequirement,
    compare_requirements,
)
from tests.conftest import SUBMISSIONS

HERE = {"python_version": "3.11", "sys_platform": "linux"}
ENV = Distributions.from_pairs(
    [("numpy", "2.4.6"), ("Scikit_Learn", "1.9.1"), ("torch", "2.14.1"), ("pre", "2.0rc1")],
    HERE,
)


def test_a_met_requirement_reports_nothing() -> None:
    declared = ["numpy>=1.24", "torch>=2.13,<2.15", "numpy"]
    assert compare_requirements(declared, ENV) == RequirementReport((), ())


def test_a_missing_distribution_and_a_version_outside_the_specifier() -> None:
    report = compare_requirements(["lightgbm==4.5.0", "torch==2.13.0", "numpy>=1"], ENV)
    assert report.unmet == (
        UnmetRequirement("lightgbm==4.5.0", "lightgbm", None),
        UnmetRequirement("torch==2.13.0", "torch", "2.14.1"),
    )
    assert [str(u) for u in report.unmet] == [
        "lightgbm==4.5.0: lightgbm is not installed",
        "torch==2.13.0: torch 2.14.1 is installed",
    ]


def test_every_unmet_requirement_is_reported_in_declared_order() -> None:
    declared = ["zeta==1", "numpy<2", "alpha>=3", "numpy>=2", "torch<1"]
    report = compare_requirements(declared, ENV)
    assert [u.requirement for u in report.unmet] == ["zeta==1", "numpy<2", "alpha>=3", "torch<1"]


def test_a_marker_that_does_not_hold_here_asks_for_nothing() -> None:
    declared = ['lightgbm==4.5.0; python_version < "3"', 'numpy>=99; sys_platform == "win32"']
    assert compare_requirements(declared, ENV) == RequirementReport((), tuple(declared))
    # ... and one that holds is checked like any other.
    held = compare_requirements(['lightgbm==4.5.0; python_version >= "3"'], ENV)
    assert [u.name for u in held.unmet] == ["lightgbm"] and held.not_here == ()
    # The environment's markers decide, not the harness's own interpreter.
    old = Distributions.from_pairs([], {"python_version": "2.7"})
    assert compare_requirements(['x; python_version < "3"'], old).unmet[0].name == "x"


@pytest.mark.parametrize(
    ("declared", "installed"),
    [
        ("Scikit_Learn>=1.0", "scikit-learn"),
        ("scikit-learn>=1.0", "Scikit_Learn"),
        ("SCIKIT.learn>=1.0", "scikit__learn"),
    ],
)
def test_names_compare_as_pip_normalises_them(declared: str, installed: str) -> None:
    env = Distributions.from_pairs([(installed, "1.9.1")], HERE)
    assert compare_requirements([declared], env).unmet == ()
    assert compare_requirements([declared.replace(">=1.0", ">=2")], env).unmet[0].installed == (
        "1.9.1"
    )


def test_pre_releases_and_versions_that_are_not_pep440() -> None:
    # As `pip check`: an installed pre-release counts when the range holds it.
    assert compare_requirements(["pre>=1.5"], ENV).unmet == ()
    env = Distributions.from_pairs([("odd", "not-a-version")], HERE)
    assert compare_requirements(["odd"], env).unmet == ()
    assert compare_requirements(["odd>=1"], env).unmet[0].installed == "not-a-version"


def test_the_first_distribution_of_a_name_wins() -> None:
    env = Distributions.from_pairs([("numpy", "2.4.6"), ("NumPy", "1.0")])
    assert env.versions == {"numpy": "2.4.6"}


def test_an_environment_is_read_from_metadata_without_importing(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    info = site / "Light_GBM-4.5.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Light_GBM\nVersion: 4.5.0\n")
    # A module that fails if anything imports it: the check must not.
    (site / "light_gbm.py").write_text("raise SystemExit('imported')\n")
    env = Distributions.installed([str(site)])
    assert env.versions == {"light-gbm": "4.5.0"}
    assert env.markers["python_version"] == "3.11"
    assert compare_requirements(["light-gbm==4.5.0", "light_gbm<4"], env).unmet == (
        UnmetRequirement("light_gbm<4", "light_gbm", "4.5.0"),
    )


@pytest.mark.parametrize(
    ("requirement", "problem"),
    [
        ("lightgbm @ https://example.com/lightgbm-4.5.0.whl", "a direct reference"),
        ("-e .", "not a PEP 508 requirement"),
        ("-e git+https://github.com/microsoft/LightGBM", "not a PEP 508 requirement"),
        ("--index-url=https://evil.example/simple", "not a PEP 508 requirement"),
        ("./lightgbm", "not a PEP 508 requirement"),
    ],
)
def test_urls_and_editables_are_refused_when_the_package_is_loaded(
    tmp_path: Path, requirement: str, problem: str
) -> None:
    root = tmp_path / "pkg"
    shutil.copytree(SUBMISSIONS / "eszsl", root, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = root / "submission.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "  entrypoint: model:ESZSL",
            f"  entrypoint: model:ESZSL\n  requirements: [{requirement!r}]",
        )
    )
    with pytest.raises(SubmissionError, match=r"submission\.yaml:11: model\.requirements") as err:
        load_package(root)
    assert problem in str(err.value)
