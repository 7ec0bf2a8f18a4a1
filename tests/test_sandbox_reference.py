"""Every shipped model-code submission scores identically under `sandbox` and `local`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.class_embedding import not_applicable_reason
from harness.pipeline import run_submission
from harness.records import RunRecord
from harness.runners.sandbox import available
from harness.spec import load_spec
from harness.submission.package import load_package
from tests.conftest import SPECS, SUBMISSIONS

pytestmark = pytest.mark.slow  # end to end: `make test-fast` leaves it out

#: The model packages that run on the demo (`zsl demo` skips those whose declared class
#: embedding kind the demo lacks: the CLIP packages; tests/test_clip_end_to_end.py runs them).
MODEL_PACKAGES = sorted(
    p.parent.name
    for p in SUBMISSIONS.glob("*/submission.yaml")
    if (manifest := load_package(p.parent).manifest).kind == "model"
    and not_applicable_reason(manifest.declarations.class_embedding, load_spec(SPECS / "demo.yaml"))
    is None
)


@pytest.mark.skipif(not available(), reason="bubblewrap (bwrap) is not installed or not usable")
@pytest.mark.parametrize("name", MODEL_PACKAGES)
def test_sandbox_and_local_give_identical_scores(
    name: str, demo_record: Callable[[str], RunRecord]
) -> None:
    # `zsl demo`'s run of the package (the session's): in the sandbox, the default runner here.
    boxed = demo_record(name)
    assert boxed.runner == "sandbox"
    local = run_submission(
        SUBMISSIONS / name, SPECS / "demo.yaml", runner="local", store=False, quiet=True
    )
    assert local.runner == "local"
    assert boxed.predictions_hashes == local.predictions_hashes
    assert [(e.metric, e.value) for e in boxed.scores] == [
        (e.metric, e.value) for e in local.scores
    ]
