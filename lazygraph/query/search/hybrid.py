"""The hybrid baseline (``--method hybrid``): vector similarity and BM25 fused by reciprocal rank.

Dense vectors miss what only an exact term pins down (a rare name, a number, a code); BM25 misses
paraphrase. Reciprocal rank fusion (``lazygraph.query.ranking.fuse``) needs no score calibration
between the two. Like the vector baseline it calls no model before
the answer and tests no relevance: it reuses ``VectorSearch``'s context cut and answer, only the
scores differ. Without lexical statistics (an index built before chunk_terms) the BM25 ranking is
empty and the order is exactly the vector order.

Over the snapshot every chunk has both ranks (``fuse``). Over the serving store (``FusedChunks``) the
vector ranking is read ``serving.hybrid_vector_depth`` deep and the BM25 ranking from the postings of
the question's terms; a chunk below the vector depth counts as ranked just below it, so on an index no
larger than the depth the order is the snapshot's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import fuse, ranks
from lazygraph.query.reader import ChunkRef, RankedChunks
from lazygraph.query.search.base import Plan
from lazygraph.query.search.vector import NearestChunks, PassageRetrieval, VectorSearch
from lazygraph.serving import ChunkScores


class HybridSearch(VectorSearch):
    """The vector search with its scores replaced by the fused ranks (its cut and answer unchanged)."""

    selects = "top chunks by reciprocal-rank fusion of similarity and BM25"
    serves_from_store = True

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> PassageRetrieval:
        found = super().retrieve(question, plan, roles, recorder)
        lexical = self.engine.settings.lexical
        with recorder.stage("select"):
            bm25 = self.reader.lexical_scores(question, lexical)
            if found.nearest is None:
                dense = np.zeros(len(found.scores), dtype=np.float32)
                dense[list(bm25)] = list(bm25.values())
                # Ties (a chunk ranked i by one side and j by the other, and one ranked j and i) are
                # common under rank fusion; ordering them by chunk id lets the store order them alike.
                ties = self.reader.chunk_id_ranks()
                retrieval = PassageRetrieval(fuse(found.scores, dense, lexical.rrf_k), tie_keys=ties)
            else:
                depth = self.engine.settings.serving.hybrid_vector_depth
                retrieval = PassageRetrieval(
                    found.scores, FusedChunks(found.nearest, bm25, lexical.rrf_k, depth)
                )
        recorder.log(f"hybrid: vector ranks fused with the BM25 ranks of {len(bm25)} chunks")
        return retrieval


class FusedChunks:
    """Reciprocal rank fusion of the chunks nearest the question (``depth`` deep, or deeper when a cut
    asks for more) and the chunks BM25 scores, computed once per depth fetched.

    A chunk below the vector depth scores 1 / (k + depth + 1) from the vector side, the same for all,
    so among such chunks the fused order is their BM25 order: of the chunks BM25 alone brings, only the
    best ``depth`` can reach the head a cut reads, and only those are named (BM25 may score a large
    share of the corpus: ``ChunkScores`` keeps the rest in arrays)."""

    def __init__(self, nearest: NearestChunks, bm25: Mapping[ChunkRef, float], k: float, depth: int) -> None:
        self.nearest = nearest
        self.bm25 = ChunkScores.from_mapping(bm25)
        self.k = k
        self.depth = depth
        self._fused: RankedChunks | None = None
        self._fused_depth = 0

    def ranked(self, k: int) -> RankedChunks:
        depth = max(k, self.depth)
        if self._fused is None or depth > self._fused_depth:
            self._fused = self._fuse(self.nearest.ranked(depth), depth)
            self._fused_depth = depth
        return self._fused.head(k)

    def _fuse(self, vector: RankedChunks, depth: int) -> RankedChunks:
        # Equal scores share the best rank among them, as ``fuse`` ranks the snapshot's arrays.
        lexical_rank = ranks(self.bm25.scores)
        at = self.bm25.positions(vector.chunks)
        held = at >= 0
        near = 1.0 / (self.k + ranks(vector.scores))
        near[held] += 1.0 / (self.k + lexical_rank[at[held]])
        # The chunks only BM25 brings, in the mapping's order; the best ``depth`` of them (and any tied
        # with the last) are all that can reach the head a cut of at most ``depth`` reads.
        alone = np.ones(len(self.bm25), dtype=bool)
        alone[at[held]] = False
        others = np.flatnonzero(alone)
        if len(others) > depth > 0:
            last = np.partition(lexical_rank[others], depth - 1)[depth - 1]
            others = others[lexical_rank[others] <= last]
        below = len(vector) + 1
        far = 1.0 / (self.k + below) + 1.0 / (self.k + lexical_rank[others])
        chunks = [*vector.chunks, *self.bm25.ids_at(others)]
        scores = np.concatenate([near, far]).astype(np.float64)
        order = np.lexsort((np.asarray([str(c) for c in chunks], dtype=str), -scores))  # ties by id
        return RankedChunks([chunks[i] for i in order], scores[order])
