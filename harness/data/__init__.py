"""Data: adapters per raw source, the frozen artifact format, and ``prepare``.

Each adapter module registers its adapter when imported; :data:`ADAPTERS` names them as lazy
registry entries, so a spec's adapter is imported when a benchmark is prepared or described,
and loading a spec (or ``zsl run --help``) imports none of them.
"""

from harness.data.adapters import RawBenchmark, adapters
from harness.data.artifacts import FrozenBenchmark

#: Each built-in adapter's name and the module that registers it. Lazy entries, one import each,
#: not the registry's ``add_modules`` as the metric families: importing all four on every spec
#: load would cost 80-150 ms (NumPy's submodules, urllib and ssl for the downloads).
ADAPTERS: dict[str, str] = {
    "demo": "harness.data.demo",
    "feature-set": "harness.data.feature_set",
    "xlsa17": "harness.data.xlsa17",
    "imagenet": "harness.data.imagenet.adapter",
}
for _name, _module in ADAPTERS.items():
    adapters.add_lazy(_name, _module)

__all__ = ["ADAPTERS", "FrozenBenchmark", "RawBenchmark", "adapters"]
