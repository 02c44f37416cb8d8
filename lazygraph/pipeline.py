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
6. ``graph.stage.update_graph``: the pending documents' change of concept and pair counts MERGEd into
   the count tables (recounted from all mentions when those cannot be trusted), then concepts and
   edges recomputed from the counts.
7. ``ingest.stage.write_documents``: the documents, written after everything derived from them.
8. ``communities.stage.update_communities``: the community hierarchy and chunk links, updated locally
   after a MERGE of counts, or detected afresh.
9. ``manifest.record_run``: the run's row, with the Delta version of every table it wrote (and of the
   others as the last complete run left them), written last so that readers pin a complete,
   consistent index.
10. ``serving.publish.build_after_publish``: the Lance serving store of the versions just published,
    still under the writer lease (``serving.build_on_index``); a failed build leaves the run published.

Every run holds the index's writer lease (``tables.lease``) from before it starts Spark until its
manifest row is written, so one run at a time writes an index; it tags its Delta commits with its run id
and first restores every table to the last complete run's version (``tables.commits.begin_run``), so
the writes of a run that was killed are undone, never published, whatever the next run's input.

Without ``--append``, an index whose last complete run holds a different set of documents is refused
(use ``--append`` or a new directory); the same input again is a no-op ("rerun").

``delete_documents`` (``--delete``) walks the same path backwards: the removed documents' chunk rows
leave chunks, mentions, embeddings and terms, then the graph, the documents, the communities and the
manifest follow in the order above, so a delete killed midway is invisible to readers too.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from lazygraph.errors import IndexNotFoundError, IndexStateError
from lazygraph.manifest import (
    community_record,
    last_complete_run,
    record_run,
    run_versions,
)
from lazygraph.run_context import RunContext, RunLog, new_run_id
from lazygraph.settings import Settings
from lazygraph.tables.commits import begin_run
from lazygraph.tables.lease import writer_lease
from lazygraph.tables.store import IndexStore


def build_index(settings: Settings, input_path: str, index: str, append: bool, console: Console) -> dict:
    """Build or extend the index at ``index`` from ``input_path``; returns the run report."""
    from lazygraph.ingest.readers import input_kind

    input_kind(input_path)  # refuse an unusable path before starting Spark
    log = RunLog(console)
    run_id = new_run_id()
    with writer_lease(settings, index, run_id, console) as lease:  # before Spark: a waiting run costs nothing
        with log.stage("spark"):
            from lazygraph.runtime.spark import get_spark

            spark = get_spark(settings, locations=(input_path, index))
        ctx = RunContext(
            spark,
            settings,
            IndexStore(spark, index, settings=settings),
            log,
            input_path,
            run_id=run_id,
            lease=lease,
        )
        try:
            return _run(ctx, append)
        finally:
            spark.catalog.clearCache()


def index_records(ctx: RunContext) -> dict:
    """Index the records already read into ``ctx.input_records`` as an append (the first build of an
    empty index): one micro-batch of ``lazygraph index --watch``, which waits for the index's writer
    lease as long as another run holds it. Returns the run report."""
    with writer_lease(ctx.settings, ctx.index_uri, ctx.run_id, ctx.console, wait_s=None) as lease:
        ctx.lease = lease
        try:
            return _run(ctx, append=True)
        finally:
            ctx.spark.catalog.clearCache()


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
    from lazygraph.ingest.stage import read_pending, write_documents

    last_run = last_complete_run(ctx.index_uri, ctx.settings)
    # Every table as the last complete run left it: a killed run's writes undone.
    begin_run(ctx, last_run, run_versions(last_run, ctx.index_uri) if last_run is not None else {})
    with ctx.log.stage("read") as rows:
        intake = read_pending(ctx)
        rows.update(intake.counts)
    mode = run_mode(last_run, intake.n_pending, append, ctx.input_path, ctx.index_uri)
    if intake.n_pending:
        from lazygraph.nlp.stage import check_same_extraction

        check_same_extraction(last_run, ctx.settings.concepts, ctx.index_uri)  # before anything is written
    # The writes of a run killed after the documents MERGE were undone above: the documents table holds
    # the last complete run's rows, and the graph is stale only when something is pending.
    graph_stale = last_run is None or intake.n_pending > 0

    new_counts = {"documents": intake.n_pending}
    chunks = extraction = change = None
    from lazygraph.graph.stage import counts_are_current

    incremental = counts_are_current(ctx, last_run)  # asked before this run writes anything
    if intake.n_pending:
        chunks, extraction, new_counts = _index_pending(ctx, intake)
        if incremental:
            change = _count_change(ctx, last_run, intake, chunks, extraction)
    graph = _rebuild_graph(ctx, chunks, extraction, change) if graph_stale else None
    with ctx.log.stage("documents") as rows:
        rows.update(write_documents(ctx, intake))
    # A run that leaves the graph as it was carries the communities' record (and drift) forward.
    update = _communities(ctx, graph, last_run) if graph is not None else community_record(last_run)
    if intake.n_pending:
        refresh_vector_index(ctx)
    intake.unpersist()
    return _publish(ctx, mode, new_counts, intake.ingest.rejected_by_reason, update)


def _publish(
    ctx: RunContext, mode: str, new: dict[str, int], rejected: dict[str, int], update: dict | None
) -> dict:
    """Write the run's manifest row, then the serving store of the versions it names (still under the
    writer lease); the run report, with the store's status under ``serving_store``."""
    from lazygraph.serving.publish import build_after_publish

    report = record_run(ctx, mode, new, rejected, update)
    with ctx.log.stage("store"):
        report["serving_store"] = build_after_publish(
            ctx.settings, ctx.index_uri, ctx.console, lease=ctx.lease
        )
    return report


def _communities(ctx: RunContext, graph: Any, last_run: dict | None) -> dict:
    """The communities stage: a local update after a MERGE of counts, or a full detection; its record."""
    from lazygraph.communities.stage import update_communities

    with ctx.log.stage("communities") as rows:
        counts, update = update_communities(ctx, graph, last_run)
        rows.update(counts)
    graph.unpersist()
    return update


def _rebuild_graph(ctx: RunContext, chunks: Any | None, extraction: Any | None, change: Any = None) -> Any:
    """The graph stage: MERGE ``change`` (a ``CountChange``) into the count tables, or recount them
    all when it is None, then derive concepts and edges."""
    from lazygraph.graph.stage import update_graph

    with ctx.log.stage("graph") as rows:
        graph, counts = update_graph(ctx, change, chunks, extraction)
        rows.update(counts)
    return graph


def _count_change(ctx: RunContext, last_run: dict, intake: Any, chunks: Any, extraction: Any) -> Any:
    """The pending documents' mentions before (as the index held them) and after this run."""
    from lazygraph.graph.stage import CountChange, added_mentions, added_names, held_mentions

    removed = held_mentions(ctx, last_run, intake.pending) if intake.n_replacing else None
    return CountChange(added_mentions(chunks, extraction), removed, added_names(extraction))


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


def delete_documents(settings: Settings, ids_path: str, index: str, console: Console) -> dict:
    """Remove the documents listed in ``ids_path`` and everything derived from them; the run report."""
    from lazygraph.ingest.deletion import check_ids_path

    check_ids_path(ids_path)  # refuse a missing file before starting Spark
    log = RunLog(console)
    run_id = new_run_id()
    with writer_lease(settings, index, run_id, console) as lease:
        with log.stage("spark"):
            from lazygraph.runtime.spark import get_spark

            spark = get_spark(settings, locations=(ids_path, index))
        ctx = RunContext(
            spark,
            settings,
            IndexStore(spark, index, settings=settings),
            log,
            ids_path,
            run_id=run_id,
            lease=lease,
        )
        try:
            return _run_delete(ctx)
        finally:
            spark.catalog.clearCache()


def _run_delete(ctx: RunContext) -> dict:
    from lazygraph.graph.stage import CountChange, counts_are_current
    from lazygraph.ingest.deletion import (
        delete_chunk_rows,
        delete_documents_rows,
        plan_removal,
        removed_mentions,
    )

    last_run = last_complete_run(ctx.index_uri, ctx.settings)
    if last_run is None:
        raise IndexNotFoundError(f"no complete lazygraph index at {ctx.index_uri} to delete documents from")
    versions = run_versions(last_run, ctx.index_uri)
    begin_run(ctx, last_run, versions)
    incremental = counts_are_current(ctx, last_run)  # asked before this run writes anything
    with ctx.log.stage("read") as rows:
        removal = plan_removal(ctx, versions)
        change = CountChange(removed=removed_mentions(ctx, removal, versions)) if incremental else None
        rows.update(removal.counts)
    with ctx.log.stage("remove") as rows:
        rows.update(delete_chunk_rows(ctx, removal))
    graph = _rebuild_graph(ctx, None, None, change)
    with ctx.log.stage("documents") as rows:
        rows.update(delete_documents_rows(ctx, removal))
    update = _communities(ctx, graph, last_run)
    refresh_vector_index(ctx)
    deleted = {"documents_deleted": removal.n_documents, "chunks_deleted": removal.n_chunks}
    removal.unpersist()
    return _publish(ctx, "delete", deleted, {}, update)


def refresh_vector_index(ctx: RunContext) -> None:
    """The approximate vector index kept beside the chunk embeddings (lazygraph.vectors): called after
    every run that changed them (create, append, delete), before the manifest row, so that the run's
    version of the index covers exactly its embeddings. Below ``vectors.ann_min_chunks`` it does nothing."""
    from lazygraph.vectors.job import refresh_vector_index as build_vector_index

    with ctx.log.stage("vectors") as rows:
        rows.update(build_vector_index(ctx))
