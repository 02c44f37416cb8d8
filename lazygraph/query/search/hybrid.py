"""The hybrid baseline (``--method hybrid``): vector similarity and BM25 fused by reciprocal rank.

Dense vectors miss what only an exact term pins down (a rare name, a number, a code); BM25 misses
paraphrase. Reciprocal rank fusion (``lazygraph.query.ranking.fuse``) needs no score calibration
between the two. Like the vector baseline it calls no model before
the answer and tests no relevance: it reuses ``VectorSearch``'s context cut and answer, only the
scores differ. Without lexical statistics (an index built before chunk_terms) the BM25 ranking is
empty and the order is exactly the vector order.
"""

from __future__ import annotations

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import fuse
from lazygraph.query.search.base import Plan
from lazygraph.query.search.vector import PassageRetrieval, VectorSearch


class HybridSearch(VectorSearch):
    """The vector search with its scores replaced by the fused ranks (its cut and answer unchanged)."""

    selects = "top chunks by reciprocal-rank fusion of similarity and BM25"
    serves_from_store = False  # its BM25 reads the snapshot's lexical statistics

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> PassageRetrieval:
        similarities = super().retrieve(question, plan, roles, recorder).scores
        lexical = self.engine.settings.lexical
        with recorder.stage("select"):
            bm25 = self.snapshot.bm25(question, lexical)
            fused = fuse(similarities, bm25, lexical.rrf_k)
        recorder.log(f"hybrid: vector ranks fused with the BM25 ranks of {int((bm25 > 0).sum())} chunks")
        return PassageRetrieval(fused)
