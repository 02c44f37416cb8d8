"""The indexing pipeline: documents -> chunks -> concepts -> graph -> communities, plus embeddings.

This module only decides what runs and in which order; each stage lives in its own package and
owns its tables (``lazygraph.tables`` lists them), and every Delta write goes through the run's
``IndexStore``. One document's path:

1. ``ingest.stage.read_pending``: read and validate the input; a document is *pending* when its
   (doc_id, text_hash) is not in the documents table.
2. ``ingest.stage.chunk_pending``: token windows of the pending documents (content-hash ids), and
   the old chunks of any replaced document.
3. ``nlp.stage.extract_mentions``: concepts of each new chunk (spaCy).
4. ``embed.stage.embed_new_chunks``: a vector for each chunk that has none.
   ``lexical.stage.count_terms``: the terms of each new chunk, for BM25 (``--method hybrid``).
5. write chunks, mentions, embeddings and terms, each in one MERGE that also deletes replaced chunks'
   rows.
6. ``graph.stage.rebuild_graph``: concepts and edges of the whole index, recomputed from mentions.
7. ``ingest.stage.write_documents``: the documents, written after everything derived from them, so
   that a run killed midway leaves them pending and the next run redoes them.
8. ``communities.stage.rebuild_communities``: the community hierarchy and chunk links.
9. ``manifest.record_run``: the run's row, with the Delta version of every table, written last so
   that readers pin a complete, consistent index.

Without ``--append``, an index whose last complete run holds a different set of documents is refused
(use ``--append`` or a new directory); the same input again is a no-op ("rerun").
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from lazygraph import tables
from lazygraph.errors import IndexStateError
from lazygraph.manifest import documents_version, last_complete_run, record_run
from lazygraph.run_context import RunContext, RunLog
from lazygraph.settings import Settings
from lazygraph.tables.store import IndexStore, table_facts


def build_index(settings: Settings, input_path: str, index: str, append: bool, console: Console) -> dict:
    """Build or extend the index at ``index`` from ``input_path``; returns the run report."""
    from lazygraph.ingest.readers import input_kind

    input_kind(input_path)  # refuse an unusable path before starting Spark
    log = RunLog(console)
    with log.stage("spark"):
        from lazygraph.runtime.spark import get_spark

        spark = get_spark(settings)
    ctx = RunContext(spark, settings, IndexStore(spark, index), log, input_path)
    try:
        return _run(ctx, append)
    finally:
        spark.catalog.clearCache()


def run_mode(
    last_run: dict[str, Any] | None, n_pending: int, append: bool, input_path: str, index: str
) -> str:
    """ "create", "rerun" or "append"; new documents in an existing index need ``--append``."""
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


def _run(ctx: RunContext, append: bool) -> dict:
    from lazygraph.communities.stage import rebuild_communities
    from lazygraph.ingest.stage import read_pending, write_documents

    last_run = last_complete_run(ctx.index_uri)
    with ctx.log.stage("read") as rows:
        intake = read_pending(ctx)
        rows.update(intake.counts)
    mode = run_mode(last_run, intake.n_pending, append, ctx.input_path, ctx.index_uri)
    # A run killed after the documents MERGE but before its manifest row leaves the graph stale
    # although nothing is pending: the documents table moved since the last complete run.
    docs_now = (table_facts(ctx.store.uri(tables.DOCUMENTS)) or (None,))[0]
    graph_stale = last_run is None or intake.n_pending > 0 or docs_now != documents_version(last_run)

    new_counts = {"documents": intake.n_pending}
    chunks = extraction = None
    if intake.n_pending:
        chunks, extraction, new_counts = _index_pending(ctx, intake)
    graph = _rebuild_graph(ctx, chunks, extraction) if graph_stale else None
    with ctx.log.stage("documents") as rows:
        rows.update(write_documents(ctx, intake))
    if graph is not None:
        with ctx.log.stage("communities") as rows:
            rows.update(rebuild_communities(ctx, graph))
        graph.unpersist()
    intake.unpersist()
    return record_run(ctx, mode, new_counts, intake.ingest.rejected_by_reason)


def _rebuild_graph(ctx: RunContext, chunks: Any | None, extraction: Any | None) -> Any:
    from lazygraph.graph.stage import rebuild_graph

    with ctx.log.stage("graph") as rows:
        graph, counts = rebuild_graph(ctx, chunks, extraction)
        rows.update(counts)
    return graph


def _index_pending(ctx: RunContext, intake: Any) -> tuple[Any, Any, dict[str, int]]:
    """Chunk, parse, embed and count the terms of the pending documents and merge their rows
    (documents come later)."""
    from lazygraph.embed.stage import embed_new_chunks, write_embeddings
    from lazygraph.ingest.stage import chunk_pending, write_chunks
    from lazygraph.lexical.stage import count_terms, write_terms
    from lazygraph.nlp.stage import extract_mentions, write_mentions

    log = ctx.log
    with log.stage("chunk") as rows:
        chunks = chunk_pending(ctx, intake)
        rows.update(chunks.counts)
    with log.stage("concepts") as rows:
        extraction = extract_mentions(ctx, chunks)
        rows.update(chunks=chunks.count, mentions=extraction.count)
    with log.stage("embed") as rows:
        embeddings = embed_new_chunks(ctx, chunks)
        rows.update(chunks=chunks.count, embeddings=embeddings.count)
    with log.stage("terms") as rows:
        terms = count_terms(ctx, chunks)
        rows.update(chunks=chunks.count, terms=terms.count)
    with log.stage("write") as rows:
        write_chunks(ctx, chunks)
        write_mentions(ctx, extraction, chunks.replaced)
        write_embeddings(ctx, embeddings, chunks.replaced)
        write_terms(ctx, terms, chunks.replaced)
        rows.update(
            chunks=chunks.count, mentions=extraction.count, embeddings=embeddings.count, terms=terms.count
        )
    embeddings.unpersist()
    terms.unpersist()
    chunks.unpersist()
    counts = {
        "documents": intake.n_pending,
        "chunks": chunks.count,
        "embeddings": embeddings.count,
        "mentions": extraction.count,
        "chunk_terms": terms.count,
    }
    return chunks, extraction, counts
