"""Clustered synthetic embeddings, generated block by block from a seed, for benchmarking the index.

Uniform random vectors have no neighbourhood structure (every point is about as far from every other),
which no approximate index can exploit and no real corpus resembles. Real chunk embeddings gather
around topics, so these are a mixture: ``n_centres`` random unit topic directions, each vector one
centre plus Gaussian noise of a per-vector spread, normalised. With the default spreads a vector's
cosine to its centre is ~0.55-0.85 and to another vector of its topic ~0.3-0.7, as for MiniLM chunks
of one subject. Block b depends only on (seed, b), so a 10M-vector corpus is never held whole: the
index is filled and the exact neighbours computed by streaming the blocks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


class ClusteredVectors:
    """``n`` unit vectors of ``dim`` dimensions in blocks of ``block`` rows."""

    def __init__(
        self,
        n: int,
        dim: int = 384,
        n_centres: int = 10_000,
        seed: int = 0,
        block: int = 100_000,
        spread: tuple[float, float] = (0.6, 1.5),
    ) -> None:
        self.n, self.dim, self.block, self.seed, self.spread = n, dim, block, seed, spread
        rng = np.random.default_rng([seed, 0])
        centres = rng.standard_normal((n_centres, dim)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)

    @property
    def n_blocks(self) -> int:
        return (self.n + self.block - 1) // self.block

    def block_at(self, b: int) -> np.ndarray:
        """Rows ``b * block`` up to the next block, as float32 unit vectors."""
        size = min(self.block, self.n - b * self.block)
        return self._draw(np.random.default_rng([self.seed, 1, b]), size)

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, vectors) of every block in order."""
        for b in range(self.n_blocks):
            yield b * self.block, self.block_at(b)

    def queries(self, n: int) -> np.ndarray:
        """Query vectors from the same mixture but not in the corpus (another stream of the seed)."""
        return self._draw(np.random.default_rng([self.seed, 2]), n)

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        topic = rng.integers(0, len(self.centres), size)
        spread = rng.uniform(*self.spread, size=(size, 1)).astype(np.float32)
        noise = rng.standard_normal((size, self.dim), dtype=np.float32) * (spread / np.sqrt(self.dim))
        vectors = self.centres[topic] + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors


def exact_top(data: ClusteredVectors, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` nearest rows of every query (by inner product), best first, one pass over the
    blocks: (labels, similarities), each (n_queries, k)."""
    n_q = len(queries)
    best_scores = np.full((n_q, 0), -np.inf, dtype=np.float32)
    best_labels = np.zeros((n_q, 0), dtype=np.int64)
    for start, vectors in data.blocks():
        scores = queries @ vectors.T
        labels = np.broadcast_to(np.arange(start, start + len(vectors), dtype=np.int64), scores.shape)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_labels = np.concatenate([best_labels, labels], axis=1)
        keep = np.argpartition(-all_scores, min(k, all_scores.shape[1]) - 1, axis=1)[:, :k]
        best_scores = np.take_along_axis(all_scores, keep, axis=1)
        best_labels = np.take_along_axis(all_labels, keep, axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_labels, order, axis=1), np.take_along_axis(best_scores, order, axis=1)
