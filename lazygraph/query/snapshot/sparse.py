"""Rows of variable length, stored as scipy CSR arrays: every one-to-many relation of the snapshot.

A CSR array is three plain numpy arrays (``indptr``, ``indices``, ``data``), so a snapshot can be
shared without copying. The search reads a row with ``row``, a slice of ``indices``, and never with
``m[i]``, which would build a new sparse array on every call of its hot loops.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_array


def csr(
    rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int], weights: np.ndarray | None = None
) -> csr_array:
    """Entries ``(rows[k], cols[k])`` with weight ``weights[k]`` (1 if none), each row in input order.

    The arrays are laid out here rather than converted from COO, which would sum duplicate entries and
    sort every row: the search relies on neither.
    """
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    data = np.ones(len(rows), np.float32) if weights is None else np.asarray(weights, np.float32)[order]
    return csr_array((data, np.asarray(cols, dtype=np.int64)[order], indptr), shape=shape)


def empty_csr(shape: tuple[int, int]) -> csr_array:
    """A relation with no entries."""
    return csr(np.zeros(0, np.int64), np.zeros(0, np.int64), shape)


def row(m: csr_array, i: int) -> np.ndarray:
    """The column indices of row ``i``: a view, no copy."""
    return m.indices[m.indptr[i] : m.indptr[i + 1]]


def entry_rows(m: csr_array) -> np.ndarray:
    """The row of every entry, aligned with ``m.indices`` (int64: callers compute keys from it)."""
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
