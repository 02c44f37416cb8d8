"""A column of strings as two numpy arrays: the UTF-8 bytes of every string, and their offsets.

A snapshot holds every chunk's text. As an object array, that is one Python string per chunk, which
each process copies when it receives the snapshot (pickle rebuilds every object). As a byte buffer
and offsets it is two arrays: Ray's object store (pickle protocol 5 with out-of-band buffers) hands
them to every actor on a node without a copy, and a string is decoded only when it is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class TextColumn:
    """Read-only strings (None where the column was null), indexed like a list."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None = None) -> None:
        self.data = data  # uint8: every string's UTF-8 bytes, end to end
        self.offsets = offsets  # int64 (n + 1,): string i is data[offsets[i]:offsets[i + 1]]
        self.valid = valid  # bool (n,), or None when no string is null

    @classmethod
    def from_arrow(cls, column: pa.Array | pa.ChunkedArray) -> TextColumn:
        """From an Arrow string column, through its own buffers (no Python string per row)."""
        array = pc.cast(column, pa.large_string())
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks else pa.array([], pa.large_string())
        _, offsets_buffer, data_buffer = array.buffers()
        n = len(array)
        if n == 0:
            return cls.from_strings([])
        offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset : array.offset + n + 1]
        data = (
            np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        )
        start, end = int(offsets[0]), int(offsets[-1])
        valid = None if array.null_count == 0 else np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
        # Copies of just this column's bytes: the Arrow table behind them can then be freed.
        return cls(data[start:end].copy(), offsets - start, valid)

    @classmethod
    def from_strings(cls, strings: list[str | None]) -> TextColumn:
        return (
            cls.from_arrow(pa.array(strings, pa.large_string()))
            if strings
            else cls(np.zeros(0, np.uint8), np.zeros(1, np.int64))
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int | np.integer | np.ndarray | list) -> Any:
        """One string for an integer; an object array of strings for a mask or a list of positions,
        as numpy indexing gives."""
        if isinstance(i, (np.ndarray, list)):
            positions = np.arange(len(self))[np.asarray(i)]
            return np.asarray([self._one(int(p)) for p in positions], dtype=object)
        return self._one(int(i))

    def _one(self, i: int) -> str | None:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"string {i} of a column of {len(self)}")
        if self.valid is not None and not self.valid[i]:
            return None
        return self.data[self.offsets[i] : self.offsets[i + 1]].tobytes().decode("utf-8")

    def __iter__(self) -> Iterator[str | None]:
        return (self[i] for i in range(len(self)))

    def tolist(self) -> list[str | None]:
        return list(self)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """An object array of the strings (a copy: for code that wants numpy string operations)."""
        return np.asarray(self.tolist(), dtype=dtype or object)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TextColumn, (self.data, self.offsets, self.valid))

    def __repr__(self) -> str:
        return f"TextColumn({len(self)} strings, {self.data.nbytes} bytes)"
