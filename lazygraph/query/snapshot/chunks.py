"""The chunk part of a snapshot: texts, doc ids, titles, token counts and the embedding matrix.

Chunk i of the snapshot is row i of the chunks table; every other part refers to chunks by that index.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lazygraph.errors import IndexStateError
from lazygraph.query.snapshot.columns import numbers, strings
from lazygraph.query.snapshot.embeddings import unit_embeddings
from lazygraph.query.snapshot.text import TextColumn


class ChunkColumns(NamedTuple):
    """The snapshot fields about chunks (named as in ``IndexSnapshot``)."""

    chunk_ids: TextColumn
    chunk_doc_ids: TextColumn
    chunk_titles: TextColumn
    chunk_texts: TextColumn
    chunk_tokens: np.ndarray
    embeddings: np.ndarray
    embedding_model: str


def build_chunks(uri: str, chunks: pa.Table, embeddings: pa.Table, chunk_keys: pa.Array) -> ChunkColumns:
    """The chunk columns, with the embeddings aligned to the chunks table by chunk id."""
    if chunks.num_rows and not embeddings.num_rows:
        raise IndexStateError(f"index {uri} has chunks but no chunk embeddings; re-run `lazygraph index`")
    return ChunkColumns(
        chunk_ids=strings(chunks, "chunk_id"),
        chunk_doc_ids=strings(chunks, "doc_id"),
        chunk_titles=strings(chunks, "title"),
        chunk_texts=strings(chunks, "text"),
        chunk_tokens=numbers(chunks, "n_tokens", np.int64),
        # Read without its vectors when an approximate index replaces the matrix (snapshot.load).
        embeddings=unit_embeddings(embeddings, chunk_keys)
        if "embedding" in embeddings.column_names
        else np.zeros((0, 0), dtype=np.float32),
        embedding_model=_model(embeddings),
    )


def _model(embeddings: pa.Table) -> str:
    """The embedding model that wrote the vectors ("" when unknown)."""
    if not embeddings.num_rows or "model" not in embeddings.column_names:
        return ""
    return str(embeddings.column("model")[0].as_py())
