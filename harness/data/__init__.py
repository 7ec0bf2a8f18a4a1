"""Data: adapters per raw source, the frozen artifact format, and ``prepare``."""

from harness.data import demo as _demo  # noqa: F401  (registers the 'demo' adapter)
from harness.data import feature_set as _feature_set  # noqa: F401  (registers 'feature-set')
from harness.data import xlsa17 as _xlsa17  # noqa: F401  (registers 'xlsa17')
from harness.data.adapters import RawBenchmark, adapters
from harness.data.artifacts import FrozenBenchmark
from harness.data.imagenet import adapter as _imagenet  # noqa: F401  (registers 'imagenet')

__all__ = ["FrozenBenchmark", "RawBenchmark", "adapters"]
