"""The graph stage of an index run: the count tables brought up to date, concepts and edges derived.

Two count tables hold what the graph is made of (``cooccurrence``): concept_counts (mention, chunk and
document frequency per concept) and pair_counts (chunks pairing two concepts). A run that adds,
replaces or removes documents counts only those documents, before (``CountChange.removed``: every
chunk the index held of them) and after (``CountChange.added``: every chunk of their new text), and
MERGEs the difference into each table, deleting rows whose counts reach zero. Pruning and NPMI
weights depend on corpus-wide totals (the number of chunks, the frequencies of both ends), so the
concepts and edges tables are recomputed from the count tables alone, never from mentions or text,
and each is replaced in one Delta transaction.

The counts are recounted from the whole mentions table instead when they cannot be trusted to match
it: a new index, an index built before the count tables existed, a run killed after it wrote some of
its tables and whose writes could not be undone, or changed settings of how a chunk's concepts are
paired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazygraph import tables
from lazygraph.errors import IndexStateError
from lazygraph.graph.cooccurrence import (
    GraphTables,
    concept_statistics,
    graph_frames,
    graph_from_counts,
    pair_counts,
)
from lazygraph.ingest.stage import NewChunks
from lazygraph.manifest import recorded_settings, run_versions
from lazygraph.nlp.stage import Extraction
from lazygraph.run_context import RunContext
from lazygraph.runtime.checkpoint import checkpoint
from lazygraph.tables import CHUNKS, CONCEPT_COUNTS, CONCEPTS, EDGES, MENTIONS, PAIR_COUNTS, schemas

# The tables whose versions must be those of the last complete run for a MERGE of counts to be exact.
COUNTED_FROM = (CHUNKS, MENTIONS, CONCEPT_COUNTS, PAIR_COUNTS)


@dataclass
class CountChange:
    """The mentions (chunk_id, concept_id, count, doc_id) of the documents a run changes: ``removed``,
    every chunk the index held of them; ``added``, every chunk of their new text. A document must be
    wholly on a side for its document frequencies to be right. ``names``: concept_id, name, kind of the
    added concepts."""

    added: Any | None = None
    removed: Any | None = None
    names: Any | None = None


def counts_are_current(ctx: RunContext, last_run: dict[str, Any] | None) -> bool:
    """True when the count tables match the mentions of the last complete run, so that MERGing this
    run's change into them is exact; called before the run writes anything."""
    if last_run is None:
        return False
    recorded = run_versions(last_run, ctx.index_uri)
    for name in COUNTED_FROM:
        table = tables.open_delta(ctx.store.uri(name), settings=ctx.settings)
        # The version holding the last complete run's rows: recorded, or restored (tables.commits).
        if table is None or ctx.baseline.get(name, recorded.get(name)) != table.version():
            return False
    counted_with = recorded_settings(last_run, "concepts")
    pairing = ("max_concepts_per_chunk", "max_pairs_per_chunk")
    now = ctx.settings.concepts.model_dump()
    return all(counted_with.get(key) == now[key] for key in pairing)


def added_mentions(chunks: NewChunks, extraction: Extraction) -> Any:
    """This run's new mentions with their document (every chunk of the pending documents)."""
    return extraction.mentions.join(chunks.frame.select("chunk_id", "doc_id"), "chunk_id")


def held_mentions(ctx: RunContext, last_run: dict[str, Any], doc_ids: Any) -> Any:
    """The mentions (with doc_id) of the documents ``doc_ids`` as the last complete run left them,
    detached from the tables this run is about to change."""
    versions = run_versions(last_run, ctx.index_uri)

    def pinned(name: str) -> Any:
        return (
            ctx.spark.read.format("delta")
            .option("versionAsOf", versions[name])
            .load(ctx.store.spark_uri(name))
        )

    chunks = pinned(CHUNKS).select("chunk_id", "doc_id").join(doc_ids.select("doc_id"), "doc_id", "left_semi")
    return checkpoint(
        pinned(MENTIONS).join(chunks, "chunk_id").select("chunk_id", "concept_id", "count", "doc_id")
    )


def update_graph(
    ctx: RunContext,
    change: CountChange | None,
    chunks: NewChunks | None = None,
    extraction: Extraction | None = None,
) -> tuple[GraphTables, dict[str, int]]:
    """Count (MERGE ``change``, or recount all when it is None), then derive and write concepts and
    edges; the cached graph (with the mentions communities need) and its kept/pruned counts."""
    if change is None:
        mentions = _recount(ctx, chunks, extraction)
        changed_pairs = None
    else:
        changed_pairs = _merge_counts(ctx, change)
        mentions = ctx.store.load(MENTIONS)
    n_chunks = chunks.count if chunks is not None and chunks.index_was_empty else _chunk_count(ctx)
    graph, counts = _derive_graph(ctx, n_chunks)
    ctx.store.overwrite(CONCEPTS, graph.concepts)
    ctx.store.overwrite(EDGES, graph.edges)
    # This run's cached chunks and extraction are released with the graph, once communities are built.
    released = ([extraction.rows] if extraction else []) + ([chunks.frame] if chunks else [])
    graph.intermediates = (*graph.intermediates, *released)
    graph.mentions = mentions
    graph.changed_pairs = changed_pairs
    counts["counted"] = 0 if change is None else 1
    return graph, counts


def _recount(ctx: RunContext, chunks: NewChunks | None, extraction: Extraction | None) -> Any:
    """Replace both count tables with counts of every mention; returns the mentions counted."""
    if chunks is not None and extraction is not None and chunks.index_was_empty:
        chunk_docs, mentions = chunks.frame.select("chunk_id", "doc_id"), extraction.mentions
    else:
        chunk_docs, mentions = ctx.store.load(CHUNKS).select("chunk_id", "doc_id"), ctx.store.load(MENTIONS)
    # Detached from the tables that hold names, which are overwritten below.
    names = checkpoint(_concept_names(ctx, extraction))
    ctx.store.overwrite(CONCEPT_COUNTS, concept_statistics(mentions, chunk_docs, names))
    ctx.store.overwrite(PAIR_COUNTS, pair_counts(mentions, ctx.settings.concepts))
    return mentions


def count_deltas(change: CountChange, concept_cfg: Any) -> tuple[Any, Any]:
    """(concept deltas, pair deltas): counts of ``added`` minus counts of ``removed``, rows that do not
    change left out. Concept deltas carry name and kind (null for concepts nothing added)."""
    from pyspark.sql import functions as F

    concept_parts, pair_parts = [], []
    for frame, sign in ((change.added, 1), (change.removed, -1)):
        if frame is None:
            continue
        stats = frame.groupBy("concept_id").agg(
            (F.sum("count") * sign).cast("long").alias("frequency"),
            (F.count(F.lit(1)) * sign).cast("long").alias("chunk_frequency"),
            (F.countDistinct("doc_id") * sign).cast("long").alias("doc_frequency"),
        )
        concept_parts.append(stats)
        pair_parts.append(
            pair_counts(frame, concept_cfg).withColumn("cooccurrence", F.col("cooccurrence") * sign)
        )
    columns = ("frequency", "chunk_frequency", "doc_frequency")
    concepts = _sum_parts(concept_parts, ["concept_id"], columns)
    pairs = _sum_parts(pair_parts, ["src", "dst"], ("cooccurrence",))
    if change.names is not None:
        concepts = concepts.join(change.names, "concept_id", "left")
    else:
        concepts = concepts.withColumn("name", F.lit(None).cast("string")).withColumn(
            "kind", F.lit(None).cast("string")
        )
    return concepts, pairs


def _sum_parts(parts: list[Any], keys: list[str], columns: tuple[str, ...]) -> Any:
    from pyspark.sql import functions as F

    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    summed = union.groupBy(*keys).agg(*[F.sum(c).cast("long").alias(c) for c in columns])
    return summed.filter(" OR ".join(f"{c} != 0" for c in columns))


def _merge_counts(ctx: RunContext, change: CountChange) -> Any:
    """MERGE the change into both count tables; returns the pair deltas (src, dst, cooccurrence),
    cached, which tell the communities stage what moved."""
    from delta.tables import DeltaTable

    concepts, pairs = count_deltas(change, ctx.settings.concepts)
    concepts = checkpoint(concepts)
    pairs = checkpoint(pairs)
    sums = {c: f"t.{c} + s.{c}" for c in ("frequency", "chunk_frequency", "doc_frequency")}
    # A concept seen as a named entity stays one (mentions do not record what each one was).
    sums["kind"] = "CASE WHEN s.kind = 'entity' THEN 'entity' ELSE t.kind END"
    inserted = {c: f"s.{c}" for c in tables.schemas.columns(CONCEPT_COUNTS)}
    (
        DeltaTable.forPath(ctx.spark, ctx.store.spark_uri(CONCEPT_COUNTS))
        .alias("t")
        .merge(concepts.alias("s"), "t.concept_id = s.concept_id")
        .whenMatchedDelete(condition="t.chunk_frequency + s.chunk_frequency <= 0")
        .whenMatchedUpdate(set=sums)
        .whenNotMatchedInsert(condition="s.chunk_frequency > 0", values=inserted)
        .execute()
    )
    ctx.store.note(CONCEPT_COUNTS)
    (
        DeltaTable.forPath(ctx.spark, ctx.store.spark_uri(PAIR_COUNTS))
        .alias("t")
        .merge(pairs.alias("s"), "t.src = s.src AND t.dst = s.dst")
        .whenMatchedDelete(condition="t.cooccurrence + s.cooccurrence <= 0")
        .whenMatchedUpdate(set={"cooccurrence": "t.cooccurrence + s.cooccurrence"})
        .whenNotMatchedInsert(
            condition="s.cooccurrence > 0",
            values={"src": "s.src", "dst": "s.dst", "cooccurrence": "s.cooccurrence"},
        )
        .execute()
    )
    ctx.store.note(PAIR_COUNTS)
    return pairs


def _derive_graph(ctx: RunContext, n_chunks: int) -> tuple[GraphTables, dict[str, int]]:
    """Concepts and edges from the count tables as this run left them, with their kept/pruned counts:
    in the driver from one read of both tables when the pair counts have at most
    ``graph.driver_max_pairs`` rows (no Spark job until they are written), else by Spark."""
    from pyspark import StorageLevel

    cfg = ctx.settings.graph
    pairs = _written(ctx, PAIR_COUNTS)
    rows = None if pairs is None else _rows(pairs)
    if cfg.edge_weight_percentile > 0 or rows is None or rows > cfg.driver_max_pairs:
        graph = graph_from_counts(ctx.store.load(CONCEPT_COUNTS), ctx.store.load(PAIR_COUNTS), n_chunks, cfg)
        return graph, _kept_counts(graph)
    stats = _held(ctx, _written(ctx, CONCEPT_COUNTS), CONCEPT_COUNTS)
    concepts, edges = graph_frames(stats, _held(ctx, pairs, PAIR_COUNTS), n_chunks, cfg)
    counts = {
        "concepts_kept": int(concepts["kept"].sum()),
        "concepts_pruned": int((~concepts["kept"]).sum()),
        "edges_kept": int(edges["kept"].sum()),
        "edges_pruned": int((~edges["kept"]).sum()),
    }

    def frame(name: str, held: Any) -> Any:
        return ctx.spark.createDataFrame(held, schema=schemas.spark_schema(name)).persist(
            StorageLevel.MEMORY_AND_DISK
        )

    graph = GraphTables(frame(CONCEPTS, concepts), frame(EDGES, edges), held=(concepts, edges))
    return graph, {key: value for key, value in counts.items() if value}


def _chunk_count(ctx: RunContext) -> int:
    """The chunks the index holds after this run's writes, from the Delta log's file statistics
    (a Spark count job when a file has none)."""
    table = _written(ctx, CHUNKS)
    rows = None if table is None else _rows(table)
    return rows if rows is not None else ctx.store.load(CHUNKS).count()


def _written(ctx: RunContext, name: str) -> Any:
    """The deltalake handle of the version of ``name`` this run wrote (None when there is none)."""
    return tables.open_delta(ctx.store.uri(name), version=ctx.store.written.get(name), settings=ctx.settings)


def _rows(table: Any) -> int | None:
    """A table version's rows, from the Delta log's file statistics (None when a file has none)."""
    actions = table.get_add_actions(flatten=True)
    if "num_records" not in actions.column_names:
        return None
    counts = actions.column("num_records").to_pylist()
    return None if any(count is None for count in counts) else int(sum(counts))


def _held(ctx: RunContext, table: Any, name: str) -> Any:
    """Count table ``name`` at the version ``table`` names, as a pyarrow table."""
    return tables.arrow_dataset(table, ctx.settings).to_table(columns=schemas.columns(name))


def _kept_counts(graph: GraphTables) -> dict[str, int]:
    counts = {}
    for row in graph.concepts.groupBy("kept").count().collect():
        counts["concepts_kept" if row["kept"] else "concepts_pruned"] = row["count"]
    for row in graph.edges.groupBy("kept").count().collect():
        counts["edges_kept" if row["kept"] else "edges_pruned"] = row["count"]
    return counts


def _concept_names(ctx: RunContext, extraction: Extraction | None) -> Any:
    """concept_id, name, kind from this run's extraction and the names the index already holds."""
    from pyspark.sql import functions as F

    parts = [extraction.names] if extraction is not None else []
    is_entity = F.when(F.col("kind") == "entity", 1).otherwise(0).alias("is_entity")
    for name in (CONCEPT_COUNTS, CONCEPTS):
        old = ctx.store.read(name)
        if old is not None:
            parts.append(old.select("concept_id", "name", is_entity))
    if not parts:
        raise IndexStateError("the index has mentions but no concept names; rebuild it in a new directory")
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.groupBy("concept_id").agg(
        F.first("name").alias("name"),
        F.when(F.max("is_entity") == 1, "entity").otherwise("phrase").alias("kind"),
    )


def added_names(extraction: Extraction) -> Any:
    """concept_id, name, kind of this run's extracted concepts (entity when any mention was one)."""
    from pyspark.sql import functions as F

    return extraction.names.groupBy("concept_id").agg(
        F.first("name").alias("name"),
        F.when(F.max("is_entity") == 1, "entity").otherwise("phrase").alias("kind"),
    )
