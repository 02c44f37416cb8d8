"""The snapshot itself: what querying reads of an index, as arrays indexed by dense integers.

Chunk, community and concept i are positions in these arrays, so ranking a query against the whole
corpus is a handful of vectorised operations. Every field is a numpy array, a scipy CSR array (three
numpy arrays) or a scalar, so that a snapshot can be shared between processes without copying; the
lookups built from them (dicts, concept vectors) are made lazily, per process.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.sparse import csr_array

from lazygraph.lexical.terms import tokenize
from lazygraph.query.reader import ChunkRecord, RankedChunks, top_chunks
from lazygraph.query.snapshot.lexical import LexicalColumns, bm25_scores, term_positions
from lazygraph.query.snapshot.sparse import csr, entry_rows, row
from lazygraph.query.snapshot.text import TextColumn
from lazygraph.settings import LexicalSettings
from lazygraph.vectors.search import nearest


class ConceptSubgraph(NamedTuple):
    """The concepts some chunks mention, in the index's concept order, with how many of those chunks
    mention each (``mentions``) and to how many of the others each is tied by a kept edge (``degree``)."""

    names: list[str]
    mentions: np.ndarray
    degree: np.ndarray


@dataclass
class IndexSnapshot:
    uri: str
    versions: tuple[tuple[str, int], ...]
    # chunks (see snapshot.chunks)
    chunk_ids: TextColumn
    chunk_doc_ids: TextColumn
    chunk_titles: TextColumn
    chunk_texts: TextColumn
    chunk_tokens: np.ndarray
    embeddings: np.ndarray  # (n_chunks, dim), unit length
    embedding_model: str
    # communities (see snapshot.communities)
    community_ids: TextColumn
    community_level: np.ndarray
    community_parent: np.ndarray
    community_top_concepts: list[list[str]]
    community_children: csr_array
    community_chunks: csr_array
    n_levels: int
    chunk_primary_community: np.ndarray  # (n_levels, n_chunks): the community holding most of its mentions
    # concepts (see snapshot.concepts)
    concept_ids: TextColumn
    concept_names: TextColumn
    chunk_concepts: csr_array
    concept_chunks: csr_array
    concept_adjacency: csr_array
    concept_community: np.ndarray  # (n_levels, n_concepts), -1 where unknown
    # lexical statistics (see snapshot.lexical): empty for an index without a chunk_terms table
    term_vocabulary: np.ndarray
    term_chunks: csr_array
    chunk_lexical_length: np.ndarray
    average_lexical_length: float
    # The approximate index of the embeddings (lazygraph.vectors), set for indexes above
    # ``vectors.ann_min_chunks``; ``embeddings`` is then empty and similarities come from it.
    vector_index: Any = None
    # The index version the snapshot was read at (``manifest.index_version``), which batch results record.
    index_version: str = ""
    _concept_vectors: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _chunk_index: dict[str, int] | None = field(default=None, repr=False)
    _chunk_id_ranks: np.ndarray | None = field(default=None, repr=False)
    _concept_name_index: dict[str, int] | None = field(default=None, repr=False)
    _chunk_communities: csr_array | None = field(default=None, repr=False)

    # ---- crossing processes -----------------------------------------------------------------------
    def __getstate__(self) -> dict:
        """The arrays only: the lock and the lookups built lazily are per process."""
        state = dict(self.__dict__)
        for name in (
            "_lock",
            "_chunk_index",
            "_chunk_id_ranks",
            "_concept_name_index",
            "_concept_vectors",
            "_chunk_communities",
        ):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._chunk_index = self._concept_name_index = self._concept_vectors = None
        self._chunk_communities = self._chunk_id_ranks = None

    # ---- sizes and lookups ------------------------------------------------------------------------
    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_communities(self) -> int:
        return len(self.community_ids)

    @property
    def n_concepts(self) -> int:
        return len(self.concept_ids)

    @property
    def has_lexical(self) -> bool:
        """Whether BM25 scores anything (an index built before chunk_terms has no terms)."""
        return len(self.term_vocabulary) > 0

    def roots(self) -> np.ndarray:
        """Level-0 communities (including the synthetic one for chunks without concepts)."""
        return np.flatnonzero(self.community_level == 0)

    def similarities(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every chunk to a unit-length vector (the embeddings are unit length).

        With an approximate index, the ``vectors.candidates`` nearest chunks have theirs and every other
        chunk a floor below them (``lazygraph.vectors.search.nearest`` gives the per-chunk form)."""
        if self.vector_index is not None:
            return nearest(self.vector_index, vector).dense(self.n_chunks)
        return self.embeddings @ np.asarray(vector, dtype=np.float32)

    def nearest_chunks(self, vector: np.ndarray, k: int) -> RankedChunks:
        """The ``k`` chunks most similar to a unit-length vector, best first (``IndexReader``)."""
        return top_chunks(self.similarities(vector), k)

    def average_chunk_tokens(self) -> float:
        return float(self.chunk_tokens.mean()) if len(self.chunk_tokens) else 1.0

    def chunk_records(self, chunks: Sequence[int]) -> list[ChunkRecord]:
        """The chunks at these positions as an answer quotes and cites them (``IndexReader``)."""
        return [
            ChunkRecord(
                str(self.chunk_ids[c]),
                str(self.chunk_doc_ids[c]),
                str(self.chunk_titles[c] or ""),
                str(self.chunk_texts[c]),
            )
            for c in chunks
        ]

    def chunk_community_index(self) -> csr_array:
        """chunk -> the communities holding it (every level): ``community_chunks`` transposed, built
        once per process for the ranking from candidates, which starts from chunks."""
        with self._lock:
            if self._chunk_communities is None:
                self._chunk_communities = csr(
                    self.community_chunks.indices,
                    entry_rows(self.community_chunks),
                    (self.n_chunks, self.n_communities),
                )
            return self._chunk_communities

    def bm25(self, text: str, params: LexicalSettings | None = None) -> np.ndarray:
        """Okapi BM25 score of every chunk for ``text`` (float32, all 0 without lexical statistics)."""
        params = params or LexicalSettings()
        lexical = LexicalColumns(
            self.term_vocabulary, self.term_chunks, self.chunk_lexical_length, self.average_lexical_length
        )
        return bm25_scores(lexical, tokenize(text), params.k1, params.b)

    def lexical_scores(self, text: str, params: LexicalSettings) -> dict[int, float]:
        """BM25 of the chunks holding a term of ``text``, by position (``IndexReader``)."""
        scores = self.bm25(text, params)
        held = np.flatnonzero(scores > 0)
        return dict(zip(held.tolist(), scores[held].tolist(), strict=True))

    def term_weights(self, text: str) -> dict[str, float]:
        """The IDF of each distinct term of ``text`` the index knows (BM25's idf; empty without terms)."""
        n = float(self.n_chunks)
        indptr = self.term_chunks.indptr
        weights = {}
        for term, at in term_positions(self.term_vocabulary, tokenize(text)).items():
            df = float(indptr[at + 1] - indptr[at])
            weights[term] = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
        return weights

    def passage(self, chunk: int) -> str:
        """The chunk as every prompt quotes it: its title on the first line, then its text."""
        title = str(self.chunk_titles[chunk] or "")
        text = str(self.chunk_texts[chunk])
        return f"{title}\n{text}" if title else text

    def chunk_index(self) -> dict[str, int]:
        if self._chunk_index is None:
            self._chunk_index = {cid: i for i, cid in enumerate(self.chunk_ids.tolist())}
        return self._chunk_index

    def chunk_id_ranks(self) -> np.ndarray:
        """Each chunk's place among the chunk ids in sorted order: the tie-break of a fused ranking,
        which the serving store, naming chunks by id, applies alike (``HybridSearch``)."""
        if self._chunk_id_ranks is None:
            order = np.argsort(np.asarray(self.chunk_ids.tolist(), dtype=str), kind="stable")
            ranks = np.empty(len(order), dtype=np.int64)
            ranks[order] = np.arange(len(order))
            self._chunk_id_ranks = ranks
        return self._chunk_id_ranks

    def concept_name_index(self) -> dict[str, int]:
        if self._concept_name_index is None:
            self._concept_name_index = {name.lower(): i for i, name in enumerate(self.concept_names.tolist())}
        return self._concept_name_index

    def concept_subgraphs(self, groups: Sequence[Sequence[int]]) -> list[ConceptSubgraph]:
        """The concept subgraph of each group of chunks (positions): what the map step names a
        group's topics by."""
        return [self._concept_subgraph(chunks) for chunks in groups]

    def _concept_subgraph(self, chunks: Sequence[int]) -> ConceptSubgraph:
        rows = [row(self.chunk_concepts, c) for c in chunks]
        if self.n_concepts == 0 or not rows:
            return ConceptSubgraph([], np.zeros(0, np.int64), np.zeros(0, np.int64))
        concepts = np.unique(np.concatenate(rows))
        in_set = np.zeros(self.n_concepts, dtype=bool)
        in_set[concepts] = True
        degree = np.array([in_set[row(self.concept_adjacency, c)].sum() for c in concepts], dtype=np.int64)
        mentions = np.bincount(np.concatenate(rows), minlength=self.n_concepts)[concepts]
        return ConceptSubgraph([str(self.concept_names[c]) for c in concepts], mentions, degree)

    def describe_community(self, c: int) -> str:
        concepts = ", ".join(self.community_top_concepts[c][:4])
        return f"L{int(self.community_level[c])}:{self.community_ids[c]}" + (
            f" [{concepts}]" if concepts else ""
        )

    # ---- concept-name embeddings (computed once, cached on disk) ------------------------------------
    def concept_vectors(
        self, encode: Callable[[list[str]], np.ndarray], cache_dir: Path | None
    ) -> np.ndarray:
        """Unit vectors of the concept names; embedded on first use, then read from ``cache_dir``."""
        with self._lock:
            if self._concept_vectors is None:
                self._concept_vectors = self._load_or_encode_concept_vectors(encode, cache_dir)
            return self._concept_vectors

    def _load_or_encode_concept_vectors(
        self, encode: Callable[[list[str]], np.ndarray], cache_dir: Path | None
    ) -> np.ndarray:
        path = self._concept_vectors_path(cache_dir) if cache_dir is not None else None
        if path is not None and path.is_file():
            cached = np.load(path)
            if cached.shape[0] == self.n_concepts:
                return cached
        names = self.concept_names.tolist()
        vectors = np.asarray(encode(names), dtype=np.float32) if names else np.zeros((0, 1), np.float32)
        if path is not None and len(names):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, vectors)
            tmp.replace(path)  # atomic: a concurrent reader never sees half a file
        return vectors

    def _concept_vectors_path(self, cache_dir: Path) -> Path:
        """One file per index, table versions and embedding model: any change embeds the names again."""
        key = hashlib.sha256(repr((self.uri, self.versions, self.embedding_model)).encode()).hexdigest()
        return Path(cache_dir) / f"concept-vectors-{key[:24]}.npy"
