"""Partition quality: weighted modularity in Spark, and a single-machine Leiden for comparison.

``leiden_modularity`` collects the graph into one process (igraph + leidenalg); it is a yardstick
for benchmarks and tests, never part of indexing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

if TYPE_CHECKING:
    import igraph
    import pandas as pd
    from pyspark.sql import SparkSession


def modularity(
    spark: SparkSession,
    edges_df: DataFrame,
    assignment_df: DataFrame,
    resolution: float = 1.0,
    weight_col: str = "weight",
) -> float:
    """Weighted modularity of an undirected graph under a partition, computed by Spark.

    edges_df: src, dst and ``weight_col``, each undirected edge once (self-loops ignored).
    assignment_df: concept_id, community_id (one level). Edges with an unassigned end are ignored.
    Returns 0.0 for a graph without edges.
    """
    del spark  # the DataFrames carry their session; kept for a uniform stage signature
    edges = edges_df.filter(F.col("src") != F.col("dst")).select("src", "dst", F.col(weight_col).alias("w"))
    assignment = assignment_df.select("concept_id", "community_id")
    labelled = edges.join(
        assignment.select(F.col("concept_id").alias("src"), F.col("community_id").alias("c_src")), "src"
    ).join(assignment.select(F.col("concept_id").alias("dst"), F.col("community_id").alias("c_dst")), "dst")
    ends = labelled.select(F.col("c_src").alias("c"), "w").unionByName(
        labelled.select(F.col("c_dst").alias("c"), "w")
    )
    community_degree = ends.groupBy("c").agg(F.sum("w").alias("d"))
    totals = labelled.agg(
        F.sum("w").alias("m"), F.sum(F.when(F.col("c_src") == F.col("c_dst"), F.col("w"))).alias("inside")
    ).crossJoin(community_degree.agg(F.sum(F.col("d") * F.col("d")).alias("d2")))
    row = totals.first()
    if row is None or not row["m"]:
        return 0.0
    m = float(row["m"])
    return float(row["inside"] or 0.0) / m - resolution * float(row["d2"]) / (4.0 * m * m)


def _igraph(edges: pd.DataFrame, weight_col: str) -> tuple[igraph.Graph, list[str]]:
    import igraph

    edges = edges[edges["src"] != edges["dst"]]
    names = sorted(set(edges["src"]).union(edges["dst"]))
    index = {name: i for i, name in enumerate(names)}
    graph = igraph.Graph(
        n=len(names),
        edges=list(zip(edges["src"].map(index), edges["dst"].map(index), strict=True)),
        edge_attrs={"weight": edges[weight_col].astype(float).tolist()},
    )
    return graph, names


def leiden_partition(
    edges: pd.DataFrame, weight_col: str = "weight", seed: int = 0
) -> tuple[float, dict[str, int]]:
    """Leiden (modularity) on one machine: (modularity, node -> community index)."""
    import leidenalg

    graph, names = _igraph(edges, weight_col)
    if graph.ecount() == 0:
        return 0.0, {name: i for i, name in enumerate(names)}
    found = leidenalg.find_partition(
        graph, leidenalg.ModularityVertexPartition, weights="weight", n_iterations=-1, seed=seed
    )
    score = graph.modularity(found.membership, weights="weight")
    return float(score), dict(zip(names, found.membership, strict=True))


def leiden_modularity(edges: pd.DataFrame, weight_col: str = "weight", seed: int = 0) -> float:
    """Modularity Leiden reaches on the same weighted, undirected edge list (src, dst, weight)."""
    return leiden_partition(edges, weight_col, seed)[0]


def local_modularity(edges: pd.DataFrame, assignment: dict[str, object], weight_col: str = "weight") -> float:
    """igraph's modularity of a given partition: an independent check of the Spark figure."""
    graph, names = _igraph(edges, weight_col)
    codes: dict[object, int] = {}
    membership = [codes.setdefault(assignment[name], len(codes)) for name in names]
    return float(graph.modularity(membership, weights="weight")) if graph.ecount() else 0.0
