"""Chunk embeddings as one unit-length float32 matrix aligned with the chunks table.

The vectors are decoded from their binary column by ``lazygraph.embed.codec``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lazygraph.embed.codec import decode_embeddings
from lazygraph.query.snapshot.columns import positions


def unit_embeddings(table: pa.Table, chunk_keys: pa.Array) -> np.ndarray:
    """Row i is the unit-length embedding of chunk i (zeros for a chunk without one)."""
    vectors = decode_embeddings(table)
    dim = vectors.shape[1] if vectors.size else 0
    embeddings = np.zeros((len(chunk_keys), dim), dtype=np.float32)
    if table.num_rows:
        pos = positions(table.column("chunk_id"), chunk_keys)
        found = pos >= 0
        embeddings[pos[found]] = vectors[found]
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        np.divide(embeddings, norms, out=embeddings, where=norms > 0)
    return embeddings
