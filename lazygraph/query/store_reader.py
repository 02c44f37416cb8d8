"""``StoreReader``: the ``IndexReader`` of the serving store (``lazygraph.serving``), for engines that
read only what a query touches (``query.index_source: store``).

Chunks are named by their ids. Nothing index-sized is held: the nearest chunks come from the store's
vector search, BM25 from the postings of the question's terms, and texts from its chunk lookups
(behind ``ServingStore``'s LRU cache).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lazygraph.errors import IndexStateError
from lazygraph.lexical import tokenize
from lazygraph.query.reader import ChunkRecord, RankedChunks
from lazygraph.serving import ChunkScores, ServingStore, StoredChunk
from lazygraph.settings import LexicalSettings, Settings


class StoreReader:
    """The reads of the vector search, from an index's serving store."""

    def __init__(self, store: ServingStore) -> None:
        self.store = store

    @classmethod
    def open(cls, index: str, settings: Settings) -> StoreReader:
        """The store of the index's last complete run (``StoreOutOfDateError`` when it is not built)."""
        return cls(ServingStore.open(index, settings))

    @property
    def uri(self) -> str:
        return self.store.index_uri

    @property
    def index_version(self) -> str:
        return self.store.index_version

    @property
    def n_chunks(self) -> int:
        return self.store.n_chunks

    def average_chunk_tokens(self) -> float:
        mean = self.store.mean_chunk_tokens()
        return 1.0 if mean is None else mean

    def similarities(self, vector: np.ndarray) -> None:
        """None: a store scores only the chunks a query fetches (``nearest_chunks``)."""
        return None

    def nearest_chunks(self, vector: np.ndarray, k: int) -> RankedChunks:
        found = self.store.nearest_chunks(vector, k)
        return RankedChunks([hit.id for hit in found], np.asarray([hit.score for hit in found], np.float32))

    def lexical_scores(self, text: str, params: LexicalSettings) -> ChunkScores:
        return self.store.lexical_scores(tokenize(text), params.k1, params.b)

    def chunk_records(self, chunks: Sequence[str]) -> list[ChunkRecord]:
        by_id = {chunk.chunk_id: chunk for chunk in self.store.chunks(chunks)}
        missing = [c for c in chunks if c not in by_id]
        if missing:
            raise IndexStateError(
                f"the serving store {self.store.uri} has vectors but no chunk rows for {missing[:5]}; "
                f"rebuild it with `lazygraph store build --index {self.uri} --force`"
            )
        return [_record(by_id[c]) for c in chunks]


def _record(chunk: StoredChunk) -> ChunkRecord:
    return ChunkRecord(chunk.chunk_id, chunk.doc_id, chunk.title or "", chunk.text)
