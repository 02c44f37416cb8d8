"""Arrow columns read into the snapshot's numpy arrays, and table keys turned into dense indices.

The snapshot indexes chunks, communities and concepts by position; the tables refer to them by id.
These helpers do that translation with Arrow compute, never row by row in Python.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph.query.snapshot.text import TextColumn


def strings(table: pa.Table, column: str) -> TextColumn:
    """A string column as a ``TextColumn``: bytes and offsets, shared between processes without a copy."""
    if table.num_rows == 0:
        return TextColumn.from_strings([])
    return TextColumn.from_arrow(table.column(column))


def numbers(table: pa.Table, column: str, dtype: type[np.generic]) -> np.ndarray:
    """A numeric column as a numpy array of ``dtype`` (empty when the table is)."""
    if table.num_rows == 0:
        return np.zeros(0, dtype=dtype)
    return np.asarray(table.column(column).to_numpy(zero_copy_only=False), dtype=dtype)


def keys(table: pa.Table, column: str) -> pa.Array:
    """The ids of a table's rows, one Arrow array: row i of the table is index i of the snapshot."""
    if table.num_rows == 0:
        return pa.array([], pa.string())
    return table.column(column).combine_chunks()


def positions(lookup: pa.Array | pa.ChunkedArray, universe: pa.Array) -> np.ndarray:
    """Index of every key of ``lookup`` in ``universe`` (-1 where absent)."""
    idx = pc.index_in(lookup, value_set=universe)
    return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def level_keys(levels: pa.ChunkedArray | pa.Array, ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Composite "level/id" keys: community ids need only be unique within a level."""
    joined = pc.binary_join_element_wise(pc.cast(levels, pa.string()), pc.cast(ids, pa.string()), "\x1f")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def kept(table: pa.Table) -> pa.Table:
    """The rows the indexer kept (all of them when the table has no ``kept`` column)."""
    if table.num_rows and "kept" in table.column_names:
        return table.filter(pc.equal(table.column("kept"), True))
    return table
