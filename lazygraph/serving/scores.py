"""``ChunkScores``: a score per chunk, held as one Arrow array of ids and one numpy array of scores.

A question's BM25 reaches every chunk holding one of its terms: tens of thousands of chunks for a
common term at 100,000 chunks, millions at 100 million. Turning each id into a Python string and each
pair into a dict entry costs more than reading and scoring the postings, and a search needs only the
best of them and the scores of a few chunks it already has. So the scores stay in arrays; ``top`` and
``positions`` answer those needs, and the mapping (``scores[chunk_id]``, iteration) is built only when a
caller uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class ChunkScores(Mapping[Hashable, float]):
    """Scores by chunk reference (ids in a store, positions in a snapshot), in the order given."""

    def __init__(self, ids: pa.Array, scores: np.ndarray) -> None:
        if len(ids) != len(scores):
            raise ValueError(f"{len(ids)} ids for {len(scores)} scores")
        self._ids = ids
        self.scores = np.asarray(scores, dtype=np.float32)
        self._position: dict[Hashable, int] | None = None

    @property
    def ids(self) -> pa.Array:
        return self._ids

    def with_scores(self, scores: np.ndarray) -> ChunkScores:
        """The same chunks, other scores."""
        return ChunkScores(self.ids, scores)

    @classmethod
    def from_mapping(cls, scores: Mapping[Hashable, float]) -> ChunkScores:
        if isinstance(scores, ChunkScores):
            return scores
        return cls(pa.array(list(scores)), np.asarray(list(scores.values()), dtype=np.float32))

    # ---- what a search needs -------------------------------------------------------------------------
    def positions(self, chunks: Sequence[Hashable]) -> np.ndarray:
        """Each chunk's position in these scores, -1 for a chunk without one (Arrow's hash lookup)."""
        if not len(chunks) or not len(self.ids):
            return np.full(len(chunks), -1, dtype=np.int64)
        at = pc.index_in(pa.array(list(chunks), self.ids.type), value_set=self.ids)
        return np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def ids_at(self, positions: np.ndarray) -> list[Hashable]:
        return self.ids.take(pa.array(np.asarray(positions, dtype=np.int64))).to_pylist()

    # ---- the mapping, built on first use ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.ids.to_pylist())

    def __getitem__(self, chunk: Hashable) -> float:
        if self._position is None:
            self._position = {c: i for i, c in enumerate(self.ids.to_pylist())}
        return float(self.scores[self._position[chunk]])


def term_weights(tf: np.ndarray, length: np.ndarray, average: float, k1: float, b: float) -> np.ndarray:
    """BM25's weight of a term in a chunk without the term's idf, ``tf·(k1+1) / (tf + k1·(1−b+b·dl/avgdl))``
    (as ``query.snapshot.lexical.bm25_scores``): a posting's impact at build time, and with the idf its
    contribution to a query's scores. Zero for an index without lengths."""
    tf = np.asarray(tf, dtype=np.float64)
    if average <= 0:
        return np.zeros(len(tf))
    norm = k1 * (1.0 - b + b * np.asarray(length, dtype=np.float64) / average)
    return tf * (k1 + 1.0) / (tf + norm)


class RowScores(ChunkScores):
    """Scores of a store's chunks named by their row numbers in its chunks dataset (format 6): a query's
    postings are summed by these integers, and a chunk's id is read only when a caller names it (the
    best of a ranking, ``ids_at``) or asks for a chunk by id (``positions``).

    ``ids_of_rows`` reads the ids of rows (in the order given); ``rows_of_ids`` the row of each id (-1
    for an id the store does not hold)."""

    def __init__(
        self,
        rows: np.ndarray,
        scores: np.ndarray,
        ids_of_rows: Callable[[np.ndarray], pa.Array],
        rows_of_ids: Callable[[Sequence[Hashable]], np.ndarray],
    ) -> None:
        if len(rows) != len(scores):
            raise ValueError(f"{len(rows)} rows for {len(scores)} scores")
        self.rows = np.asarray(rows, dtype=np.int64)
        self.scores = np.asarray(scores, dtype=np.float32)
        self._ids_of_rows = ids_of_rows
        self._rows_of_ids = rows_of_ids
        self._all_ids: pa.Array | None = None
        self._position = None

    @property
    def ids(self) -> pa.Array:
        """Every chunk's id (read once, on first use: every row these scores reach)."""
        if self._all_ids is None:
            self._all_ids = self._ids_of_rows(self.rows)
        return self._all_ids

    def with_scores(self, scores: np.ndarray) -> RowScores:
        return RowScores(self.rows, scores, self._ids_of_rows, self._rows_of_ids)

    def positions(self, chunks: Sequence[Hashable]) -> np.ndarray:
        if not len(chunks) or not len(self.rows):
            return np.full(len(chunks), -1, dtype=np.int64)
        at = pc.index_in(pa.array(self._rows_of_ids(chunks)), value_set=pa.array(self.rows))
        return np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def ids_at(self, positions: np.ndarray) -> list[Hashable]:
        return self._ids_of_rows(self.rows[np.asarray(positions, dtype=np.int64)]).to_pylist()
