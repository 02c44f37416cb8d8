"""Searching the approximate index: a query's nearest chunks and every chunk's similarity to it.

The index returns the ``vectors.candidates`` nearest chunks with their scores; any other chunk a
search reads later gets its similarity decoded from its code on demand. The ranking of chunks and
communities built on these is the query's business (``lazygraph.query.ranking``).
"""

from __future__ import annotations

import numpy as np

from lazygraph.vectors.ann import VectorIndex


class QuerySimilarity:
    """Similarity of every chunk to one query: the index's scores for its candidates, decoded from the
    codes on demand (and kept) for any other chunk read; indexed like the dense array it replaces."""

    def __init__(self, index: VectorIndex, query: np.ndarray, chunks: np.ndarray, scores: np.ndarray) -> None:
        self.index = index
        self.query = np.asarray(query, dtype=np.float32)
        self.known: dict[int, float] = dict(zip(chunks.tolist(), scores.tolist(), strict=True))
        # Below every candidate: what a chunk outside the candidates is worth for ranking.
        self.floor = float(scores.min()) if len(scores) else 0.0

    def __getitem__(self, chunk: int | np.integer) -> float:
        chunk = int(chunk)
        if chunk not in self.known:
            self.known[chunk] = float(self.index.similarities(np.asarray([chunk]), self.query)[0])
        return self.known[chunk]

    def of(self, chunks: np.ndarray) -> np.ndarray:
        """Similarities of several chunks, decoding the unknown ones in one batch."""
        chunks = np.asarray(chunks, dtype=np.int64)
        unknown = np.asarray([c for c in chunks.tolist() if c not in self.known], dtype=np.int64)
        if len(unknown):
            decoded = self.index.similarities(unknown, self.query)
            self.known.update(zip(unknown.tolist(), decoded.tolist(), strict=True))
        return np.asarray([self.known[c] for c in chunks.tolist()], dtype=np.float32)

    def dense(self, n_chunks: int) -> np.ndarray:
        """A similarity for every chunk: the known ones, the floor (a little below) for the rest."""
        out = np.full(n_chunks, np.float32(self.floor) - np.float32(1e-3), dtype=np.float32)
        if self.known:
            out[np.fromiter(self.known.keys(), np.int64)] = np.fromiter(self.known.values(), np.float32)
        return out


def nearest(index: VectorIndex, vector: np.ndarray) -> QuerySimilarity:
    """The ``vectors.candidates`` nearest chunks to ``vector``, as a similarity of every chunk."""
    chunks, scores = index.search(vector, index.cfg.candidates)
    return QuerySimilarity(index, vector, chunks, scores)
