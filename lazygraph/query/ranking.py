"""Ranking chunks and communities best first for a search: rank fusion and community ranking.

- Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009, "Reciprocal Rank Fusion outperforms
  Condorcet and individual Rank Learning Methods") needs no score calibration between two rankings:
  a chunk scores the sum over rankings of 1 / (k + rank). Every chunk has a vector rank; only chunks
  with a query term (BM25 > 0) have a lexical one.
- ``CommunityRanking`` ranks every community by the ranks of its best k chunks, compared
  lexicographically (best chunk first, then the second best, ...), and hands out each community's
  chunks in rank order; it sorts every chunk, O(n log n) per subquery.
- Over an approximate index (``lazygraph.vectors``) that is seconds at ten million chunks, so
  ``CandidateRanking`` ranks only the ``candidates`` nearest chunks (plus those the subquery's concepts
  or BM25 bring in); every other chunk ties at a floor rank below them. A community is ranked by its
  best candidates' ranks (slots its other chunks fill read the floor rank), so communities holding near
  chunks come first, as in the exact ranking. Within a community the search takes its candidates in
  rank order, then its other chunks: ordered by the similarity decoded from their codes when the
  community is small (a leaf), in stored order otherwise (a root of millions; the budget never
  reaches that far down it).
"""

from __future__ import annotations

import numpy as np

from lazygraph.query.snapshot import IndexSnapshot, entry_rows, row
from lazygraph.settings import VectorIndexSettings
from lazygraph.vectors.search import QuerySimilarity, nearest


# ---- rank fusion -----------------------------------------------------------------------------------------
def ranks(scores: np.ndarray) -> np.ndarray:
    """The 1-based rank of every score, highest first; equal scores share the best rank among them."""
    descending = np.sort(-scores)
    return np.searchsorted(descending, -scores, side="left") + 1


def reciprocal_rank(scores: np.ndarray, k: float, retrieved: np.ndarray | None = None) -> np.ndarray:
    """1 / (k + rank) of every chunk in one ranking; 0 for chunks the ranking did not retrieve, which
    must score below every retrieved one (so only the retrieved few are sorted)."""
    if retrieved is None:
        return 1.0 / (k + ranks(scores))
    contribution = np.zeros(len(scores), dtype=np.float64)
    chosen = np.flatnonzero(retrieved)
    contribution[chosen] = 1.0 / (k + ranks(scores[chosen]))
    return contribution


def fuse(similarities: np.ndarray, bm25: np.ndarray, k: float) -> np.ndarray:
    """Reciprocal rank fusion of the vector ranking (every chunk) and the BM25 ranking (chunks with a
    query term). Float64: deep ranks differ by less than float32 resolves."""
    return reciprocal_rank(similarities, k) + reciprocal_rank(bm25, k, retrieved=bm25 > 0)


# ---- the exact ranking -----------------------------------------------------------------------------------
def chunk_similarities(
    snapshot: IndexSnapshot, query_vector: np.ndarray, concept_indices: list[int], concept_boost: float
) -> np.ndarray:
    """Cosine similarity of every chunk to the query, plus a bonus for mentioning its matched concepts."""
    if snapshot.n_chunks == 0:
        return np.zeros(0, dtype=np.float32)
    return boost_concepts(snapshot, snapshot.similarities(query_vector), concept_indices, concept_boost)


def boost_concepts(
    snapshot: IndexSnapshot, sims: np.ndarray, concept_indices: list[int], concept_boost: float
) -> np.ndarray:
    """The similarities plus a bonus for each chunk mentioning the subquery's matched concepts."""
    if concept_boost > 0 and concept_indices:
        concept_chunks = snapshot.concept_chunks
        hits = np.concatenate([row(concept_chunks, i) for i in concept_indices])
        if len(hits):
            counts = np.bincount(hits, minlength=snapshot.n_chunks).astype(np.float32)
            sims = sims + concept_boost * counts / len(concept_indices)
    return sims


class CommunityRanking:
    """Per-subquery ranks of chunks and communities, and each community's chunks in rank order."""

    def __init__(self, snapshot: IndexSnapshot, similarities: np.ndarray, k: int) -> None:
        n = snapshot.n_chunks
        csr = snapshot.community_chunks
        self.order = np.argsort(-similarities, kind="stable")
        rank = np.empty(n, dtype=np.int64)
        rank[self.order] = np.arange(n, dtype=np.int64)
        # One sort orders every community's chunks by rank: key = community * n + rank.
        keys = entry_rows(csr) * max(n, 1) + rank[csr.indices]
        keys.sort()
        sorted_ranks = keys % max(n, 1)
        self.sorted_chunks = self.order[sorted_ranks] if n else np.zeros(0, dtype=np.int64)
        self.indptr = csr.indptr
        self.cursor = csr.indptr[:-1].copy()
        self.top_ranks = np.full((csr.shape[0], k), n, dtype=np.int64)
        for j in range(k):
            pos = self.indptr[:-1] + j
            valid = pos < self.indptr[1:]
            self.top_ranks[valid, j] = sorted_ranks[pos[valid]]

    def rank(self, communities: np.ndarray) -> np.ndarray:
        """Communities sorted best first (lexicographic on their best chunk ranks)."""
        communities = np.asarray(communities, dtype=np.int64)
        if len(communities) == 0:
            return communities
        ranks = self.top_ranks[communities]
        order = np.lexsort(tuple(ranks[:, j] for j in range(ranks.shape[1] - 1, -1, -1)))
        return communities[order]

    def take_untested(self, community: int, k: int, tested: np.ndarray) -> list[int]:
        """Up to k best-ranked untested chunks of the community, marked tested."""
        out: list[int] = []
        p, end = int(self.cursor[community]), int(self.indptr[community + 1])
        while p < end and len(out) < k:
            chunk = int(self.sorted_chunks[p])
            p += 1
            if not tested[chunk]:
                tested[chunk] = True
                out.append(chunk)
        self.cursor[community] = p
        return out

    def has_untested(self, community: int, tested: np.ndarray) -> bool:
        p, end = int(self.cursor[community]), int(self.indptr[community + 1])
        while p < end and tested[self.sorted_chunks[p]]:
            p += 1
        self.cursor[community] = p
        return p < end


# ---- the ranking from an approximate index's candidates --------------------------------------------------
def query_similarity(snapshot: IndexSnapshot, vector: np.ndarray) -> QuerySimilarity:
    """The ``vectors.candidates`` nearest chunks to ``vector`` from the snapshot's index."""
    return nearest(snapshot.vector_index, vector)


def candidate_scores(
    snapshot: IndexSnapshot,
    similarity: QuerySimilarity,
    cfg: VectorIndexSettings,
    concept_indices: list[int] | None = None,
    concept_boost: float = 0.0,
    bm25: np.ndarray | None = None,
    rrf_k: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The chunks a subquery ranks and their scores (higher first): the nearest chunks, plus the
    chunks mentioning its concepts (bonus as in ``boost_concepts``), fused with the best BM25 chunks by
    reciprocal rank when ``bm25`` is given (as ``fuse`` does over every chunk)."""
    chunks = np.fromiter(similarity.known.keys(), np.int64, len(similarity.known))
    if concept_boost > 0 and concept_indices:
        hits = np.concatenate([row(snapshot.concept_chunks, i) for i in concept_indices])
        hit_chunks, counts = np.unique(hits, return_counts=True)
        # The most-mentioning chunks first; a very common concept brings in at most ``candidates``.
        keep = np.argsort(-counts, kind="stable")[: cfg.candidates]
        hit_chunks, counts = hit_chunks[keep], counts[keep]
        chunks = np.union1d(chunks, hit_chunks)
        sims = similarity.of(chunks)
        at = np.searchsorted(chunks, hit_chunks)
        sims[at] += concept_boost * counts.astype(np.float32) / len(concept_indices)
    else:
        sims = similarity.of(chunks)
    if bm25 is None:
        return chunks, sims
    lexical = np.flatnonzero(bm25 > 0)
    if len(lexical) > cfg.candidates:
        lexical = lexical[np.argpartition(-bm25[lexical], cfg.candidates - 1)[: cfg.candidates]]
    union = np.union1d(chunks, lexical)
    fused = np.zeros(len(union), dtype=np.float64)
    fused[np.searchsorted(union, chunks)] += reciprocal_rank(sims, rrf_k or 60)
    fused[np.searchsorted(union, lexical)] += reciprocal_rank(bm25[lexical], rrf_k or 60)
    return union, fused


class CandidateRanking(CommunityRanking):
    """``CommunityRanking``'s interface over the candidates alone (see the module's docstring)."""

    def __init__(
        self,
        snapshot: IndexSnapshot,
        chunks: np.ndarray,
        scores: np.ndarray,
        k: int,
        similarity: QuerySimilarity | None = None,
        rerank_max: int = 0,
    ) -> None:
        n = snapshot.n_chunks
        chunks = np.asarray(chunks, dtype=np.int64)
        self.snapshot, self.similarity, self.rerank_max = snapshot, similarity, rerank_max
        self.order = chunks[np.argsort(-np.asarray(scores), kind="stable")]
        m = len(self.order)
        csr = snapshot.community_chunks
        self.indptr = csr.indptr
        # Every candidate's communities (chunk -> communities, built once per snapshot).
        members = snapshot.chunk_community_index()
        starts, ends = members.indptr[self.order], members.indptr[self.order + 1]
        lengths = ends - starts
        cand_rank = np.repeat(np.arange(m, dtype=np.int64), lengths)
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        communities = members.indices[offsets].astype(np.int64)
        # Each community's candidates in rank order: one sort of (community, rank) keys.
        key = np.sort(communities * max(m, 1) + cand_rank)
        touched, first = np.unique(key // max(m, 1), return_index=True)
        ranks = key % max(m, 1)
        self._candidates = {
            int(c): self.order[ranks[a:b]]
            for c, a, b in zip(touched.tolist(), first.tolist(), [*first[1:].tolist(), len(key)], strict=True)
        }
        # Slots a community's other chunks fill read the floor rank m; slots past its size read n.
        size = np.diff(csr.indptr)
        self.top_ranks = np.where(np.arange(k) < size[:, None], m, n).astype(np.int64)
        for j in range(k):
            slot = first + j
            has = slot < np.asarray([*first[1:].tolist(), len(key)], dtype=np.int64)
            self.top_ranks[touched[has], j] = ranks[slot[has]]
        self._queue: dict[int, np.ndarray] = {}
        self._complete: set[int] = set()  # communities whose queue holds their other chunks too
        self.cursor: dict[int, int] = {}

    def _chunks_of(self, community: int, past: int) -> np.ndarray:
        """The community's chunks in the order the search takes them: its candidates, then (built
        only once the search gets ``past`` them) its other chunks."""
        queue = self._queue.get(community)
        if queue is None:
            queue = self._candidates.get(community, np.zeros(0, np.int64))
            self._queue[community] = queue
        if past >= len(queue) and community not in self._complete:
            self._complete.add(community)
            rest = np.setdiff1d(row(self.snapshot.community_chunks, community), queue)
            if self.similarity is not None and 0 < len(rest) <= self.rerank_max:
                rest = rest[np.argsort(-self.similarity.of(rest), kind="stable")]
            queue = np.concatenate([queue, rest]).astype(np.int64)
            self._queue[community] = queue
        return queue

    def take_untested(self, community: int, k: int, tested: np.ndarray) -> list[int]:
        out: list[int] = []
        p = self.cursor.get(community, 0)
        queue = self._chunks_of(community, p)
        while p < len(queue) and len(out) < k:
            chunk = int(queue[p])
            p += 1
            if not tested[chunk]:
                tested[chunk] = True
                out.append(chunk)
            if p == len(queue):
                queue = self._chunks_of(community, p)
        self.cursor[community] = p
        return out

    def has_untested(self, community: int, tested: np.ndarray) -> bool:
        p = self.cursor.get(community, 0)
        queue = self._chunks_of(community, p)
        while p < len(queue) and tested[queue[p]]:
            p += 1
            if p == len(queue):
                queue = self._chunks_of(community, p)
        self.cursor[community] = p
        return p < len(queue)


def rank_subquery(
    snapshot: IndexSnapshot,
    vector: np.ndarray,
    k: int,
    concept_indices: list[int] | None = None,
    concept_boost: float = 0.0,
    bm25: np.ndarray | None = None,
    rrf_k: float | None = None,
) -> tuple[CandidateRanking, QuerySimilarity]:
    """The subquery's community ranking from the index's candidates, and its per-chunk similarities
    (what the relevance rule reads as the similarity signal)."""
    similarity = query_similarity(snapshot, vector)
    cfg = snapshot.vector_index.cfg
    chunks, scores = candidate_scores(snapshot, similarity, cfg, concept_indices, concept_boost, bm25, rrf_k)
    ranking = CandidateRanking(snapshot, chunks, scores, k, similarity, cfg.rerank_community_max)
    return ranking, similarity
