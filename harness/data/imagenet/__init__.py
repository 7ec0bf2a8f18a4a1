"""ImageNet-21K zero-shot benchmarks, one module per job.

- :mod:`~harness.data.imagenet.splits`: split names, hop splits, literature and other class
  lists, populated splits, and the structure of a split (which classes a benchmark tests);
- :mod:`~harness.data.imagenet.features`: the user's feature directory, opened, checked and
  gathered a bounded chunk at a time (which images it tests on);
- :mod:`~harness.data.imagenet.adapter`: the ``imagenet`` data adapter, which joins the two into
  a frozen benchmark (:mod:`harness.data` imports it, which registers it).

Import names from the module that defines them.
"""

__all__ = ["adapter", "features", "splits"]
