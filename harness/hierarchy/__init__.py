"""Frozen class hierarchies: the DAG, its graph queries, and the sources it is built from.

One module per job:

- :mod:`harness.hierarchy.dag` -- :class:`Hierarchy`, the frozen DAG, and every graph query as
  its method: parents, children and adjacency, ancestors and descendants, depth and height, LCA
  distances, hop distances. Derived data is cached on the (immutable) instance.
- :mod:`harness.hierarchy.lca` -- the LCA distances (Deng's LCA height, Bertinetto's max leaf
  depth minus the LCA's depth), vectorized.
- :mod:`harness.hierarchy.hops` -- the one breadth-first search behind every hop query, the hop
  queries, and the :class:`HopBalls` of :meth:`Hierarchy.hop_balls` (DeViSE's hCorrectSets).
- :mod:`harness.hierarchy.validation` -- the checks that make node ids and edges a DAG;
  :mod:`harness.hierarchy.forms` -- the JSON file, the array form and the content hash;
  :mod:`harness.hierarchy.csr` -- row access to the sparse rows the DAG is stored in.
- Sources, each building a :class:`Hierarchy`: :mod:`harness.hierarchy.wordnet` (WordNet 3.0
  through NLTK), :mod:`harness.hierarchy.class_maps` (class name -> WordNet maps and their
  hierarchies), :mod:`harness.hierarchy.cub_taxonomy` (the CUB Wikispecies taxonomy) and
  :mod:`harness.hierarchy.imagenet_isa` (ImageNet's ``wordnet.is_a.txt``).

Importing this package loads the DAG and its queries only; a source is imported by its module
(``from harness.hierarchy.wordnet import open_wordnet``), since sources pull in NLTK or the
data adapters. The definitions (depth, height, the LCA distances, hops) are in
``docs/hierarchy.md``.
"""

from harness.hierarchy.dag import Hierarchy
from harness.hierarchy.forms import FORMAT
from harness.hierarchy.hops import BallRadii, HopBalls
from harness.hierarchy.lca import LCA_DISTANCES, LcaDistance

__all__ = ["FORMAT", "LCA_DISTANCES", "BallRadii", "Hierarchy", "HopBalls", "LcaDistance"]
