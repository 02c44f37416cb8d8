"""Chunk vectors as the chunk_embeddings table stores them, decoded back into a float32 matrix.

The embed stage writes every vector as little-endian bytes with its dtype and dimension, so that an
index can change its storage precision; readers (the query snapshot, the vector index build) want one
dense matrix.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def decode_embeddings(table: pa.Table) -> np.ndarray:
    """(n, dim) float32 from the binary column, fast when all rows share a dtype and dimension."""
    n = table.num_rows
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    dtypes = set(table.column("dtype").to_pylist())
    dims = set(table.column("dim").to_pylist())
    col = table.column("embedding").combine_chunks()
    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        col = col.cast(pa.large_binary())  # e.g. binary_view from newer readers: offsets needed below
    if len(dtypes) == 1 and len(dims) == 1 and col.null_count == 0:
        dtype = np.dtype(dtypes.pop()).newbyteorder("<")
        dim = int(dims.pop())
        offset_type = np.int64 if pa.types.is_large_binary(col.type) else np.int32
        offsets = np.frombuffer(col.buffers()[1], dtype=offset_type)[col.offset : col.offset + n + 1]
        data = np.frombuffer(col.buffers()[2], dtype=np.uint8)
        if np.all(np.diff(offsets) == dim * dtype.itemsize):
            raw = data[offsets[0] : offsets[-1]]
            return raw.view(dtype).reshape(n, dim).astype(np.float32)
    return _decode_row_by_row(table, col)


def _decode_row_by_row(table: pa.Table, col: pa.Array) -> np.ndarray:
    """Mixed storage (rare: an index appended with different settings), zero-padded to the widest."""
    dims = table.column("dim").to_pylist()
    out = np.zeros((table.num_rows, max(int(d) for d in dims)), dtype=np.float32)
    for i, (blob, dt, d) in enumerate(
        zip(col.to_pylist(), table.column("dtype").to_pylist(), dims, strict=True)
    ):
        if blob is not None:
            out[i, : int(d)] = np.frombuffer(blob, dtype=np.dtype(dt).newbyteorder("<"))
    return out
