"""Concept statistics, the co-occurrence graph with NPMI weights, and pruning — all in Spark.

The graph is derived from two count tables, so that a run which adds or removes documents only has to
count what it changes (``stage``): per concept its mention, chunk and document frequencies
(``concept_statistics``), per concept pair the number of chunks that pair it (``pair_counts``).
Which concepts of a chunk are paired depends on the chunk alone: its ``max_concepts_per_chunk`` most
mentioned concepts (ties by concept id), at most ``max_pairs_per_chunk`` pairs, best ranked first.

Pruning (defaults in ``GraphSettings``) is then recomputed from the counts:

1. a concept is a *candidate* when it is mentioned at least ``min_concept_frequency`` times and
   is not over-general: it appears in at most ``max_document_frequency`` of all chunks (never
   fewer than ``df_pruning_floor`` chunks, so that tiny corpora keep their concepts);
2. edges are the counted pairs of two candidates, weighted by NPMI over the number of chunks;
3. an edge is kept when its NPMI weight is above ``min_edge_weight`` and not below the
   ``edge_weight_percentile``-th percentile of all edge weights;
4. a candidate is kept when its degree over kept edges is at least ``min_degree`` (one pass);
   edges survive only between kept concepts and ``degree`` is counted on the final graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lazygraph.settings import ConceptSettings, GraphSettings


@dataclass
class GraphTables:
    concepts: Any  # concept_id, name, kind, frequency, chunk_frequency, doc_frequency, degree, kept
    edges: Any  # src, dst, cooccurrence, weight, kept
    intermediates: tuple = ()  # cached inputs of the two tables, released with them
    mentions: Any = None  # the mentions the graph was built from (chunk_id, concept_id, count)
    # src, dst, cooccurrence delta of the pairs a run's MERGE changed; None when everything was recounted
    changed_pairs: Any = None
    # (concepts, edges) as pandas frames when they were derived in the driver (``graph_frames``), so the
    # communities stage reads them from here rather than collecting the Spark frames back; else None
    held: tuple[Any, Any] | None = None
    # src, dst of ``changed_pairs`` collected once, for the communities stage reading ``held``
    held_changes: Any = None

    def unpersist(self) -> None:
        for frame in (self.concepts, self.edges, *self.intermediates):
            frame.unpersist()
        self.held = self.held_changes = None


def npmi(cooccurrence: float, freq_a: float, freq_b: float, n: float) -> float:
    """Normalised PMI of two events counted over n trials, in [-1, 1] (pure; mirrors the Spark column)."""
    p_ab = cooccurrence / n
    if p_ab >= 1.0:
        return 1.0
    pmi = math.log(p_ab / ((freq_a / n) * (freq_b / n)))
    return max(-1.0, min(1.0, pmi / -math.log(p_ab)))


def max_chunk_frequency(cfg: GraphSettings, n_chunks: int) -> int:
    """Chunk count above which a concept is too general to be a graph node."""
    return max(int(math.floor(cfg.max_document_frequency * n_chunks)), cfg.df_pruning_floor)


def concept_statistics(mentions: Any, chunks: Any, names: Any) -> Any:
    """Frequencies of every concept in mentions; names: concept_id, name, kind (one row per id)."""
    from pyspark.sql import functions as F

    stats = (
        mentions.join(chunks.select("chunk_id", "doc_id"), "chunk_id")
        .groupBy("concept_id")
        .agg(
            F.sum("count").cast("long").alias("frequency"),
            F.count(F.lit(1)).cast("long").alias("chunk_frequency"),
            F.countDistinct("doc_id").cast("long").alias("doc_frequency"),
        )
    )
    return stats.join(names, "concept_id")


def _npmi_column(c: Any, fa: Any, fb: Any, n: int) -> Any:
    from pyspark.sql import functions as F

    p_ab = c / F.lit(float(n))
    pmi = F.log(p_ab / ((fa / F.lit(float(n))) * (fb / F.lit(float(n)))))
    value = F.when(p_ab >= 1.0, F.lit(1.0)).otherwise(pmi / -F.log(p_ab))
    return F.greatest(F.lit(-1.0), F.least(F.lit(1.0), value))


def chunk_pairs(mentions: Any, cfg: ConceptSettings) -> Any:
    """chunk_id, src, dst: the concept pairs each chunk contributes (see module doc), from the chunk alone."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_chunk = Window.partitionBy("chunk_id").orderBy(F.desc("count"), F.asc("concept_id"))
    top = (
        mentions.select("chunk_id", "concept_id", "count")
        .withColumn("rank", F.row_number().over(by_chunk))
        .filter(F.col("rank") <= cfg.max_concepts_per_chunk)
    )
    a, b = top.alias("a"), top.alias("b")
    pairs = a.join(
        b, (F.col("a.chunk_id") == F.col("b.chunk_id")) & (F.col("a.concept_id") < F.col("b.concept_id"))
    )
    pairs = pairs.select(
        F.col("a.chunk_id").alias("chunk_id"),
        F.col("a.concept_id").alias("src"),
        F.col("b.concept_id").alias("dst"),
        (F.col("a.rank") + F.col("b.rank")).alias("pair_rank"),
    )
    k = cfg.max_concepts_per_chunk
    if k * (k - 1) // 2 > cfg.max_pairs_per_chunk:
        by_pair_rank = Window.partitionBy("chunk_id").orderBy("pair_rank", "src", "dst")
        pairs = pairs.withColumn("n", F.row_number().over(by_pair_rank)).filter(
            F.col("n") <= cfg.max_pairs_per_chunk
        )
    return pairs.select("chunk_id", "src", "dst")


def pair_counts(mentions: Any, cfg: ConceptSettings) -> Any:
    """src, dst, cooccurrence: how many chunks pair each two concepts."""
    from pyspark.sql import functions as F

    pairs = chunk_pairs(mentions, cfg)
    return pairs.groupBy("src", "dst").agg(F.count(F.lit(1)).cast("long").alias("cooccurrence"))


def weighted_edges(pairs: Any, candidates: Any, n_chunks: int) -> Any:
    """src, dst, cooccurrence, weight: the counted pairs of two candidates, NPMI-weighted."""
    from pyspark.sql import functions as F

    freq = candidates.select("concept_id", "chunk_frequency")
    fa = freq.withColumnRenamed("concept_id", "src").withColumnRenamed("chunk_frequency", "fa")
    fb = freq.withColumnRenamed("concept_id", "dst").withColumnRenamed("chunk_frequency", "fb")
    return (
        pairs.join(F.broadcast(fa), "src")
        .join(F.broadcast(fb), "dst")
        .withColumn("weight", _npmi_column(F.col("cooccurrence"), F.col("fa"), F.col("fb"), n_chunks))
        .select("src", "dst", "cooccurrence", "weight")
    )


def _degrees(edges: Any) -> Any:
    from pyspark.sql import functions as F

    ends = edges.select(F.col("src").alias("concept_id")).unionAll(
        edges.select(F.col("dst").alias("concept_id"))
    )
    return ends.groupBy("concept_id").agg(F.count(F.lit(1)).cast("long").alias("degree"))


def graph_from_counts(stats: Any, pairs: Any, n_chunks: int, graph_cfg: GraphSettings) -> GraphTables:
    """Concepts (with kept/degree) and edges (with kept), cached, from the two count tables' rows:
    stats (concept_id, name, kind, frequency, chunk_frequency, doc_frequency) and pairs (src, dst,
    cooccurrence); see the module doc for the rules."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    stats = stats.persist(StorageLevel.MEMORY_AND_DISK)
    candidate_cond = (F.col("frequency") >= graph_cfg.min_concept_frequency) & (
        F.col("chunk_frequency") <= max_chunk_frequency(graph_cfg, n_chunks)
    )
    candidates = stats.filter(candidate_cond)
    edges = weighted_edges(pairs, candidates, n_chunks).persist(StorageLevel.MEMORY_AND_DISK)
    edge_ok = F.col("weight") > graph_cfg.min_edge_weight
    if graph_cfg.edge_weight_percentile > 0:
        threshold = edges.agg(
            F.percentile_approx("weight", graph_cfg.edge_weight_percentile / 100.0)
        ).first()[0]
        if threshold is not None:
            edge_ok = edge_ok & (F.col("weight") >= threshold)
    first_degrees = _degrees(edges.filter(edge_ok))
    kept_ids = (
        candidates.select("concept_id")
        .join(first_degrees, "concept_id", "left")
        .filter(F.coalesce(F.col("degree"), F.lit(0)) >= graph_cfg.min_degree)
        .select("concept_id", F.lit(True).alias("kept_node"))
    )
    src_kept = kept_ids.withColumnRenamed("concept_id", "src").withColumnRenamed("kept_node", "src_kept")
    dst_kept = kept_ids.withColumnRenamed("concept_id", "dst").withColumnRenamed("kept_node", "dst_kept")
    final_edges = (
        edges.join(src_kept, "src", "left")
        .join(dst_kept, "dst", "left")
        .withColumn(
            "kept",
            edge_ok
            & F.coalesce(F.col("src_kept"), F.lit(False))
            & F.coalesce(F.col("dst_kept"), F.lit(False)),
        )
        .select("src", "dst", "cooccurrence", "weight", "kept")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    final_degrees = _degrees(final_edges.filter("kept"))
    concepts = (
        stats.join(kept_ids, "concept_id", "left")
        .join(final_degrees, "concept_id", "left")
        .select(
            "concept_id",
            "name",
            "kind",
            "frequency",
            "chunk_frequency",
            "doc_frequency",
            F.coalesce(F.col("degree"), F.lit(0)).cast("long").alias("degree"),
            F.coalesce(F.col("kept_node"), F.lit(False)).alias("kept"),
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    return GraphTables(concepts, final_edges, (stats, edges))


def npmi_array(cooccurrence: Any, freq_a: Any, freq_b: Any, n: int) -> Any:
    """``npmi`` over numpy arrays, in the Spark column's order of operations (so the same doubles)."""
    import numpy as np

    n = float(n)
    p_ab = np.asarray(cooccurrence, dtype=np.float64) / n
    p_a = np.asarray(freq_a, dtype=np.float64) / n
    p_b = np.asarray(freq_b, dtype=np.float64) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(p_ab / (p_a * p_b))
        value = np.where(p_ab >= 1.0, 1.0, pmi / -np.log(p_ab))
    return np.clip(value, -1.0, 1.0)


def graph_frames(stats: Any, pairs: Any, n_chunks: int, graph_cfg: GraphSettings) -> tuple[Any, Any]:
    """(concepts, edges) as pandas frames with the columns and rows ``graph_from_counts`` derives, from
    the count tables' rows held in one process (pyarrow tables or pandas frames): for count tables
    small enough to read whole, where Spark's thirty-odd jobs for the same arithmetic cost more than
    the arithmetic. The rules are the module doc's; a percentile cut (``edge_weight_percentile``) is
    Spark's approximate percentile and is left to ``graph_from_counts``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if graph_cfg.edge_weight_percentile > 0:
        raise ValueError("graph_frames does not apply an edge weight percentile; use graph_from_counts")
    stats, pairs = (
        t if isinstance(t, pa.Table) else pa.Table.from_pandas(t, preserve_index=False)
        for t in (stats, pairs)
    )
    chunk_frequency = stats["chunk_frequency"].to_numpy()
    is_candidate = (stats["frequency"].to_numpy() >= graph_cfg.min_concept_frequency) & (
        chunk_frequency <= max_chunk_frequency(graph_cfg, n_chunks)
    )
    candidates = stats["concept_id"].filter(pa.array(is_candidate))
    if pc.count_distinct(stats["concept_id"]).as_py() != stats.num_rows:
        raise ValueError("concept counts hold a concept_id twice")
    # Pair ends as positions among the candidates (a hash lookup in Arrow; null: not a candidate).
    src_at = pc.index_in(pairs["src"], value_set=candidates)
    dst_at = pc.index_in(pairs["dst"], value_set=candidates)
    both = pc.and_(pc.is_valid(src_at), pc.is_valid(dst_at))
    src_at = src_at.filter(both).to_numpy()
    dst_at = dst_at.filter(both).to_numpy()
    edges = pairs.select(["src", "dst", "cooccurrence"]).filter(both).to_pandas()
    frequency = chunk_frequency[is_candidate]
    edges["weight"] = npmi_array(
        edges["cooccurrence"].to_numpy(), frequency[src_at], frequency[dst_at], n_chunks
    )
    edge_ok = edges["weight"].to_numpy() > graph_cfg.min_edge_weight

    def degrees(chosen: Any) -> Any:
        count = len(candidates)
        return np.bincount(src_at[chosen], minlength=count) + np.bincount(dst_at[chosen], minlength=count)

    kept_candidate = degrees(edge_ok) >= graph_cfg.min_degree
    edges["kept"] = edge_ok & kept_candidate[src_at] & kept_candidate[dst_at]
    degree = np.zeros(stats.num_rows, dtype=np.int64)
    kept = np.zeros(stats.num_rows, dtype=bool)
    degree[is_candidate] = degrees(edges["kept"].to_numpy())
    kept[is_candidate] = kept_candidate
    columns = ["concept_id", "name", "kind", "frequency", "chunk_frequency", "doc_frequency"]
    concepts = stats.select(columns).to_pandas()
    concepts["degree"] = degree
    concepts["kept"] = kept
    return concepts, edges
