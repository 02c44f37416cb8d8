"""Best-first ranking of chunks and communities from the approximate index's candidates.

The exact ranking (``lazygraph.query.match.CommunityRanking``) sorts every chunk by similarity and
every community's chunks by rank: O(n log n) per subquery, seconds at ten million chunks. Here only
the ``candidates`` nearest chunks (plus those the subquery's concepts or BM25 bring in) are ranked;
every other chunk ties at a floor rank below them. A community is ranked by its best candidates' ranks
(slots its other chunks fill read the floor rank), so communities holding near chunks come first, as
in the exact ranking. Within a community the search takes its candidates in rank order, then its
other chunks: ordered by the similarity decoded from their codes when the community is small (a
leaf), in stored order otherwise (a root of millions; the budget never reaches that far down it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lazygraph.query.match import CommunityRanking
from lazygraph.query.snapshot.sparse import row
from lazygraph.settings import VectorIndexSettings

if TYPE_CHECKING:
    from lazygraph.query.snapshot import IndexSnapshot
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
    reciprocal rank when ``bm25`` is given (as ``hybrid.fuse`` does over every chunk)."""
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
    from lazygraph.query.search.hybrid import reciprocal_rank

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
