"""Keeping the community hierarchy up to date after a run that changed part of the graph.

After an append or a delete whose counts were MERGEd (``graph.stage``), only the concepts the run
touched are *affected*: the ends of every pair whose count changed, and concepts that joined or left
the pruned graph. The hierarchy is updated locally:

1. level 0: every affected concept may move to the neighbouring level-0 community with the best
   modularity gain (the local-move phase of Louvain), while every other concept keeps its community;
   new concepts start alone. Sweeps repeat until no concept moves (``local_moves``).
2. levels below: every level-0 community that gained, lost or holds an affected concept is split again
   by the same per-community Louvain as a full build (``refine``); the others keep their whole subtree.

On a graph of at most ``communities.single_task_max_nodes`` kept concepts the moves run in the driver,
node by node (``local_moves``); on a larger one they run as Spark jobs, half the affected concepts
moving at once per sweep (``distributed_local_moves``), so nothing of the graph is collected.

Moving only what changed lets the partition drift away from what a full detection would find, so
each local update adds its *drift*, the share of the graph's community weight on changed pairs
(``changed_weight_share``), to the drift since the last full detection; when that sum passes
``communities.redetect_drift`` the hierarchy is detected from scratch again and the drift starts over.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lazygraph.communities.propagation import PropagationParams, iterate, materialize

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NEW_LABEL = "new:"


@dataclass
class LocalGraph:
    """What the local moves need, collected to the driver: every kept concept's weighted degree and
    level-0 label (None for a new concept), and the edges (with weights) at the affected concepts."""

    degree: dict[str, float]
    label: dict[str, str | None]
    edges: list[tuple[str, str, float]]
    affected: list[str]
    total_weight: float  # sum of all edge weights (m)


@dataclass
class MoveResult:
    label: dict[str, str]  # concept -> level-0 label after the moves
    moved: set[str] = field(default_factory=set)
    sweeps: int = 0


def local_moves(graph: LocalGraph, resolution: float = 1.0, max_sweeps: int = 10) -> MoveResult:
    """Louvain's local-move phase restricted to ``graph.affected``; everyone else stays put.

    A node joins the neighbouring community with the largest gain ``w(i, c) - resolution * k_i *
    tot_c / 2m`` (its own community scored without it), staying on ties; a new node starts alone.
    Nodes are visited in sorted order, so the result is repeatable.
    """
    label = {node: (own if own is not None else NEW_LABEL + node) for node, own in graph.label.items()}
    tot: dict[str, float] = defaultdict(float)
    for node, own in label.items():
        tot[own] += graph.degree.get(node, 0.0)
    neighbours: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for src, dst, weight in graph.edges:
        neighbours[src].append((dst, weight))
        neighbours[dst].append((src, weight))
    m2 = 2.0 * graph.total_weight
    result = MoveResult(label)
    if m2 <= 0:
        return result
    order = sorted(node for node in set(graph.affected) if node in label)
    for _ in range(max_sweeps):
        result.sweeps += 1
        moves = 0
        for node in order:
            if _move(node, label, tot, neighbours[node], graph.degree.get(node, 0.0), resolution / m2):
                result.moved.add(node)
                moves += 1
        if moves == 0:
            break
    return result


def distributed_local_moves(
    nodes: DataFrame, edges: DataFrame, params: PropagationParams, max_sweeps: int = 10
) -> tuple[DataFrame, int]:
    """The local moves of ``local_moves`` as Spark jobs, for a graph too large to hold in the driver.

    nodes: (node, label, k, m2, movable), every kept concept with its weighted degree, the graph's
    2m and whether it is affected; edges: (src, dst, w) in both directions. In each sweep a seeded
    half of the movable nodes moves at once to its best neighbouring label (the same gain as
    ``local_moves``; moving half at a time keeps neighbours from swapping labels forever), until two
    sweeps in a row move nothing. Returns the nodes with their new ``label`` and the moves made.
    """
    nodes = materialize(nodes)
    total, quiet = 0, 0
    for sweep in range(max_sweeps):
        nodes, moved = iterate(nodes, edges, sweep, params)
        total += moved
        quiet = quiet + 1 if moved == 0 else 0
        if quiet >= 2:
            break
    return nodes, total


def _move(
    node: str,
    label: dict[str, str],
    tot: dict[str, float],
    edges: list[tuple[str, float]],
    k: float,
    scale: float,
) -> bool:
    """Move ``node`` to its best community; True when it moved."""
    own = label[node]
    tot[own] -= k
    weight_to: dict[str, float] = defaultdict(float)
    for other, weight in edges:
        if other != node and other in label:
            weight_to[label[other]] += weight
    best, best_gain = own, weight_to.get(own, 0.0) - scale * k * tot[own]
    for community in sorted(weight_to):
        gain = weight_to[community] - scale * k * tot[community]
        if gain > best_gain + 1e-12:
            best, best_gain = community, gain
    label[node] = best
    tot[best] += k
    return best != own


def changed_weight_share(moved: float, total_weight: float) -> float:
    """Drift of one update: the community weight that moved on changed pairs (the sum of |new - old|,
    a pair outside the pruned graph weighing 0), over the total community weight of the graph now."""
    if total_weight <= 0:
        return 1.0 if moved > 0 else 0.0
    return moved / total_weight


def communities_to_redo(
    label: dict[str, str], old_label: dict[str, str | None], affected: set[str]
) -> set[str]:
    """Level-0 labels whose subtrees must be split again: every community that gained or lost a member
    or holds an affected concept. The others keep their subtrees."""
    members_now: dict[str, set[str]] = defaultdict(set)
    members_before: dict[str, set[str]] = defaultdict(set)
    for node, community in label.items():
        members_now[community].add(node)
    for node, community in old_label.items():
        if community is not None:
            members_before[community].add(node)
    redo = {label[node] for node in affected if node in label}
    redo |= {c for c in members_now if members_now[c] != members_before.get(c)}
    return redo


def summary(update: str, drift: float, threshold: float, **counts: Any) -> dict[str, Any]:
    """The record a run keeps of its community update (manifest, ``lazygraph stats``)."""
    return {"update": update, "drift": round(drift, 6), "threshold": threshold, **counts}
