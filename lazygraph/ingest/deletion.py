"""Removing documents from an index: read the ids, check them, delete every row derived from them.

``lazygraph index --delete FILE`` takes document ids one per line (a text file) or a Delta table with
a ``doc_id`` column. Every id must name a document of the index's last complete run: an unknown id,
an empty list or a missing file is refused before anything is written.

The chunks of the deleted documents are listed once (``Removal.chunks``), then their rows leave the
chunk-keyed tables (chunks, mentions, embeddings, terms), each in one Delta transaction. The
documents' own rows are deleted last (``delete_documents_rows``), after the graph and before the
communities, as an append writes them: a run killed midway leaves the manifest on the previous
complete version, and running the same command again finishes the work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazygraph.errors import InputError
from lazygraph.run_context import RunContext
from lazygraph.runtime import storage
from lazygraph.runtime.checkpoint import checkpoint
from lazygraph.tables import CHUNK_EMBEDDINGS, CHUNK_TERMS, CHUNKS, DOCUMENTS, MENTIONS

# Tables keyed by chunk whose rows go with their chunk (the chunks table itself is deleted last of them,
# so that a killed run can still find what it had not yet removed).
CHUNK_ROW_TABLES = (MENTIONS, CHUNK_EMBEDDINGS, CHUNK_TERMS, CHUNKS)
SHOWN_UNKNOWN = 5


def check_ids_path(ids_path: str) -> None:
    """Refuse a local ids file or folder that does not exist, before Spark starts."""
    uri = storage.normalise(ids_path)
    if storage.is_local(uri) and not Path(storage.local_path(uri) or ids_path).exists():
        raise InputError(
            f"--delete {ids_path} does not exist; give a text file of document ids (one per line) "
            "or a Delta table with a doc_id column"
        )


def read_ids(spark: Any, ids_path: str) -> Any:
    """A DataFrame of distinct ``doc_id`` from a Delta table (its doc_id column) or a text file."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    uri = storage.spark_uri(storage.normalise(ids_path))
    if DeltaTable.isDeltaTable(spark, uri):
        table = spark.read.format("delta").load(uri)
        if "doc_id" not in table.columns:
            raise InputError(f"the Delta table {ids_path} has no doc_id column (columns: {table.columns})")
        ids = table.select(F.col("doc_id").cast("string").alias("doc_id"))
    else:
        ids = spark.read.text(uri).select(F.col("value").alias("doc_id"))
    ids = ids.select(F.trim("doc_id").alias("doc_id")).filter(
        F.col("doc_id").isNotNull() & (F.col("doc_id") != "")
    )
    return ids.distinct()


@dataclass
class Removal:
    """What a delete removes: the documents' ids and the ids of their chunks, both detached from the
    tables they were read from (whose deletes must not re-evaluate them)."""

    doc_ids: Any  # DataFrame: doc_id
    chunks: Any  # DataFrame: chunk_id, doc_id
    n_documents: int
    n_chunks: int

    @property
    def counts(self) -> dict[str, int]:
        return {"documents": self.n_documents, "chunks": self.n_chunks}

    def unpersist(self) -> None:
        self.doc_ids.unpersist()
        self.chunks.unpersist()


def pinned(ctx: RunContext, name: str, versions: dict[str, int]) -> Any:
    """A table as the last complete run left it (Delta time travel)."""
    return (
        ctx.spark.read.format("delta").option("versionAsOf", versions[name]).load(ctx.store.spark_uri(name))
    )


def plan_removal(ctx: RunContext, versions: dict[str, int]) -> Removal:
    """Read and check the ids; InputError for an empty list or ids the index does not hold.

    Ids and their chunks are read as the last complete run (``versions``) left them, so that running a
    delete again after it was killed midway (some of its rows already gone from the latest versions)
    finishes it and reports the same removal.
    """
    ids = checkpoint(read_ids(ctx.spark, ctx.input_path))
    n_ids = ids.count()
    if n_ids == 0:
        raise InputError(f"--delete {ctx.input_path} holds no document id; the index was not changed")
    unknown = ids.join(pinned(ctx, DOCUMENTS, versions).select("doc_id"), "doc_id", "left_anti")
    missing = [row["doc_id"] for row in unknown.limit(SHOWN_UNKNOWN + 1).collect()]
    if missing:
        n_unknown = unknown.count()
        shown = ", ".join(repr(m) for m in missing[:SHOWN_UNKNOWN])
        raise InputError(
            f"--delete {ctx.input_path}: {n_unknown} of {n_ids} document ids are not in the index "
            f"({shown}{', ...' if n_unknown > SHOWN_UNKNOWN else ''}); nothing was deleted"
        )
    chunks = pinned(ctx, CHUNKS, versions).select("chunk_id", "doc_id").join(ids, "doc_id", "left_semi")
    chunks = checkpoint(chunks)
    return Removal(ids, chunks, n_ids, chunks.count())


def removed_mentions(ctx: RunContext, removal: Removal, versions: dict[str, int]) -> Any:
    """The removed chunks' mentions with their document (chunk_id, concept_id, count, doc_id), as the
    last complete run left them."""
    return checkpoint(
        pinned(ctx, MENTIONS, versions)
        .join(removal.chunks, "chunk_id")
        .select("chunk_id", "concept_id", "count", "doc_id")
    )


def delete_chunk_rows(ctx: RunContext, removal: Removal) -> dict[str, int]:
    """Delete the removed chunks' rows from every chunk-keyed table, one transaction per table."""
    keys = removal.chunks.select("chunk_id")
    for name in CHUNK_ROW_TABLES:
        ctx.store.delete_matching(name, keys, ["chunk_id"])
    return {"chunks": removal.n_chunks}


def delete_documents_rows(ctx: RunContext, removal: Removal) -> dict[str, int]:
    ctx.store.delete_matching(DOCUMENTS, removal.doc_ids, ["doc_id"])
    return {"documents": removal.n_documents}
