"""What a search method reads of an index, as one interface over two sources.

``IndexReader`` is what the vector and hybrid methods need: the index's identity, the chunks nearest a
question's embedding, the BM25 scores of the chunks holding its terms, and the chunks it quotes. The
in-memory snapshot (``lazygraph.query.snapshot``) satisfies it with chunks named by their positions in
its arrays; ``StoreReader`` (``lazygraph.query.store_reader``) with chunks named by their ids, reading
the serving store only for the rows a query touches. A search hands the references one reader gave back
to the same reader and never looks inside them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from lazygraph.settings import LexicalSettings

# A reader's name for one chunk: a position in a snapshot's arrays, or a chunk id in a store.
ChunkRef = Hashable


class ChunkRecord(NamedTuple):
    """One chunk as an answer quotes and cites it."""

    chunk_id: str
    doc_id: str
    title: str  # "" for a chunk without a title
    text: str

    @property
    def passage(self) -> str:
        """The chunk as every prompt quotes it: its title on the first line, then its text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class RankedChunks:
    """Chunks best first, with their scores (higher is better)."""

    chunks: list[ChunkRef]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.chunks)

    def head(self, k: int) -> RankedChunks:
        return RankedChunks(self.chunks[:k], self.scores[:k])


def top_chunks(scores: np.ndarray, k: int, tie_keys: np.ndarray | None = None) -> RankedChunks:
    """The ``k`` best of a score per chunk (chunk i scored ``scores[i]``), best first. Equal scores are
    ordered by ``tie_keys`` (lowest first) when given, else as ``argpartition`` leaves them."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return RankedChunks([], np.zeros(0, dtype=np.float32))
    if tie_keys is not None:
        # Every chunk scoring at least the k-th best, so the tie at the cut is broken by key too.
        kth = -np.partition(-scores, k - 1)[k - 1] if k < n else -np.inf
        head = np.flatnonzero(scores >= kth)
        top = head[np.lexsort((tie_keys[head], -scores[head]))][:k]
        return RankedChunks(top.tolist(), scores[top])
    # Only the head can be wanted; partition instead of sorting the whole corpus.
    top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    top = top[np.argsort(-scores[top], kind="stable")]
    return RankedChunks(top.tolist(), scores[top])


class IndexReader(Protocol):
    """The reads of the vector search: the snapshot's, or the serving store's (``StoreReader``)."""

    @property
    def uri(self) -> str:
        """The index's location (where the LLM cache lives by default)."""

    @property
    def index_version(self) -> str:
        """The version of the index read (``manifest.index_version``), which batch results record."""

    @property
    def n_chunks(self) -> int: ...

    def average_chunk_tokens(self) -> float:
        """The mean token count of a chunk (1.0 for an index without chunks): how deep a cut to a
        context limit has to rank."""

    def similarities(self, vector: np.ndarray) -> np.ndarray | None:
        """A score for every chunk (chunk i at position i) where the reader holds every vector; None
        where it ranks only on demand (``nearest_chunks``)."""

    def nearest_chunks(self, vector: np.ndarray, k: int) -> RankedChunks:
        """The ``k`` chunks most similar (cosine) to a unit-length ``vector``, most similar first."""

    def lexical_scores(self, text: str, params: LexicalSettings) -> Mapping[ChunkRef, float]:
        """Okapi BM25 of every chunk holding a term of ``text`` (``lexical.tokenize``), by reference;
        empty for an index without lexical statistics (the store's is a ``ChunkScores``, in arrays)."""

    def chunk_records(self, chunks: Sequence[ChunkRef]) -> list[ChunkRecord]:
        """The records of ``chunks`` (references this reader gave), in the order asked."""
