"""Chunk-embedding stage in Spark: Arrow batches of chunk texts through the embedding model.

Each Python worker loads the model once (``get_embedder`` caches it per process), limited to the
cores one Spark task owns, so that concurrent tasks do not oversubscribe the machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from lazygraph.settings import EmbeddingSettings

EMBEDDING_SCHEMA = "chunk_id string, embedding binary, dtype string, dim int, model string"


def embed_batches(
    batches: Iterator[pd.DataFrame], cfg: EmbeddingSettings, threads: int
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: chunks (chunk_id, text) -> chunk_embeddings rows."""
    from lazygraph.embed.embedder import get_embedder

    embedder = get_embedder(cfg, threads)
    for batch in batches:
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


def embed_chunks(chunks_df: Any, cfg: EmbeddingSettings, threads_per_task: int = 1) -> Any:
    """Spark DataFrame of embeddings for the given chunks (lazy)."""
    return chunks_df.select("chunk_id", "text").mapInPandas(
        lambda batches: embed_batches(batches, cfg, threads_per_task), schema=EMBEDDING_SCHEMA
    )


def missing_embeddings(chunks_df: Any, embeddings_df: Any | None) -> Any:
    """Chunks that have no stored embedding yet (all of them when the table does not exist)."""
    if embeddings_df is None:
        return chunks_df
    return chunks_df.join(embeddings_df.select("chunk_id"), "chunk_id", "left_anti")
