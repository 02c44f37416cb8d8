"""Synthetic concept graphs with planted communities, for tests and the community benchmark."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lazygraph.nlp.normalise import concept_id


@dataclass
class SyntheticGraph:
    concepts: pd.DataFrame  # concept_id, name, frequency
    edges: pd.DataFrame  # src, dst (src < dst), weight (NPMI-like), cooccurrence
    planted: dict[str, int]  # concept_id -> planted group


def planted_partition(
    n_nodes: int, n_groups: int, mean_degree: float = 10.0, mixing: float = 0.2, seed: int = 0
) -> SyntheticGraph:
    """Groups of uneven size; each node has ~mean_degree edges, a ``mixing`` share leaving its group."""
    rng = np.random.default_rng(seed)
    shares = rng.dirichlet(np.full(n_groups, 2.0))
    group = rng.choice(n_groups, size=n_nodes, p=shares)
    members = [np.flatnonzero(group == g) for g in range(n_groups)]
    n_edges = int(n_nodes * mean_degree / 2)
    left = rng.integers(0, n_nodes, size=n_edges)
    inside = rng.random(n_edges) >= mixing
    right = rng.integers(0, n_nodes, size=n_edges)
    for i in np.flatnonzero(inside):
        pool = members[group[left[i]]]
        right[i] = pool[rng.integers(0, len(pool))]
    return _graph([f"concept {i}" for i in range(n_nodes)], left, right, inside, group, rng)


def _graph(
    names: list[str],
    left: np.ndarray,
    right: np.ndarray,
    inside: np.ndarray,
    group: np.ndarray,
    rng: np.random.Generator,
) -> SyntheticGraph:
    ids = [concept_id(name) for name in names]
    frequency = rng.integers(2, 50, size=len(names))
    concepts = pd.DataFrame({"concept_id": ids, "name": names, "frequency": frequency.astype("int64")})
    keep = left != right
    a = np.array(ids, dtype=object)[left[keep]]
    b = np.array(ids, dtype=object)[right[keep]]
    same = inside[keep]
    # Inside edges get stronger associations than edges across groups, as NPMI would.
    weight = np.where(same, rng.uniform(0.2, 0.9, size=len(a)), rng.uniform(-0.1, 0.4, size=len(a)))
    edges = pd.DataFrame(
        {
            "src": np.where(a < b, a, b),
            "dst": np.where(a < b, b, a),
            "weight": weight,
            "cooccurrence": rng.integers(1, 6, size=len(a)).astype("int64"),
        }
    )
    edges = edges.groupby(["src", "dst"], as_index=False).agg({"weight": "max", "cooccurrence": "sum"})
    return SyntheticGraph(concepts, edges, dict(zip(ids, group.tolist(), strict=True)))
