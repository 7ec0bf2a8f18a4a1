"""Frozen class hierarchies: the DAG, its graph queries, and the sources it is built from.

:class:`Hierarchy` (``dag.py``) is the frozen DAG with every graph query as a method; its steps
live beside it: ``lca.py`` (LCA distances), ``hops.py`` (the one hop search and the hop
queries), ``validation.py`` (what makes ids and edges a DAG), ``forms.py`` (JSON, arrays,
content hash), ``csr.py`` (sparse rows). Sources build one: ``wordnet.py``, ``class_maps.py``,
``cub_taxonomy.py``, ``imagenet_isa.py``; import them by module, since they pull in NLTK or the
data adapters. Terms and definitions: docs/hierarchy.md.
"""

from harness.hierarchy.dag import Hierarchy
from harness.hierarchy.forms import FORMAT
from harness.hierarchy.hops import BallRadii, HopBalls
from harness.hierarchy.lca import LCA_DISTANCES, LcaDistance

__all__ = ["FORMAT", "LCA_DISTANCES", "BallRadii", "Hierarchy", "HopBalls", "LcaDistance"]
