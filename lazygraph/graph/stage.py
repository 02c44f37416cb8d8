"""The graph stage of an index run: concepts and edges of the whole index, rebuilt and written.

Concepts, edges and pruning are recomputed from the whole mentions table (mentions are per chunk,
so this is exact) and each table is replaced in one Delta transaction: an append shifts
frequencies, NPMI weights and kept flags nearly everywhere, so a MERGE would rewrite nearly every
file anyway. A new index builds from the chunks and mentions already in memory.
"""

from __future__ import annotations

from typing import Any

from lazygraph.errors import IndexStateError
from lazygraph.graph.cooccurrence import GraphTables, build_graph
from lazygraph.ingest.stage import NewChunks
from lazygraph.nlp.stage import Extraction
from lazygraph.run_context import RunContext
from lazygraph.tables import CHUNKS, CONCEPTS, EDGES, MENTIONS


def rebuild_graph(
    ctx: RunContext, chunks: NewChunks | None, extraction: Extraction | None
) -> tuple[GraphTables, dict[str, int]]:
    """The cached graph (with the mentions it was built from) and its kept/pruned counts."""
    if chunks is not None and extraction is not None and chunks.index_was_empty:
        chunk_docs, mentions, n_chunks = (
            chunks.frame.select("chunk_id", "doc_id"),
            extraction.mentions,
            chunks.count,
        )
    else:
        chunk_docs = ctx.store.load(CHUNKS).select("chunk_id", "doc_id")
        mentions, n_chunks = ctx.store.load(MENTIONS), chunk_docs.count()
    names = _concept_names(ctx, extraction)
    # Detached from the concepts table, which is overwritten while the graph is still cached.
    names = names.localCheckpoint(eager=True)
    graph = build_graph(
        ctx.spark, mentions, chunk_docs, names, n_chunks, ctx.settings.concepts, ctx.settings.graph
    )
    counts = _kept_counts(graph)
    ctx.store.overwrite(CONCEPTS, graph.concepts)
    ctx.store.overwrite(EDGES, graph.edges)
    # This run's cached chunks and extraction are released with the graph, once communities are built.
    released = ([extraction.rows] if extraction else []) + ([chunks.frame] if chunks else [])
    graph.intermediates = (*graph.intermediates, *released)
    graph.mentions = mentions
    return graph, counts


def _kept_counts(graph: GraphTables) -> dict[str, int]:
    counts = {}
    for row in graph.concepts.groupBy("kept").count().collect():
        counts["concepts_kept" if row["kept"] else "concepts_pruned"] = row["count"]
    for row in graph.edges.groupBy("kept").count().collect():
        counts["edges_kept" if row["kept"] else "edges_pruned"] = row["count"]
    return counts


def _concept_names(ctx: RunContext, extraction: Extraction | None) -> Any:
    """concept_id, name, kind from this run's extraction and the concepts table."""
    from pyspark.sql import functions as F

    parts = [extraction.names] if extraction is not None else []
    old = ctx.store.read(CONCEPTS)
    if old is not None:
        is_entity = F.when(F.col("kind") == "entity", 1).otherwise(0).alias("is_entity")
        parts.append(old.select("concept_id", "name", is_entity))
    if not parts:
        raise IndexStateError("the index has mentions but no concept names; rebuild it in a new directory")
    union = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return union.groupBy("concept_id").agg(
        F.first("name").alias("name"),
        F.when(F.max("is_entity") == 1, "entity").otherwise("phrase").alias("kind"),
    )
