"""The term-counting stage of an index run: the terms of each new chunk, merged into chunk_terms.

Counting is a plain Python tokenizer per Arrow batch (``mapInPandas``), far cheaper than parsing or
embedding, and needs no model. The chunk_terms table (chunk, term, count) is this stage's own; the
rows of replaced chunks are deleted in the same MERGE that inserts the new ones.

An index built before this stage existed has chunks but no chunk_terms table: the first append to it
counts the terms of its existing chunks as well, so that the lexical signal covers the whole index
rather than only the appended documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lazygraph.ingest.stage import NewChunks
from lazygraph.lexical.terms import term_counts
from lazygraph.run_context import RunContext
from lazygraph.tables import CHUNK_TERMS, CHUNKS
from lazygraph.tables.schemas import spark_schema


def term_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """mapInPandas body: chunks (chunk_id, text) -> chunk_terms rows."""
    for batch in batches:
        rows: dict[str, list] = {"chunk_id": [], "term": [], "count": []}
        for chunk_id, text in zip(batch["chunk_id"].tolist(), batch["text"].fillna("").tolist(), strict=True):
            for term, count in term_counts(text).items():
                rows["chunk_id"].append(chunk_id)
                rows["term"].append(term)
                rows["count"].append(count)
        out = pd.DataFrame(rows)
        out["count"] = out["count"].astype("int32")
        yield out


def chunk_terms(chunks_df: Any) -> Any:
    """Spark DataFrame of chunk_terms rows for the given chunks (lazy)."""
    return chunks_df.select("chunk_id", "text").mapInPandas(term_batches, schema=spark_schema(CHUNK_TERMS))


@dataclass
class NewTerms:
    frame: Any  # DataFrame of chunk_terms rows, persisted
    count: int
    backfilled: bool  # the terms of chunks indexed before this stage existed are included

    def unpersist(self) -> None:
        self.frame.unpersist()


def count_terms(ctx: RunContext, chunks: NewChunks) -> NewTerms:
    """The terms of the new chunks (and, on the first run that has this stage, of the old ones)."""
    from pyspark import StorageLevel

    source = chunks.frame.select("chunk_id", "text")
    backfill = not chunks.index_was_empty and not ctx.store.exists(CHUNK_TERMS)
    if backfill:
        source = source.unionByName(_kept_old_chunks(ctx, chunks))
    frame = chunk_terms(source).persist(StorageLevel.MEMORY_AND_DISK)
    return NewTerms(frame, frame.count(), backfill)


def _kept_old_chunks(ctx: RunContext, chunks: NewChunks) -> Any:
    """The chunks already in the index that this run neither rewrites nor replaces."""
    old = ctx.store.load(CHUNKS).select("chunk_id", "text")
    kept = old.join(chunks.frame.select("chunk_id"), "chunk_id", "left_anti")
    if chunks.replaced is not None:
        kept = kept.join(chunks.replaced, "chunk_id", "left_anti")
    return kept


def write_terms(ctx: RunContext, terms: NewTerms, replaced: Any | None) -> None:
    """Merge the new terms; those of replaced chunks are deleted in the same transaction."""
    ctx.store.merge_chunk_rows(CHUNK_TERMS, terms.frame, replaced)
