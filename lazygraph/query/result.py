"""What a query returns: the answer with its sources, how the search went, and what it cost, as the
CLI prints it (``--json``) and the batch runner stores it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lazygraph.query.answer import Answer
from lazygraph.query.evidence import Claim
from lazygraph.query.reader import IndexReader
from lazygraph.query.search import Context, SearchOutcome


@dataclass
class QueryResult:
    question: str
    method: str
    preset: str
    budget: int
    context_tokens: int
    answer: str
    # The answer's sentences with the chunk ids each cites, and every cited chunk resolved to its
    # document title and the excerpt it was cited for.
    sentences: list[dict[str, Any]]
    sources: list[dict[str, Any]]
    expanded_query: str
    subqueries: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    context_chunk_ids: list[str]
    context_doc_ids: list[str]
    cost: dict[str, Any]
    trace: list[str] = field(default_factory=list)
    # "local" or "global" (what refine read the question as; a vector search answers every one as local)
    scope: str = "local"
    # the themes of a report answering a global question, in order
    themes: list[str] = field(default_factory=list)
    # the context exactly as the answer prompt quoted it (for audit; not in ``to_json``)
    context_text: str = ""
    # what the index was read from: "snapshot" (in memory) or "store" (the serving store)
    index_source: str = "snapshot"

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "method": self.method,
            "index_source": self.index_source,
            "preset": self.preset,
            "budget": self.budget,
            "context_tokens": self.context_tokens,
            "answer": self.answer,
            "scope": self.scope,
            "themes": self.themes,
            "sentences": self.sentences,
            "sources": self.sources,
            "subqueries": self.subqueries,
            "expanded_query": self.expanded_query,
            "claims": self.claims,
            "context_chunk_ids": self.context_chunk_ids,
            "context_doc_ids": self.context_doc_ids,
            "cost": self.cost,
        }


def shape_result(
    searched: SearchOutcome[Any],
    context: Context,
    answer: Answer,
    reader: IndexReader,
    index_source: str = "snapshot",
) -> QueryResult:
    """The query's record: chunks named by their ids, the cost record as it stands now, and the source
    ``reader`` reads (``QueryEngine.index_source``)."""
    records = reader.chunk_records(context.chunks)
    plan = searched.plan
    reading = searched.method.reading(searched.question, searched.retrieval)
    return QueryResult(
        question=searched.question,
        method=plan.method,
        preset=plan.preset,
        budget=plan.budget,
        context_tokens=plan.context_tokens,
        answer=answer.text,
        sentences=answer.to_json(),
        sources=[s.to_json() for s in answer.sources],
        expanded_query=reading.expanded_query,
        subqueries=reading.subqueries,
        claims=[claim_record(c, reader) for c in context.claims],
        context_chunk_ids=[record.chunk_id for record in records],
        context_doc_ids=list(dict.fromkeys(record.doc_id for record in records)),
        cost=searched.recorder.to_json(),
        trace=searched.recorder.trace,
        scope=reading.scope,
        themes=answer.themes,
        context_text=searched.rendered(context),
        index_source=index_source,
    )


def claim_record(claim: Claim, reader: IndexReader) -> dict[str, Any]:
    return {
        "text": claim.text,
        "source_chunk_ids": [record.chunk_id for record in reader.chunk_records(claim.chunks)],
        "score": round(claim.score, 4),
        "subquery": claim.subquery,
        "extracted": claim.extracted,
        "kind": claim.kind,
    }
