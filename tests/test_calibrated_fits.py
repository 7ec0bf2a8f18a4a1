"""Calibrated stacking across the two fits, end to end (issue 27 item 1).

The calibration gamma is chosen on the validation fit's scores and applied to the main fit's.
ESZSL's two fits choose different regularisers, and its score scale follows them: on the
AWA2-size fixture (256-d synthetic features, the real xlsa17 split files) the validation fit
picks lambda = 0.1 and the main fit lambda = 10, and the main fit's scores on the scale images
spread about 10x less than the validation fit's. A gamma applied as a number, in the validation
fit's units, then exceeded every test-seen image's seen-over-unseen margin: calibrated seen
accuracy 0 and cH 0, published in the record. Carried in units of each fit's score scale
(:mod:`harness.metrics.score_scale`) it keeps seen accuracy and cH at or above H.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.pipeline import run_submission
from tests.conftest import SUBMISSIONS
from tests.test_xlsa17_methods import _spec as xlsa17_fixture_spec
from tests.xlsa17_fixture import XLSA17, make_release

#: The fixture's feature dimension: 256 reproduces the bug (2048 does too, 5x slower to write
#: and fit); the module xlsa17 tests' 64 is not what the issue measured.
DIM = 256

pytestmark = pytest.mark.skipif(
    not (XLSA17 / "AWA2" / "att_splits.mat").is_file(), reason="shared xlsa17 files absent"
)


def _awa2_spec(tmp_path: Path) -> Path:
    """specs/xlsa17/awa2-ps.yaml on a ``DIM``-d fixture release in ``tmp_path`` (50 bootstrap
    resamples, as the xlsa17 method tests run it)."""
    release = tmp_path / "xlsa17"
    make_release(release, "AWA2", dim=DIM)
    spec = xlsa17_fixture_spec(tmp_path, "AWA2", release)
    data = yaml.safe_load(spec.read_text())
    data["features"]["dim"] = DIM
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


@pytest.mark.slow
def test_eszsl_calibrated_stacking_keeps_the_seen_classes(tmp_path: Path) -> None:
    record = run_submission(SUBMISSIONS / "eszsl", _awa2_spec(tmp_path), store=False, quiet=True)
    harmonic, calibrated = record.score("gzsl", "H"), record.score("gzsl", "cH")
    assert harmonic is not None and harmonic.interval is not None
    assert calibrated is not None
    details = calibrated.details
    # The bug's condition: the main fit's score unit is far from the validation fit's (measured
    # 0.0192 vs 0.197), so a gamma that is not carried lands on another scale.
    assert details["score_scale"] < details["score_scale_validation"] / 2, details
    # Measured on this fixture, 1000 resamples: H 59.9 [59.1, 60.7]; cH 77.6 [77.0, 78.1],
    # calibrated seen / unseen 70.3 / 86.5. Uncarried: cH 0.0, calibrated seen 0.0.
    assert details["seen"] > 0, details
    assert calibrated.value > 0, details
    # Calibration picks its gamma on validation, so on test it may fall short of H, but not by
    # more than noise: the half-width of H's bootstrap interval (0.8 points measured).
    noise = (harmonic.interval.hi - harmonic.interval.lo) / 2
    assert calibrated.value >= harmonic.value - noise, (calibrated.value, harmonic.value, noise)
