"""One query traced: what the notebook of a query's steps shows, read off the search as it ran."""

from __future__ import annotations

from collections import Counter

import numpy as np

from lazygraph.api.types import (
    Answer,
    ContextItem,
    JudgedChunk,
    QueryTrace,
    RankedClaim,
    SubquerySearch,
)
from lazygraph.query.engine import QueryEngine
from lazygraph.query.reader import IndexReader
from lazygraph.query.result import shape_result
from lazygraph.query.search import Context, Retrieval
from lazygraph.query.search.lazy.claims import fit_to_context
from lazygraph.query.snapshot import IndexSnapshot


def trace_query(
    engine: QueryEngine, question: str, method: str, budget: int | None, context_tokens: int | None
) -> QueryTrace:
    """Search, cut and answer as ``QueryEngine.answer`` does, keeping every step for the trace."""
    with engine.search(
        question, method, budget=budget, context_tokens=context_tokens, trace=True
    ) as searched:
        limit = engine.context_limit(searched.plan, searched.recorder)
        context = searched.context(limit)
        result = shape_result(
            searched, context, searched.answer(context), searched.method.reader, engine.index_source
        )
    answer = Answer.from_record(result.to_json(), result.trace, result.context_text)
    if not searched.method.calls_models:  # a search without relevance tests has no steps to show
        return QueryTrace(answer, limit, [], [], [], _context(searched.method.reader, None, context, {}))
    found: Retrieval = searched.retrieval
    # The lazy search's index: the snapshot, or on the serving store the query's working set.
    snapshot: IndexSnapshot = searched.method.snapshot
    ids = snapshot.chunk_ids
    rank_of = {id(claim): rank for rank, claim in enumerate(found.ranked_claims, start=1)}
    return QueryTrace(
        answer=answer,
        context_limit=limit,
        judged=_judged(snapshot, found),
        searches=[
            SubquerySearch(number, match.rounds, _levels(snapshot, match.communities_tested))
            for number, match in enumerate(found.matches, start=1)
        ],
        ranked_claims=_ranked(found, context, ids),
        context=_context(snapshot, snapshot, context, found.chunk_relevance),
        fit=lambda smaller: [
            rank_of[id(claim)] for claim in fit_to_context(found.ranked_claims, smaller, engine.count_tokens)
        ],
    )


def _levels(snapshot: IndexSnapshot, communities: list[int]) -> dict[int, int]:
    """How many of ``communities`` are at each level of the hierarchy."""
    levels = Counter(int(snapshot.community_level[c]) for c in communities)
    return dict(sorted(levels.items()))


def _judged(snapshot: IndexSnapshot, found: Retrieval) -> list[JudgedChunk]:
    return [
        JudgedChunk(
            subquery=number,
            chunk_id=str(snapshot.chunk_ids[chunk]),
            title=str(snapshot.chunk_titles[chunk]),
            score=score,
            passed=chunk in match.relevant,
            passage=match.passages.get(chunk, ""),
        )
        for number, match in enumerate(found.matches, start=1)
        for chunk, score in match.tested.items()
    ]


def _ranked(found: Retrieval, context: Context, ids: np.ndarray) -> list[RankedClaim]:
    kept = {id(claim) for claim in context.claims}
    return [
        RankedClaim(
            rank=rank,
            text=claim.text,
            score=claim.score,
            tokens=claim.tokens,
            extracted=claim.extracted,
            kept=id(claim) in kept,
            source_chunk_ids=[str(ids[c]) for c in claim.chunks],
        )
        for rank, claim in enumerate(found.ranked_claims, start=1)
    ]


def _context(
    reader: IndexReader, snapshot: IndexSnapshot | None, context: Context, judged: dict[int, float]
) -> list[ContextItem]:
    """The lazy context's items (a source chunk's sentences with its claims, or a fill passage); a
    passage search's chunks."""
    if not context.evidence or snapshot is None:  # a passage search: its chunks whole, from its reader
        records = reader.chunk_records(context.chunks)
        return [ContextItem("passage", r.passage, 0.0, 0, [r.chunk_id], False) for r in records]
    ids = snapshot.chunk_ids
    return [
        ContextItem(
            item.kind, item.text, item.score, item.tokens, [str(ids[item.chunk])], item.chunk in judged
        )
        for item in context.evidence
    ]
