"""The query engine: refine -> match (budgeted relevance tests) -> map (claims) -> reduce (answer).

One engine holds one index snapshot and the LLM clients (built on first use, per synthesis role) and
answers any number of queries; ``method="vector"`` runs the vector-RAG baseline through the same engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Protocol

import numpy as np
from rich.console import Console

from lazygraph.errors import ConfigError
from lazygraph.llm.factory import LLMRoles, make_roles
from lazygraph.query import map as mapping
from lazygraph.query.cost import CostRecorder
from lazygraph.query.focus import SentenceFocus
from lazygraph.query.match import CommunityRanking, MatchResult, chunk_similarities, search_subquery
from lazygraph.query.question import validate_question
from lazygraph.query.reduce import Answer, CitedSentence, nothing_found_answer, reduce_answer
from lazygraph.query.refine import Refinement, match_concepts, refine_question
from lazygraph.query.snapshot import IndexSnapshot, load_snapshot
from lazygraph.query.vector import select_chunks, vector_answer
from lazygraph.settings import Settings

# Tokens of the answer prompts' fixed text (instructions, question) kept free in the model's window.
PROMPT_OVERHEAD_TOKENS = 200


# What the engine may be given for its LLM clients: one fixed set of roles, or a builder of the roles
# for a preset's synthesis role (Ray query actors pass one whose clients forward to the LLM actor).
RolesSource = LLMRoles | Callable[[str], LLMRoles]


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import tiktoken

    return tiktoken.get_encoding(name)


@dataclass(frozen=True)
class Plan:
    method: str
    preset: str
    budget: int
    context_tokens: int
    synthesis_role: str


@dataclass
class Retrieval:
    """Lazy search up to the ranked claims; the context cut is applied per limit afterwards."""

    refinement: Refinement
    matches: list[MatchResult]
    ranked_claims: list[mapping.Claim]
    chunk_relevance: dict[int, float] = field(default_factory=dict)

    @property
    def relevant_chunks(self) -> list[int]:
        return list(dict.fromkeys(c for m in self.matches for c in m.relevant))


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

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "method": self.method,
            "preset": self.preset,
            "budget": self.budget,
            "context_tokens": self.context_tokens,
            "answer": self.answer,
            "sentences": self.sentences,
            "sources": self.sources,
            "subqueries": self.subqueries,
            "expanded_query": self.expanded_query,
            "claims": self.claims,
            "context_chunk_ids": self.context_chunk_ids,
            "context_doc_ids": self.context_doc_ids,
            "cost": self.cost,
        }


class QueryEngine:
    def __init__(
        self,
        settings: Settings,
        snapshot: IndexSnapshot,
        console: Console | None = None,
        *,
        roles: RolesSource | None = None,
        embedder: Encoder | None = None,
    ) -> None:
        self.settings = settings
        self.snapshot = snapshot
        self.console = console or Console(stderr=True)
        self._injected_roles = roles
        self._roles: dict[str, LLMRoles] = {}
        self._embedder = embedder
        self._focus: SentenceFocus | None = None

    @classmethod
    def open(
        cls,
        settings: Settings,
        index: str,
        console: Console | None = None,
        *,
        roles: RolesSource | None = None,
        embedder: Encoder | None = None,
    ) -> QueryEngine:
        """Load (or reuse) the index snapshot; models are loaded on the first query that needs them."""
        console = console or Console(stderr=True)
        with console.status(f"loading index {index}"):
            snapshot = load_snapshot(index)
        engine = cls(settings, snapshot, console, roles=roles, embedder=embedder)
        if snapshot.n_chunks:
            with console.status("loading the embedding model and concept vectors"):
                engine.encode([])  # loads the model now rather than inside the first query
                engine.count_tokens("")  # and the tokenizer's tables
                engine.concept_vectors()
        return engine

    # ---- resources --------------------------------------------------------------------------------
    def roles(self, synthesis_role: str) -> LLMRoles:
        """The clients for a preset's synthesis role: the roles passed in (fixed, or built per synthesis
        role by the callable passed in), else built from the settings, once per synthesis role."""
        if isinstance(self._injected_roles, LLMRoles):
            return self._injected_roles
        if synthesis_role not in self._roles:
            build = self._injected_roles or partial(make_roles, self.settings)
            with self.console.status("loading the language model"):
                self._roles[synthesis_role] = build(synthesis_role)
        return self._roles[synthesis_role]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from lazygraph.embed import get_embedder

            self._embedder = get_embedder(self.settings.embedding)
        return np.asarray(self._embedder.encode(list(texts)), dtype=np.float32)

    def concept_vectors(self) -> np.ndarray | None:
        """Embeddings of the concept names (computed once per index version, cached on disk)."""
        if self.snapshot.n_concepts == 0 or self.settings.query.concepts_per_subquery == 0:
            return None
        cache = self.settings.query.cache_dir or self.settings.home / "cache"
        return self.snapshot.concept_vectors(self.encode, cache)

    def focus(self) -> SentenceFocus:
        """The sentence focus of relevance tests and claim extraction (one per engine: it caches vectors)."""
        if self._focus is None:
            self._focus = SentenceFocus(
                self.snapshot, self.encode, self.count_tokens, self.settings.query.focus_tokens
            )
        return self._focus

    def count_tokens(self, text: str) -> int:
        return len(_encoding(self.settings.chunking.encoding).encode(text, disallowed_special=()))

    def answer_window(self, synthesis_role: str) -> int:
        """Context tokens the answer model can take: its window minus the prompt and the answer."""
        cfg = self.settings.llm.relevance if synthesis_role == "relevance" else self.settings.llm.synthesis
        usable = int(cfg.n_ctx * self.settings.query.answer_context_share)
        return max(100, usable - self.settings.query.answer_max_tokens - PROMPT_OVERHEAD_TOKENS)

    # ---- planning ---------------------------------------------------------------------------------
    def plan(
        self,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
    ) -> Plan:
        """Resolve preset, method, budget and context limit; a vector preset implies the vector method."""
        name = preset or self.settings.query.preset
        chosen = self.settings.preset(name)
        if method not in ("lazy", "vector"):
            raise ConfigError(f"unknown method {method!r}; use lazy or vector")
        if preset is not None and chosen.method == "vector":
            method = "vector"
        if method == "vector" and preset is None:
            name = "SS_8K" if "SS_8K" in self.settings.presets else name
            chosen = self.settings.preset(name)
        if budget is not None and budget < 0:
            raise ConfigError("the relevance-test budget must be 0 or more")
        return Plan(
            method=method,
            preset=name,
            budget=0 if method == "vector" else (chosen.budget if budget is None else budget),
            context_tokens=context_tokens or chosen.context_tokens,
            synthesis_role=chosen.synthesis_role,
        )

    # ---- answering --------------------------------------------------------------------------------
    def answer(
        self,
        question: str,
        method: str = "lazy",
        preset: str | None = None,
        budget: int | None = None,
        context_tokens: int | None = None,
        trace: bool = False,
    ) -> QueryResult:
        plan = self.plan(method, preset, budget, context_tokens)
        validate_question(question, self.settings, plan, self.count_tokens)  # before any model loads
        if self.snapshot.n_chunks == 0:  # nothing to search: no model is loaded or called
            recorder = CostRecorder(trace_enabled=trace)
            recorder.log("the index holds no chunks: nothing to search")
            answer = Answer([CitedSentence(nothing_found_answer(0, 0), [])])
            return self._result(question, plan, answer, None, [], [], recorder)
        roles = self.roles(plan.synthesis_role)  # loading a model is a per-process cost, not the query's
        recorder = CostRecorder(trace_enabled=trace)
        with recorder.track([roles.relevance, roles.synthesis]):
            if plan.method == "vector":
                return self._answer_vector(question, plan, roles, recorder)
            return self._answer_lazy(question, plan, roles, recorder)

    def _answer_lazy(self, question: str, plan: Plan, roles: LLMRoles, recorder: CostRecorder) -> QueryResult:
        retrieval = self.retrieve(question, plan.budget, roles, recorder)
        window = self.answer_window(plan.synthesis_role)
        limit = min(plan.context_tokens, window)
        if limit < plan.context_tokens:
            recorder.log(f"context limited to {limit} tokens by the answer model's window")
        kept = mapping.fit_to_context(retrieval.ranked_claims, limit, self.count_tokens)
        recorder.log(f"context: {len(kept)} of {len(retrieval.ranked_claims)} claims within {limit} tokens")
        if not kept:
            text = nothing_found_answer(recorder.relevance_tests, sum(recorder.communities_visited.values()))
            answer = Answer([CitedSentence(text, [])])
        else:
            with recorder.stage("reduce"):
                qs = self.settings.query
                answer = reduce_answer(
                    retrieval.refinement.expanded_query or question,
                    kept,
                    self.snapshot,
                    roles.synthesis,
                    max_tokens=qs.answer_max_tokens,
                    max_facts=qs.max_facts_per_sentence,
                    max_sentences=qs.answer_max_sentences,
                    max_sources=qs.max_sources_per_sentence,
                )
        chunks = list(dict.fromkeys(ch for c in kept for ch in c.chunks))
        return self._result(question, plan, answer, retrieval, kept, chunks, recorder)

    def _answer_vector(
        self, question: str, plan: Plan, roles: LLMRoles, recorder: CostRecorder
    ) -> QueryResult:
        with recorder.stage("embed"):
            vector = self.encode([question])[0]
        limit = min(plan.context_tokens, self.answer_window(plan.synthesis_role))
        if limit < plan.context_tokens:
            recorder.log(f"context limited to {limit} tokens by the answer model's window")
        with recorder.stage("select"):
            chunks = select_chunks(self.snapshot, vector, limit, self.count_tokens)
        recorder.log(f"vector: {len(chunks)} chunks within {limit} tokens")
        if not chunks:
            answer = Answer([CitedSentence(nothing_found_answer(0, 0), [])])
        else:
            with recorder.stage("answer"):
                answer = vector_answer(question, self.snapshot, chunks, roles.synthesis, self.settings.query)
        return self._result(question, plan, answer, None, [], chunks, recorder)

    def _result(
        self,
        question: str,
        plan: Plan,
        answer: Answer,
        retrieval: Retrieval | None,
        kept: list[mapping.Claim],
        chunks: list[int],
        recorder: CostRecorder,
    ) -> QueryResult:
        ids = self.snapshot.chunk_ids
        subqueries = []
        if retrieval is not None:
            for sub, match in zip(retrieval.refinement.subqueries, retrieval.matches, strict=True):
                subqueries.append(
                    {
                        "text": sub.text,
                        "concepts": sub.concepts,
                        "refined": sub.refined,
                        "budget": match.budget,
                        "relevance_tests": match.tests,
                        "relevant_chunk_ids": [str(ids[c]) for c in match.relevant],
                    }
                )
        claims = [
            {
                "text": c.text,
                "source_chunk_ids": [str(ids[ch]) for ch in c.chunks],
                "score": round(c.score, 4),
                "subquery": c.subquery,
                "extracted": c.extracted,
            }
            for c in kept
        ]
        return QueryResult(
            question=question,
            method=plan.method,
            preset=plan.preset,
            budget=plan.budget,
            context_tokens=plan.context_tokens,
            answer=answer.text,
            sentences=answer.to_json(),
            sources=[s.to_json() for s in answer.sources],
            expanded_query=retrieval.refinement.expanded_query if retrieval else question,
            subqueries=subqueries,
            claims=claims,
            context_chunk_ids=[str(ids[c]) for c in chunks],
            context_doc_ids=list(dict.fromkeys(str(self.snapshot.chunk_doc_ids[c]) for c in chunks)),
            cost=recorder.to_json(),
            trace=recorder.trace,
        )

    # ---- the lazy search up to the ranked claims (shared by answers and the evaluation) ---------------
    def retrieve(self, question: str, budget: int, roles: LLMRoles, recorder: CostRecorder) -> Retrieval:
        qs = self.settings.query
        with recorder.stage("refine"):
            refinement = refine_question(question, roles.synthesis, qs)
        if not refinement.llm_ok:
            recorder.log("refine: the model gave no usable subqueries; searching with the question alone")
        subs = refinement.subqueries
        with recorder.stage("embed"):
            plain = self.encode([question] + [s.text for s in subs])
        with recorder.stage("concepts"):
            concept_vectors = self.concept_vectors()
            for sub, vec in zip(subs, plain[1:], strict=True):
                match_concepts(self.snapshot, sub, vec, concept_vectors, qs)
        with recorder.stage("embed"):
            refined = self.encode([s.refined for s in subs])
        search_vectors = _normalise((1 - qs.question_weight) * refined + qs.question_weight * plain[:1])
        for i, sub in enumerate(subs, start=1):
            recorder.log(
                f"subquery {i}: {sub.text!r} refined with concepts: {', '.join(sub.concepts) or '(none)'}"
            )

        matches: list[MatchResult] = []
        with recorder.stage("match"):
            spent = 0
            tested = np.zeros(self.snapshot.n_chunks, dtype=bool)  # shared: a chunk is tested once per query
            for i, (sub, vector) in enumerate(zip(subs, search_vectors, strict=True)):
                # Even split of what is left (earlier subqueries get the remainder), so budget one subquery
                # did not need goes to the next ones.
                allowance = -(-(budget - spent) // (len(subs) - i))
                sims = chunk_similarities(self.snapshot, vector, sub.concept_indices, qs.concept_boost)
                ranking = CommunityRanking(self.snapshot, sims, qs.community_rank_k)
                match = search_subquery(
                    self.snapshot,
                    ranking,
                    sub.text,
                    allowance,
                    roles.relevance,
                    qs,
                    recorder,
                    f"subquery {i + 1}",
                    tested,
                    render=lambda chunks, v=vector: self.focus().passages(chunks, v),
                )
                spent += match.tests
                matches.append(match)
        if spent > budget:  # the matcher guarantees this; a violation is a bug worth failing loudly on
            raise AssertionError(f"{spent} relevance tests exceed the budget of {budget}")

        chunk_relevance: dict[int, float] = {}
        for match in matches:
            for chunk, p in match.tested.items():
                chunk_relevance[chunk] = max(p, chunk_relevance.get(chunk, 0.0))
        # The map step quotes the sentences the assessor read, not the whole chunk.
        read_passages = {c: p for m in matches for c, p in m.passages.items()}
        claims: list[mapping.Claim] = []
        with recorder.stage("map"):
            if qs.map_scope == "query":
                # One set of groups over every relevant chunk, asked against the whole question: fewer
                # calls when subqueries each found a chunk or two. Claims rank against the question.
                relevant = [c for m in matches for c in m.relevant]
                search_vectors = np.vstack([search_vectors, _normalise(plain[:1])])
                targets = [(len(subs), question, relevant)]
            else:
                targets = [(i, subs[i].text, match.relevant) for i, match in enumerate(matches)]
            for i, text, relevant in targets:
                if not relevant:
                    continue
                groups = mapping.group_chunks(self.snapshot, relevant, qs.max_chunks_per_map_group)
                topics = "; ".join(", ".join(g.topics[:3]) or "-" for g in groups)
                recorder.log(
                    f"map {'question' if i == len(subs) else f'subquery {i + 1}'}: {len(relevant)} relevant "
                    f"chunks in {len(groups)} groups ({topics})"
                )
                claims.extend(
                    mapping.extract_claims(self.snapshot, text, i, groups, roles.synthesis, qs, read_passages)
                )
        claims = mapping.merge_duplicates(claims)
        with recorder.stage("embed"):
            claim_vectors = self.encode([c.text for c in claims]) if claims else np.zeros((0, 1), np.float32)
        with recorder.stage("rank"):
            ranked = mapping.rank_claims(claims, claim_vectors, search_vectors, chunk_relevance, qs)
        return Retrieval(refinement, matches, ranked, chunk_relevance)

    def vector_context(self, question: str, limit: int, vector: np.ndarray | None = None) -> list[int]:
        """The chunks the vector baseline puts in ``limit`` context tokens (no LLM call)."""
        if vector is None:
            vector = self.encode([question])[0]
        return select_chunks(self.snapshot, vector, limit, self.count_tokens)


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0).astype(np.float32)
