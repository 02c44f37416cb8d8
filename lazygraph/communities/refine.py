"""Deeper community levels: every level-0 community refined by Louvain inside one Spark task.

Level 0 is the distributed partition of the whole graph (``propagation``); after it, each community
is independent of the others, so the levels below it are a per-group computation. One
``groupBy(parent).applyInPandas`` ships every level-0 community (its members and the edges inside
it) to a Python worker, which runs Louvain (igraph) on that subgraph, then again inside each of
the communities it found, down to ``max_levels``. This replaces one round of Spark jobs per label
propagation iteration per level with a single job, and lets the leaves be held to
``max_community_size``: a leaf that is still too large is re-split at a doubled resolution until
every part fits. Nothing of the graph is collected to the driver; the largest unit of work is one
level-0 community, or one piece of a community above ``communities.split_above_nodes``, which is cut
by distributed propagation first (``hierarchy.task_units``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

REFINED_SCHEMA = "node long, level int, label long"
# The rows one group receives: a node row has src = dst = the node and w null (a null in a long
# column would turn it into float64 in pandas and round the 64-bit ids); an edge row has both ends.
GROUP_SCHEMA = "part long, src long, dst long, w double"


@dataclass(frozen=True)
class RefineParams:
    levels: int  # levels below level 0 to produce (max_levels - 1)
    min_split_size: int
    max_community_size: int
    resolution: float
    seed: int


def modularity_membership(
    n: int, edges: np.ndarray, weights: np.ndarray, resolution: float, seed: int
) -> list[int]:
    """Louvain membership of a weighted undirected graph on nodes 0..n-1 (singletons without edges).

    igraph's multilevel (Louvain) rather than leidenalg's Leiden: a pass of igraph's implementation
    only continues while modularity strictly rises, so it always terminates, while leidenalg's
    optimiser can cycle forever on near-tied moves (floating-point noise; seen here on a 12-node
    community of the 4x wiki2mh graph, depending on the order the rows arrived in).
    """
    if len(edges) == 0:
        return list(range(n))
    import random

    import igraph

    random.seed(seed)  # python-igraph draws its random node order from the random module
    graph = igraph.Graph(n=n, edges=edges.tolist(), directed=False)
    graph.es["weight"] = weights.tolist()
    return list(graph.community_multilevel(weights="weight", resolution=resolution).membership)


class _Subgraphs:
    """One group's graph with its members as local indices, and induced subgraphs on demand."""

    def __init__(self, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> None:
        self.nodes = nodes
        index = {int(node): i for i, node in enumerate(nodes)}
        self.src = np.fromiter((index[int(s)] for s in src), dtype=np.int64, count=len(src))
        self.dst = np.fromiter((index[int(d)] for d in dst), dtype=np.int64, count=len(dst))
        self.w = w

    def split(self, members: np.ndarray, resolution: float, seed: int) -> list[np.ndarray]:
        """Louvain parts of the subgraph induced by ``members`` (local indices)."""
        local = np.full(len(self.nodes), -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        inside = (local[self.src] >= 0) & (local[self.dst] >= 0)
        edges = np.stack([local[self.src[inside]], local[self.dst[inside]]], axis=1)
        membership = np.asarray(modularity_membership(len(members), edges, self.w[inside], resolution, seed))
        return [members[membership == label] for label in np.unique(membership)]


def _cap(graph: _Subgraphs, members: np.ndarray, params: RefineParams) -> list[np.ndarray]:
    """Split ``members`` until no part is larger than max_community_size."""
    done: list[np.ndarray] = []
    todo = [(members, params.resolution * 2)]
    while todo:
        part, resolution = todo.pop()
        if len(part) <= params.max_community_size:
            done.append(part)
            continue
        pieces = graph.split(part, resolution, params.seed)
        if len(pieces) == 1:
            # Louvain keeps it whole at this resolution: ask for finer parts.
            todo.append((part, resolution * 2))
        else:
            todo.extend((piece, resolution) for piece in pieces)
    return done


def refine_levels(
    nodes: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray, params: RefineParams
) -> list[list[np.ndarray]]:
    """Levels 1..params.levels inside one level-0 community, each a list of member-index arrays.

    Each community of a level is re-partitioned by Louvain on its own subgraph (only when it has at
    least min_split_size members); at the last level, parts above max_community_size are split
    further. Every level partitions all of ``nodes``.
    """
    graph = _Subgraphs(nodes, src, dst, w)
    current = [np.arange(len(nodes))]
    levels: list[list[np.ndarray]] = []
    for depth in range(1, params.levels + 1):
        deeper: list[np.ndarray] = []
        for members in current:
            parts = (
                graph.split(members, params.resolution, params.seed)
                if len(members) >= params.min_split_size
                else [members]
            )
            if depth == params.levels:
                parts = [leaf for part in parts for leaf in _cap(graph, part, params)]
            deeper.extend(parts)
        levels.append(deeper)
        current = deeper
    return levels


def _graph_arrays(group: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GROUP_SCHEMA rows -> node ids, edge sources, edge targets, edge weights, in a fixed order
    (rows reach a task in any order; sorting makes the result repeatable)."""
    is_node = group["w"].isna()
    edges = group.loc[~is_node].sort_values(["src", "dst"], kind="stable")
    return (
        np.sort(group.loc[is_node, "src"].to_numpy(dtype=np.int64)),
        edges["src"].to_numpy(dtype=np.int64),
        edges["dst"].to_numpy(dtype=np.int64),
        edges["w"].to_numpy(dtype=np.float64),
    )


def refine_group(group: pd.DataFrame, params: RefineParams) -> pd.DataFrame:
    """applyInPandas body: one level-0 community (GROUP_SCHEMA rows) -> (node, level, label) rows.

    A community is labelled by its smallest member id, which is unique across the whole level.
    """
    nodes, src, dst, w = _graph_arrays(group)
    return _rows(nodes, refine_levels(nodes, src, dst, w, params))


def louvain_on_rows(group: pd.DataFrame, resolution: float, seed: int) -> pd.DataFrame:
    """applyInPandas body: one graph (GROUP_SCHEMA rows) -> (node, next), next = its community's
    smallest member id."""
    nodes, src, dst, w = _graph_arrays(group)
    parts = _Subgraphs(nodes, src, dst, w).split(np.arange(len(nodes)), resolution, seed)
    rows = _rows(nodes, [parts])
    return pd.DataFrame({"node": rows["node"], "next": rows["label"]})


def _rows(nodes: np.ndarray, levels: Sequence[Sequence[np.ndarray]]) -> pd.DataFrame:
    out_node, out_level, out_label = [], [], []
    for depth, parts in enumerate(levels, start=1):
        for members in parts:
            ids = nodes[members]
            out_node.append(ids)
            out_level.append(np.full(len(ids), depth, dtype=np.int32))
            out_label.append(np.full(len(ids), ids.min(), dtype=np.int64))
    if not out_node:
        return pd.DataFrame({"node": [], "level": [], "label": []}).astype(
            {"node": "int64", "level": "int32", "label": "int64"}
        )
    columns = {"node": out_node, "level": out_level, "label": out_label}
    return pd.DataFrame({name: np.concatenate(parts) for name, parts in columns.items()})
