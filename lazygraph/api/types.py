"""What the API returns: an answer with its sentences, sources and cost, a chunk shown in full, and
one query traced step by step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cost:
    """What one query cost: relevance tests, LLM calls and tokens, seconds (``record``: the whole cost
    record, with the cost per stage and per LLM role and the prompt versions in force)."""

    relevance_tests: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_cached_tokens: int
    llm_cache_hits: int
    seconds: float
    record: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def llm_tokens(self) -> int:
        """The method's LLM tokens: fresh calls' prompt and completion tokens, plus the tokens of the
        calls the LLM cache answered (what they cost when they were made)."""
        from lazygraph.query.cost import llm_tokens

        return llm_tokens(self.__dict__)

    @property
    def stages(self) -> dict[str, float]:
        """Seconds per stage of the query (refine, match, map, answer, ...)."""
        return dict(self.record.get("stages", {}))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Cost:
        return cls(
            relevance_tests=int(record["relevance_tests"]),
            llm_calls=int(record["llm_calls"]),
            prompt_tokens=int(record["prompt_tokens"]),
            completion_tokens=int(record["completion_tokens"]),
            llm_cached_tokens=int(record.get("llm_cached_tokens", 0)),
            llm_cache_hits=int(record.get("llm_cache_hits", 0)),
            seconds=float(record["seconds"]),
            record=record,
        )


@dataclass(frozen=True)
class Sentence:
    """One sentence of an answer and the chunks it cites (``theme``: its theme in a global report)."""

    text: str
    source_chunk_ids: list[str]
    theme: str = ""


@dataclass(frozen=True)
class Source:
    """A cited chunk: its document, title and the excerpt it was cited for."""

    chunk_id: str
    doc_id: str
    title: str
    excerpt: str


@dataclass(frozen=True)
class Answer:
    """The answer to one question, with how it was found and what it cost.

    ``text`` carries the citations inline (``[Data: Sources (chunk ids)]``); ``to_json()`` is the record
    `lazygraph query --json` prints and the batch runner stores.
    """

    question: str
    method: str
    preset: str
    budget: int
    context_tokens: int
    text: str
    sentences: list[Sentence]
    sources: list[Source]
    cost: Cost
    scope: str = "local"
    themes: list[str] = field(default_factory=list)
    expanded_query: str = ""
    subqueries: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    context_chunk_ids: list[str] = field(default_factory=list)
    context_doc_ids: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    context_text: str = ""
    record: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return dict(self.record)

    @classmethod
    def from_record(cls, record: dict[str, Any], trace: list[str], context_text: str) -> Answer:
        """From a query's JSON record (``QueryResult.to_json``), its trace and its rendered context."""
        return cls(
            question=record["question"],
            method=record["method"],
            preset=record["preset"],
            budget=record["budget"],
            context_tokens=record["context_tokens"],
            text=record["answer"],
            sentences=[
                Sentence(s["text"], list(s["source_chunk_ids"]), s.get("theme", ""))
                for s in record["sentences"]
            ],
            sources=[Source(**s) for s in record["sources"]],
            cost=Cost.from_record(record["cost"]),
            scope=record["scope"],
            themes=list(record["themes"]),
            expanded_query=record["expanded_query"],
            subqueries=list(record["subqueries"]),
            claims=list(record["claims"]),
            context_chunk_ids=list(record["context_chunk_ids"]),
            context_doc_ids=list(record["context_doc_ids"]),
            trace=trace,
            context_text=context_text,
            record=record,
        )


@dataclass(frozen=True)
class Chunk:
    """A chunk as `lazygraph show` prints it: its text, its document and its place in it."""

    chunk_id: str
    doc_id: str
    title: str
    ord: int
    chunks_in_document: int
    source: str | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---- one query traced ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgedChunk:
    """A chunk the relevance assessor judged for a subquery (numbered from 1)."""

    subquery: int
    chunk_id: str
    title: str
    score: float
    passed: bool
    passage: str


@dataclass(frozen=True)
class SubquerySearch:
    """How the search of one subquery went: its rounds and the communities it tested per level."""

    subquery: int
    rounds: int
    communities_by_level: dict[int, int]


@dataclass(frozen=True)
class RankedClaim:
    """A claim in the search's ranking (from 1), and whether it is in the answer's context."""

    rank: int
    text: str
    score: float
    tokens: int
    extracted: bool
    kept: bool
    source_chunk_ids: list[str]


@dataclass(frozen=True)
class ContextItem:
    """What the answer read, in order: a claim from the map step, or a passage filling the context."""

    kind: str
    text: str
    score: float
    tokens: int
    source_chunk_ids: list[str]
    judged: bool


@dataclass(frozen=True)
class QueryTrace:
    """One query, step by step: the answer, every chunk judged, each subquery's search, the claims
    ranked and kept, and the context the answer read (within ``context_limit`` tokens)."""

    answer: Answer
    context_limit: int
    judged: list[JudgedChunk]
    searches: list[SubquerySearch]
    ranked_claims: list[RankedClaim]
    context: list[ContextItem]
    fit: Callable[[int], list[int]] = field(repr=False, compare=False, default=lambda limit: [])

    def claims_within(self, limit: int) -> list[int]:
        """The ranks of the ranked claims that fit in ``limit`` tokens (a claim that does not fit is
        skipped, and a shorter one further down may still fit)."""
        return self.fit(limit)
