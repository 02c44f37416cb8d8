"""The ingest stages of an index run: find the pending documents, chunk them, write chunks and documents.

A document is *pending* when its (doc_id, text_hash) is not in the documents table; only pending
documents are chunked, parsed and embedded. A document whose id exists with different text is
replaced: its old chunks are listed here (``NewChunks.replaced``) so that the chunks, mentions and
embeddings MERGEs delete them in the same transaction that inserts the new rows. Chunk ids are
content hashes, so unchanged chunks are neither touched nor duplicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazygraph.ingest.chunking import chunk_documents
from lazygraph.ingest.readers import IngestResult, read_input
from lazygraph.run_context import RunContext
from lazygraph.runtime.checkpoint import checkpoint
from lazygraph.tables import CHUNKS, DOCUMENTS, REJECTED


@dataclass
class Intake:
    """What this run's input brings: every valid document, and those the index does not hold yet."""

    ingest: IngestResult
    pending: Any  # DataFrame of documents-table rows
    n_pending: int
    index_had_documents: bool
    # Pending documents whose id the index holds with other text: only these have old chunks, mentions
    # and counts to take out, so an append of new documents alone skips that work.
    n_replacing: int = 0

    @property
    def counts(self) -> dict[str, int]:
        return {
            "documents": self.ingest.n_documents,
            "rejected": self.ingest.n_rejected,
            "pending": self.n_pending,
            "replacing": self.n_replacing,
        }

    def unpersist(self) -> None:
        self.ingest.unpersist()
        self.pending.unpersist()


@dataclass
class NewChunks:
    frame: Any  # DataFrame of chunks-table rows, persisted
    count: int
    # chunk_id of the old chunks of replaced documents; None when no document of the batch was in the
    # index, which lets the chunk-derived tables append instead of MERGE (IndexStore.merge_chunk_rows)
    replaced: Any | None
    index_was_empty: bool  # no chunks table yet: these chunks are the whole index

    @property
    def counts(self) -> dict[str, int]:
        counts = {"chunks": self.count}
        if self.replaced is not None:
            counts["replaced"] = self.replaced.count()
        return counts

    def unpersist(self) -> None:
        if self.replaced is not None:
            self.replaced.unpersist()


def read_pending(ctx: RunContext) -> Intake:
    from pyspark import StorageLevel

    ingest = read_input(ctx.spark, ctx.settings, ctx.input_path, ctx.run_id, ctx.input_records)
    existing = ctx.store.read(DOCUMENTS)
    if existing is None:
        pending = ingest.documents.persist(StorageLevel.MEMORY_AND_DISK)
        return Intake(ingest, pending, ingest.n_documents, index_had_documents=False)
    pending = ingest.documents.join(
        existing.select("doc_id", "text_hash"), ["doc_id", "text_hash"], "left_anti"
    )
    # Detached from the documents table, whose MERGE must not re-evaluate what was pending.
    pending = checkpoint(pending)
    n_replacing = pending.join(existing.select("doc_id"), "doc_id", "left_semi").count()
    return Intake(ingest, pending, pending.count(), index_had_documents=True, n_replacing=n_replacing)


def chunk_pending(ctx: RunContext, intake: Intake) -> NewChunks:
    from pyspark import StorageLevel

    chunks = chunk_documents(intake.pending, ctx.settings.chunking).persist(StorageLevel.MEMORY_AND_DISK)
    n_chunks = chunks.count()
    old_chunks = ctx.store.read(CHUNKS)
    replaced = None
    if old_chunks is not None and intake.n_replacing:
        # Cut from the chunks table: a write to a table re-caches frames that read it, and
        # this list must survive the chunks MERGE to delete the old mentions and vectors.
        replaced = checkpoint(
            old_chunks.join(intake.pending.select("doc_id"), "doc_id", "left_semi")
            .join(chunks.select("chunk_id"), "chunk_id", "left_anti")
            .select("chunk_id")
        )
    return NewChunks(chunks, n_chunks, replaced, index_was_empty=old_chunks is None)


def write_chunks(ctx: RunContext, chunks: NewChunks) -> None:
    ctx.store.merge_chunk_rows(CHUNKS, chunks.frame, chunks.replaced)


def write_documents(ctx: RunContext, intake: Intake) -> dict[str, int]:
    """Documents are written after everything derived from them: a run killed earlier leaves them
    pending, and the next run redoes them."""
    if intake.n_pending:
        ctx.store.merge(DOCUMENTS, intake.pending, update=True)
    return {"written": intake.n_pending, "rejected": _record_rejections(ctx, intake.ingest)}


def _record_rejections(ctx: RunContext, ingest: IngestResult) -> int:
    """Add this input's rejections not recorded by an earlier run (no empty commit on a re-run)."""
    if not ingest.n_rejected:
        return 0
    keys = ["source", "record", "reason"]
    old = ctx.store.read(REJECTED)
    fresh = ingest.rejected if old is None else ingest.rejected.join(old.select(*keys), keys, "left_anti")
    fresh = fresh.cache()
    n_fresh = fresh.count()
    if n_fresh:
        ctx.store.merge(REJECTED, fresh)
    fresh.unpersist()
    return n_fresh
