"""Distributed modularity-aware label propagation with coarsening, on Spark DataFrames.

The graph is given as two DataFrames with 64-bit node ids:

* nodes: ``node`` and ``part`` (the parent community; labels never leave their part, and the
  modularity of a node's move is measured against its part's subgraph alone);
* edges: ``src``, ``dst``, ``w`` holding both directions of every undirected edge, both ends in the
  same part (coarsened graphs also carry self-loops ``src == dst`` for the weight inside a node).

One *pass* of label propagation lets every node adopt the neighbouring label with the best
modularity gain ``w(i, l) - resolution * k_i * K_l / 2m`` (Barber and Clark's LPAm; with
resolution 0 this is plain weighted label propagation). Synchronous updates oscillate (two
neighbours swapping labels forever), so each iteration lets only a seeded pseudo-random half of
the nodes move, a node keeps its label on ties, and two singletons may only merge towards the
smaller label. After a pass converges the communities become the nodes of a coarser graph and the
next pass runs on it, as in Louvain's aggregation phase; this is what lifts label propagation's
local optimum to a modularity close to Leiden's.

Every Spark iteration costs a fixed second or so of scheduling however small the graph, while the
coarse graphs of the later passes are orders of magnitude smaller than the concept graph. So once
a coarse graph has at most ``single_task_max_nodes`` nodes, each of its parts is finished by Louvain
(igraph) inside one Spark task (``groupBy(part).applyInPandas``) instead of by more passes. With
``single_task_max_edges`` set (2,000,000 by default), a whole graph within both bounds (the concept graph
of a corpus of some thousands of documents) skips propagation altogether: Louvain on the graph itself
comes closer to Leiden's modularity than propagation followed by Louvain on its coarse graph.

Every step is a DataFrame join or aggregation (nothing of the graph is collected to the driver);
each iteration's labels are checkpointed (``materialize``) so the lineage stays one iteration deep.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lazygraph.runtime.checkpoint import checkpoint, release_unreferenced

if TYPE_CHECKING:
    import pandas as pd

# An iteration this long shuffled enough of the graph for its files to matter on local disk: the
# JVM is asked to collect the previous iteration's (a second or so, against the iteration's minutes).
RELEASE_AFTER_SECONDS = 30.0

# Scores are sums of doubles whose order of addition may differ between runs; rounding them keeps
# ties ties, so tie-breaking (and therefore the result) stays deterministic.
_SCORE_DECIMALS = 9

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PropagationParams:
    resolution: float = 1.0
    max_iterations: int = 10
    max_passes: int = 4
    tolerance: float = 0.002
    seed: int = 7
    # Broadcast the node table in joins (graphs small enough for every task to hold it).
    broadcast: bool = True
    # A coarse graph (after at least one distributed pass) this small is finished by Louvain, one
    # part per task; 0 keeps every pass distributed.
    single_task_max_nodes: int = 0
    # A whole graph (before any pass) with at most single_task_max_nodes nodes and this many undirected
    # edges is partitioned by Louvain in one task straight away; 0 always propagates first.
    single_task_max_edges: int = 0


@dataclass
class PropagationStats:
    passes: int = 0
    iterations: list[int] = field(default_factory=list)
    moves: list[int] = field(default_factory=list)
    finished_by_louvain: bool = False


def materialize(df: DataFrame) -> DataFrame:
    """Compute df once and cut its lineage *and* its size estimate.

    The checkpoint is reliable (written to ``spark.checkpoint_dir``) on a cluster, so that losing an
    executor loses no iteration's labels, and local on ``local[*]`` (``runtime.checkpoint``). A checkpoint
    alone keeps the optimiser's size estimate of the plan it replaced; a join's
    estimate is the product of its inputs', so across iterations the estimate compounds into numbers
    with millions of digits and planning itself takes minutes. Re-wrapping the checkpointed rows as
    a new DataFrame (on the JVM side, nothing goes through Python) starts every iteration afresh;
    small tables are then broadcast by explicit hint.

    The checkpoint is eager (``runtime.checkpoint``): at 1M synthetic chunks, lazy ones kept every past
    iteration's shuffle files and filled 70 GB of local disk before the first pass ended.
    """
    checkpointed = checkpoint(df)
    session = checkpointed.sparkSession
    fresh = session._jsparkSession.createDataFrame(checkpointed._jdf.rdd(), checkpointed._jdf.schema())
    return type(df)(fresh, session)


def _small(df: DataFrame, params: PropagationParams) -> DataFrame:
    return F.broadcast(df) if params.broadcast else df


def with_degrees(nodes: DataFrame, edges: DataFrame) -> DataFrame:
    """nodes(node, part) -> nodes(node, part, k, m2): weighted degree and its part's total (2m)."""
    degrees = edges.groupBy(F.col("src").alias("node")).agg(F.sum("w").alias("k"))
    nodes = nodes.join(degrees, "node", "left").fillna(0.0, subset=["k"])
    part_totals = nodes.groupBy("part").agg(F.sum("k").alias("m2"))
    return nodes.join(part_totals, "part")


def _eligible(it: int, params: PropagationParams) -> Column:
    """A seeded pseudo-random half of the nodes, a different half every iteration."""
    return F.pmod(F.xxhash64(F.col("node"), F.lit(params.seed), F.lit(it)), F.lit(2)) == 0


def propagate_once(nodes: DataFrame, edges: DataFrame, it: int, params: PropagationParams) -> DataFrame:
    """One iteration: nodes(node, part, k, m2, label) -> the same with the new label and ``moved``.

    With a boolean ``movable`` column only those nodes may move (an incremental update's local moves);
    every node's label still counts in the communities' totals."""
    totals = nodes.groupBy("label").agg(F.sum("k").alias("tot"), F.count("*").alias("size"))
    eligible = _eligible(it, params) & (F.col("k") > 0)
    if "movable" in nodes.columns:
        eligible = eligible & F.col("movable")
    movers = (
        nodes.filter(eligible)
        .join(_small(totals, params), "label")
        .select(
            F.col("node").alias("src"),
            "k",
            "m2",
            F.col("label").alias("own"),
            F.col("tot").alias("own_tot"),
            F.col("size").alias("own_size"),
        )
    )
    labels = nodes.select(F.col("node").alias("dst"), F.col("label").alias("lbl"))
    candidates = (
        edges.filter(F.col("src") != F.col("dst"))
        .join(_small(labels, params), "dst")
        .join(_small(movers, params), "src")
        .groupBy("src", "lbl", "k", "m2", "own", "own_tot", "own_size")
        .agg(F.sum("w").alias("w_l"))
        .join(_small(totals.withColumnRenamed("label", "lbl"), params), "lbl")
    )
    is_own = F.col("lbl") == F.col("own")
    # K_l without the node itself, so staying and moving are scored alike.
    tot_without_node = F.col("tot") - F.when(is_own, F.col("k")).otherwise(F.lit(0.0))
    score = _score(F.col("w_l"), tot_without_node, params)
    # Two singletons joining each other at once would just swap labels: only the larger label moves.
    swap = (F.col("own_size") == 1) & (F.col("size") == 1) & (F.col("lbl") > F.col("own"))
    tie_break = F.xxhash64(F.col("lbl"), F.lit(params.seed), F.lit(it))
    choice = F.struct(score.alias("s"), tie_break.alias("t"), F.col("lbl").alias("l"))
    best = (
        candidates.groupBy("src", "k", "own_tot", "m2")
        .agg(
            F.max(F.when(~is_own & ~swap, choice)).alias("b"),
            F.max(F.when(is_own, score)).alias("own_score"),
        )
        # A node without a neighbour in its own community scores 0 - resolution * k * (K_own - k) / 2m there.
        .filter(
            F.col("b.s") > F.coalesce("own_score", _score(F.lit(0.0), F.col("own_tot") - F.col("k"), params))
        )
        .select(F.col("src").alias("node"), F.col("b.l").alias("best"))
    )
    return (
        nodes.join(_small(best, params), "node", "left")
        .withColumn("moved", F.col("best").isNotNull())
        .withColumn("label", F.coalesce(F.col("best"), F.col("label")))
        .drop("best")
    )


def _score(w_l: Column, tot_without_node: Column, params: PropagationParams) -> Column:
    """Modularity gain of joining a label, up to a factor common to all of a node's candidates."""
    gain = w_l - F.lit(params.resolution) * F.col("k") * tot_without_node / F.col("m2")
    return F.round(gain, _SCORE_DECIMALS)


def iterate(nodes: DataFrame, edges: DataFrame, it: int, params: PropagationParams) -> tuple[DataFrame, int]:
    """One iteration (``propagate_once``) computed and stored: the new nodes and how many moved."""
    started = time.perf_counter()
    updated = materialize(propagate_once(nodes, edges, it, params))
    moved = updated.filter("moved").count()
    seconds = time.perf_counter() - started
    log.debug("iteration %d: %d nodes moved (%.2f s)", it, moved, seconds)
    if seconds >= RELEASE_AFTER_SECONDS:
        release_unreferenced(updated.sparkSession)
    return updated.drop("moved"), moved


def label_propagation_pass(
    nodes: DataFrame, edges: DataFrame, params: PropagationParams, stats: PropagationStats
) -> tuple[DataFrame, int]:
    """Run iterations until few nodes move; returns nodes with ``label`` and the total moves."""
    nodes = materialize(nodes.withColumn("label", F.col("node")))
    active = nodes.filter(F.col("k") > 0).count()
    threshold = max(1, int(params.tolerance * active))
    total_moves = 0
    iterations = 0
    quiet = 0
    for it in range(params.max_iterations):
        iterations += 1
        nodes, moved = iterate(nodes, edges, it, params)
        total_moves += moved
        # Each iteration moves only half the nodes: stop after two quiet iterations in a row.
        quiet = quiet + 1 if moved < threshold else 0
        if quiet >= 2:
            break
    stats.iterations.append(iterations)
    stats.moves.append(total_moves)
    return nodes, total_moves


def coarsen(nodes: DataFrame, edges: DataFrame, params: PropagationParams) -> tuple[DataFrame, DataFrame]:
    """Communities become nodes: weights between them summed, weights inside kept as self-loops."""
    labels = nodes.select("node", "label")
    coarse_edges = (
        edges.join(_small(labels.withColumnRenamed("node", "src"), params), "src")
        .join(
            _small(labels.select(F.col("node").alias("dst"), F.col("label").alias("dst_label")), params),
            "dst",
        )
        .groupBy(F.col("label").alias("src"), F.col("dst_label").alias("dst"))
        .agg(F.sum("w").alias("w"))
    )
    coarse_nodes = nodes.groupBy(F.col("label").alias("node")).agg(
        F.first("part").alias("part"), F.sum("k").alias("k"), F.first("m2").alias("m2")
    )
    return materialize(coarse_nodes), materialize(coarse_edges.repartition("src"))


def partition(
    nodes: DataFrame, edges: DataFrame, params: PropagationParams, stats: PropagationStats | None = None
) -> DataFrame:
    """nodes(node, part), edges(src, dst, w) -> (node, label) with labels that never cross parts.

    A label is the id of one node of the same part (not necessarily a member), unique per community.
    """
    stats = stats if stats is not None else PropagationStats()
    graph_nodes = materialize(with_degrees(nodes, edges))
    membership = graph_nodes.select("node", F.col("node").alias("label"))
    graph_edges = edges
    if _fits_one_task(graph_nodes, edges, params):
        # Label propagation exists to spread a graph too large for one task; one that fits gets
        # Louvain's modularity (and saves the iterations' fixed cost).
        stats.finished_by_louvain = True
        return _follow(membership, finish_with_louvain(graph_nodes, edges, params), params)
    for _ in range(params.max_passes):
        labelled, moves = label_propagation_pass(graph_nodes, graph_edges, params, stats)
        stats.passes += 1
        if moves == 0:
            break
        membership = _follow(membership, labelled.select("node", F.col("label").alias("next")), params)
        graph_nodes, graph_edges = coarsen(labelled, graph_edges, params)
        if 0 < graph_nodes.count() <= params.single_task_max_nodes:
            stats.finished_by_louvain = True
            return _follow(membership, finish_with_louvain(graph_nodes, graph_edges, params), params)
    return membership


def _fits_one_task(nodes: DataFrame, edges: DataFrame, params: PropagationParams) -> bool:
    """True when the whole graph is within both single-task bounds (edges holds both directions)."""
    if params.single_task_max_edges <= 0 or not 0 < nodes.count() <= params.single_task_max_nodes:
        return False
    return edges.count() <= 2 * params.single_task_max_edges


def _follow(membership: DataFrame, step: DataFrame, params: PropagationParams) -> DataFrame:
    """membership(node, label) through step(node = old label, next) -> membership(node, next)."""
    step = step.select(F.col("node").alias("label"), "next")
    return materialize(
        membership.join(_small(step, params), "label").select("node", F.col("next").alias("label"))
    )


def finish_with_louvain(nodes: DataFrame, edges: DataFrame, params: PropagationParams) -> DataFrame:
    """Louvain on each part of a (coarse) graph, one part per task -> (node, next).

    ``next`` is the smallest node id of the node's Louvain community, unique across parts. A
    self-loop carries the weight inside a coarse node counted from both ends, i.e. twice the
    undirected weight, which is what igraph expects a self-loop's weight to be halved from.
    """
    from lazygraph.communities.refine import GROUP_SCHEMA

    part_of = nodes.select("node", "part")
    node_rows = nodes.select(
        "part", F.col("node").alias("src"), F.col("node").alias("dst"), F.lit(None).cast("double").alias("w")
    )
    edge_rows = (
        edges.filter(F.col("src") <= F.col("dst"))
        .join(_small(part_of.withColumnRenamed("node", "src"), params), "src")
        .select(
            "part",
            "src",
            "dst",
            F.when(F.col("src") == F.col("dst"), F.col("w") / 2).otherwise(F.col("w")).alias("w"),
        )
    )
    resolution, seed = params.resolution, params.seed

    def solve(group: pd.DataFrame) -> pd.DataFrame:
        from lazygraph.communities.refine import louvain_on_rows

        return louvain_on_rows(group, resolution, seed)

    columns = [column.split()[0] for column in GROUP_SCHEMA.split(", ")]
    rows = node_rows.unionByName(edge_rows).select(*columns)
    return rows.groupBy("part").applyInPandas(solve, schema="node long, next long")
