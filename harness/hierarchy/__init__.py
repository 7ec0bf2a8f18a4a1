"""Frozen class hierarchies: the DAG, its graph queries, and the sources it is built from.

One module per job:

- :mod:`harness.hierarchy.dag` -- :class:`Hierarchy`, the frozen DAG, its JSON and array forms,
  and every graph query: parents, children and adjacency, ancestors and descendants, depth and
  height, LCA distances (Deng's LCA height, Bertinetto's max leaf depth minus the LCA's depth),
  hop distances. Derived data is cached on the (immutable) instance.
- :mod:`harness.hierarchy.hops` -- the one breadth-first search behind every hop query, and
  the :class:`HopBalls` of :meth:`Hierarchy.hop_balls` (DeViSE's hCorrectSets).
- Sources, each building a :class:`Hierarchy`: :mod:`harness.hierarchy.wordnet` (WordNet 3.0
  through NLTK), :mod:`harness.hierarchy.class_maps` (class name -> WordNet maps and their
  hierarchies), :mod:`harness.hierarchy.cub_taxonomy` (the CUB Wikispecies taxonomy) and
  :mod:`harness.hierarchy.imagenet_isa` (ImageNet's ``wordnet.is_a.txt``).

Importing this package loads the DAG and its queries only; a source is imported by its module
(``from harness.hierarchy.wordnet import open_wordnet``), since sources pull in NLTK or the
data adapters.
"""

from harness.hierarchy.dag import FORMAT, LCA_DISTANCES, Hierarchy, LcaDistance
from harness.hierarchy.hops import BallRadii, HopBalls

__all__ = ["FORMAT", "LCA_DISTANCES", "BallRadii", "Hierarchy", "HopBalls", "LcaDistance"]
