"""The chunk-embedding stage of an index run: Arrow batches of chunk texts through the embedding model.

Each Python worker loads the model once (``get_embedder`` caches it per process), limited to the
cores one Spark task owns, so that concurrent tasks do not oversubscribe the machine. Only chunks
without a stored vector are embedded; the chunk_embeddings table is this stage's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lazygraph.ingest.stage import NewChunks
from lazygraph.run_context import RunContext
from lazygraph.settings import EmbeddingSettings
from lazygraph.tables import CHUNK_EMBEDDINGS
from lazygraph.tables.schemas import spark_schema


def embed_batches(
    batches: Iterator[pd.DataFrame], cfg: EmbeddingSettings, threads: int
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: chunks (chunk_id, text) -> chunk_embeddings rows, ``cfg.rows_per_call`` chunks
    a model call (Arrow's batches of ``spark.arrow_batch_size`` are gathered: a call of 256 wiki2mh
    chunks padded its batches enough to take a third longer than one of 1,294)."""
    from lazygraph.embed.embedder import get_embedder

    embedder = get_embedder(cfg, threads)
    for batch in gathered(batches, cfg.rows_per_call):
        vectors = embedder.encode_for_storage(batch["text"].fillna("").tolist())
        little_endian = vectors.astype(vectors.dtype.newbyteorder("<"), copy=False)
        yield pd.DataFrame(
            {
                "chunk_id": batch["chunk_id"].tolist(),
                "embedding": [row.tobytes() for row in little_endian],
                "dtype": str(vectors.dtype),
                "dim": pd.Series([vectors.shape[1]] * len(batch), dtype="int32"),
                "model": cfg.model,
            }
        )


def gathered(batches: Iterator[pd.DataFrame], rows: int) -> Iterator[pd.DataFrame]:
    """The batches joined in order into frames of at least ``rows`` rows (the last one fewer)."""
    pending: list[pd.DataFrame] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += len(batch)
        if held >= rows:
            yield pd.concat(pending, ignore_index=True)
            pending, held = [], 0
    if pending:
        yield pd.concat(pending, ignore_index=True)


def embed_chunks(chunks_df: Any, cfg: EmbeddingSettings, threads_per_task: int = 1) -> Any:
    """Spark DataFrame of embeddings for the given chunks (lazy)."""
    return chunks_df.select("chunk_id", "text").mapInPandas(
        lambda batches: embed_batches(batches, cfg, threads_per_task), schema=spark_schema(CHUNK_EMBEDDINGS)
    )


def missing_embeddings(chunks_df: Any, embeddings_df: Any | None) -> Any:
    """Chunks that have no stored embedding yet (all of them when the table does not exist)."""
    if embeddings_df is None:
        return chunks_df
    return chunks_df.join(embeddings_df.select("chunk_id"), "chunk_id", "left_anti")


@dataclass
class NewEmbeddings:
    frame: Any  # DataFrame of chunk_embeddings rows, persisted
    count: int

    def unpersist(self) -> None:
        self.frame.unpersist()


def embed_new_chunks(ctx: RunContext, chunks: NewChunks) -> NewEmbeddings:
    from pyspark import StorageLevel

    todo = missing_embeddings(chunks.frame, ctx.store.read(CHUNK_EMBEDDINGS))
    threads = int(ctx.spark.conf.get("spark.task.cpus", "1"))
    frame = embed_chunks(todo, ctx.settings.embedding, threads).persist(StorageLevel.MEMORY_AND_DISK)
    return NewEmbeddings(frame, frame.count())


def write_embeddings(ctx: RunContext, embeddings: NewEmbeddings, replaced: Any | None) -> None:
    """Merge the new vectors; those of replaced chunks are deleted in the same transaction."""
    ctx.store.merge_chunk_rows(CHUNK_EMBEDDINGS, embeddings.frame, replaced)
