"""The lazy search (LazyGraphRAG): refine the question into subqueries, spend the relevance-test
budget over the community tree, turn the relevant chunks into claims, and rank the claims.

One query, in order: ``_prepare`` (refine, embed, match concepts) -> ``_match`` (budgeted relevance
tests per subquery) -> ``_map`` (claims from the relevant chunks) -> ``_rank``. The ranked claims are
cut to the context limit afterwards and answered in one reduce call (a global question: one call per
theme of the report, sent as one batch).

On the serving store, ``_prepare`` ends by reading the query's working set (``working_set``): a
snapshot of the chunks the query's rankings can reach, which every later step reads as it reads the
whole index in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.answer import Answer
from lazygraph.query.cost import CostRecorder
from lazygraph.query.evidence import (
    Claim,
    Evidence,
    fit_evidence,
    gather_evidence,
    group_by_theme,
    theme_of,
)
from lazygraph.query.focus import SentenceFocus
from lazygraph.query.ranking import CommunityRanking, boost_concepts, fuse, rank_subquery
from lazygraph.query.search.base import Context, Plan, Reading, Search
from lazygraph.query.search.lazy.claims import (
    extract_claims,
    group_chunks,
    merge_duplicates,
    primary_community,
    rank_claims,
)
from lazygraph.query.search.lazy.fill import (
    FillCandidates,
    fill_context,
    interleave_themes,
    rank_fill_candidates,
)
from lazygraph.query.search.lazy.match import MatchResult, search_subquery
from lazygraph.query.search.lazy.reduce import reduce_answer, render_context, render_evidence
from lazygraph.query.search.lazy.relevance import ChunkSignals, RelevanceRule
from lazygraph.query.search.lazy.subqueries import Refinement, Subquery, match_concepts, refine_question
from lazygraph.query.search.lazy.working_set import (
    WorkingSet,
    match_store_concepts,
    read_working_set,
    require_lazy_store,
)
from lazygraph.query.snapshot import IndexSnapshot


@dataclass
class Retrieval:
    """Lazy search up to the ranked claims; the context cut is applied per limit afterwards."""

    refinement: Refinement
    matches: list[MatchResult]
    ranked_claims: list[Claim]
    chunk_relevance: dict[int, float] = field(default_factory=dict)
    # the passages that may fill the context the claims leave free (lazygraph.query.search.lazy.fill)
    fill: FillCandidates = field(default_factory=FillCandidates)
    # chunk -> what the map step read of it (its focused sentences): the evidence beside its claims
    passages: dict[int, str] = field(default_factory=dict)

    @property
    def relevant_chunks(self) -> list[int]:
        return list(dict.fromkeys(c for m in self.matches for c in m.relevant))


# What the map step asks about: (target number, the text asked, its relevant chunks). A claim's
# ``subquery`` is the target number; the whole question is number len(subqueries).
MapTarget = tuple[int, str, list[int]]


class LazySearch(Search[Retrieval]):
    calls_models = True
    selects = (
        "claims from the chunks budgeted relevance tests found, with their sentences, then fill passages"
    )
    serves_from_store = True  # through a working set per query (lazygraph.query.search.lazy.working_set)

    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        self._working: WorkingSet | None = None  # the query's rows, on the serving store
        self._working_focus: SentenceFocus | None = None

    @classmethod
    def store_serves(cls, store: Any) -> bool:
        return bool(store.serves_lazy)

    @property
    def snapshot(self) -> IndexSnapshot:
        """The index in memory, or on the serving store the query's working set (once read)."""
        return self._working if self._working is not None else self.engine.snapshot

    @property
    def on_store(self) -> bool:
        return not self.engine.has_snapshot

    def focus(self) -> SentenceFocus:
        """The sentence focus: the engine's (shared by its queries), or one over the working set."""
        if self._working is None:
            return self.engine.focus()
        if self._working_focus is None:
            q = self.qs
            encode, count = self.engine.encode, self.engine.count_tokens
            self._working_focus = SentenceFocus(
                self._working, encode, count, q.focus_tokens, q.focus_lexical_weight
            )
        return self._working_focus

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> Retrieval:
        if roles is None:  # the engine loads the models of a search that calls them
            raise ValueError("the lazy search needs the LLM roles")
        if self.on_store:  # before any model call: a store too old for the lazy search is refused
            require_lazy_store(self.reader.store)
        refinement, question_vector, search_vectors = self._prepare(question, roles, recorder)
        matches = self._match(refinement.subqueries, search_vectors, plan.budget, roles, recorder)
        chunk_relevance = best_relevance(matches)
        passages = self._claim_passages(refinement.subqueries, search_vectors, matches)
        claims = self._map(question, refinement.subqueries, matches, passages, roles, recorder)
        # Claims rank against what they answer: their subquery's vector, or the question's (last row).
        targets = np.vstack([search_vectors, _normalise(question_vector[None, :])])
        ranked = self._rank(claims, targets, chunk_relevance, recorder)
        with recorder.stage("fill"):
            fill = rank_fill_candidates(
                self.snapshot,
                question,
                _normalise(question_vector[None, :])[0],
                assessed_relevance(matches),
                RelevanceRule(self.qs, lexical=self.snapshot.has_lexical),
                self.qs,
                self.engine.settings.lexical,
                refinement.scope,
                [
                    (sub.text, vector)
                    for sub, vector in zip(refinement.subqueries, search_vectors, strict=True)
                ],
            )
            if refinement.scope == "global":
                fill = interleave_themes(fill, lambda chunk: theme_of(self.snapshot, chunk))
        return Retrieval(refinement, matches, ranked, chunk_relevance, fill, passages)

    def empty(self, question: str) -> Retrieval:
        return Retrieval(Refinement([], question, llm_ok=True), [], [])

    def context(self, found: Retrieval, limit: int, recorder: CostRecorder) -> Context:
        """Each relevant chunk's sentences with the claims drawn from it, best claim first, then fill
        passages of documents not yet present, within ``limit`` tokens (lazygraph.query.evidence)."""
        focus = self._fill_passages(found.fill) if found.fill.question_vector is not None else None
        # A global answer needs many sources more than whole ones: each quotes as much as a fill passage.
        passages = {} if found.refinement.scope == "global" and focus is not None else found.passages
        items = gather_evidence(
            found.ranked_claims,
            passages,
            focus or (lambda chunks: [self.snapshot.passage(c) for c in chunks]),
        )
        kept = fit_evidence(items, limit, self.engine.count_tokens, render_evidence)
        claims = sum(len(item.claims) for item in kept)
        recorder.log(
            f"context: {len(kept)} of {len(items)} source chunks with {claims} claims within {limit} tokens"
        )
        if found.fill.chunks and focus is not None:
            with recorder.stage("fill"):
                before = len(kept)
                kept = fill_context(
                    kept,
                    found.fill,
                    limit,
                    self.engine.count_tokens,
                    focus,
                    lambda chunk: primary_community(self.snapshot, chunk),
                    lambda chunk: str(self.snapshot.chunk_doc_ids[chunk]),
                    render_evidence,
                )
            recorder.log(f"context: {len(kept) - before} passages of other documents fill the rest")
        if found.refinement.scope == "global":
            kept = group_by_theme(kept, self.snapshot)
        return Context(
            claims=[claim for item in kept for claim in _record_claims(item)],
            chunks=list(dict.fromkeys(item.chunk for item in kept)),
            evidence=kept,
        )

    def answer(
        self, question: str, found: Retrieval, context: Context, roles: LLMRoles, recorder: CostRecorder
    ) -> Answer:
        with recorder.stage("reduce"):
            return reduce_answer(
                question,
                context.evidence,
                self.snapshot,
                roles.synthesis,
                self.qs,
                expanded_query=found.refinement.expanded_query,
                subqueries=[s.text for s in found.refinement.subqueries],
                scope=found.refinement.scope,
            )

    def render_context(self, found: Retrieval, context: Context) -> str:
        return render_context(context.evidence, self.snapshot, themed=found.refinement.scope == "global")

    def reading(self, question: str, found: Retrieval) -> Reading:
        """The expanded query and subqueries refine wrote, and the scope it read the question in."""
        refinement = found.refinement
        ids = self.snapshot.chunk_ids
        return Reading(refinement.expanded_query, subquery_records(found, ids), refinement.scope)

    def _fill_passages(self, fill: FillCandidates) -> Callable[[list[int]], list[str]]:
        """Focused passages of chunks for the question, as long as the assessor reads
        (``relevance_focus_tokens``): a fill passage brings a document, not a whole chunk."""
        focus, vector, question = self.focus(), fill.question_vector, fill.question
        tokens = self.qs.assessor_focus_tokens
        return lambda chunks: focus.passages(chunks, vector, question, max_tokens=tokens)

    # ---- the steps of one search, in order ---------------------------------------------------------
    def _prepare(
        self, question: str, roles: LLMRoles, recorder: CostRecorder
    ) -> tuple[Refinement, np.ndarray, np.ndarray]:
        """The subqueries with their concepts, the question's vector and each subquery's search vector."""
        with recorder.stage("refine"):
            refinement = refine_question(question, roles.synthesis, self.qs)
        if not refinement.llm_ok:
            recorder.log("refine: the model gave no usable subqueries; searching with the question alone")
        subs = refinement.subqueries
        with recorder.stage("embed"):
            plain = self.engine.encode([question] + [s.text for s in subs])
        with recorder.stage("concepts"):
            if self.on_store:
                matched = self._match_store_concepts(subs, plain[1:])
            else:
                concept_vectors = self.engine.concept_vectors()
                for sub, vector in zip(subs, plain[1:], strict=True):
                    match_concepts(self.snapshot, sub, vector, concept_vectors, self.qs)
        with recorder.stage("embed"):
            refined = self.engine.encode([s.refined for s in subs])
        weight = self.qs.question_weight  # each subquery searches pulled towards the whole question
        search_vectors = _normalise((1 - weight) * refined + weight * plain[:1])
        if self.on_store:
            with recorder.stage("working set"):
                self._read_working_set(question, subs, plain[0], search_vectors, matched)
            recorder.log(
                f"working set: {self._working.n_chunks} chunks, {self._working.n_communities} "
                f"communities, {self._working.n_concepts} concepts read from the serving store"
            )
        for i, sub in enumerate(subs, start=1):
            recorder.log(
                f"subquery {i}: {sub.text!r} refined with concepts: {', '.join(sub.concepts) or '(none)'}"
            )
        return refinement, plain[0], search_vectors

    def _match_store_concepts(self, subs: list[Subquery], vectors: np.ndarray) -> list[list[str]]:
        """Each subquery's matched concepts from the store (ids; their names set on the subquery)."""
        store = self.reader.store
        k, floor = self.qs.concepts_per_subquery, self.qs.min_concept_similarity
        matched = [
            match_store_concepts(store, sub.text, vector, k, floor)
            for sub, vector in zip(subs, vectors, strict=True)
        ]
        names = store.concept_names([c for ids in matched for c in ids])
        for sub, ids in zip(subs, matched, strict=True):
            sub.concepts = [names[c] for c in ids if c in names]
        return matched

    def _read_working_set(
        self,
        question: str,
        subs: list[Subquery],
        question_vector: np.ndarray,
        search_vectors: np.ndarray,
        matched: list[list[str]],
    ) -> None:
        """Read the query's working set, and name each subquery's concepts by their place in it."""
        vectors = np.vstack([search_vectors, _normalise(question_vector[None, :])])
        texts = [s.text for s in subs] + [question]
        concepts = list(dict.fromkeys(c for ids in matched for c in ids))
        self._working = read_working_set(self.reader.store, self.engine.settings, vectors, texts, concepts)
        self._working_focus = None
        self.reader = self._working  # the query's records name chunks by their place in the set
        at = {concept: i for i, concept in enumerate(self._working.concept_ids.tolist())}
        for sub, ids in zip(subs, matched, strict=True):
            sub.concept_indices = [at[c] for c in ids if c in at]

    def _match(
        self,
        subs: list[Subquery],
        search_vectors: np.ndarray,
        budget: int,
        roles: LLMRoles,
        recorder: CostRecorder,
    ) -> list[MatchResult]:
        """Each subquery's relevance tests, in turn, within what is left of the budget."""
        matches: list[MatchResult] = []
        with recorder.stage("match"):
            spent = 0
            tested = np.zeros(self.snapshot.n_chunks, dtype=bool)  # a chunk is tested once per query
            for i, (sub, vector) in enumerate(zip(subs, search_vectors, strict=True)):
                # Even split of what is left (earlier subqueries get the remainder), so budget one
                # subquery did not need goes to the next ones.
                allowance = -(-(budget - spent) // (len(subs) - i))
                match = self._match_subquery(i, sub, vector, allowance, tested, roles, recorder)
                spent += match.tests
                matches.append(match)
        if spent > budget:  # the matcher guarantees this; a violation is a bug worth failing loudly on
            raise AssertionError(f"{spent} relevance tests exceed the budget of {budget}")
        return matches

    def _match_subquery(
        self,
        i: int,
        sub: Subquery,
        vector: np.ndarray,
        allowance: int,
        tested: np.ndarray,
        roles: LLMRoles,
        recorder: CostRecorder,
    ) -> MatchResult:
        """Subquery ``i``'s relevance tests, community by community, on its focused passages."""
        rule = RelevanceRule(self.qs, lexical=self.snapshot.has_lexical)
        ranking, signals = self._rank_chunks(sub, vector, rule)
        return search_subquery(
            self.snapshot,
            ranking,
            sub.text,
            allowance,
            roles.relevance,
            self.qs,
            recorder,
            f"subquery {i + 1}",
            tested,
            render=lambda chunks: self.focus().passages(
                chunks, vector, sub.text, max_tokens=self.qs.assessor_focus_tokens
            ),
            rule=rule,
            signals=signals,
        )

    def _rank_chunks(
        self, sub: Subquery, vector: np.ndarray, rule: RelevanceRule
    ) -> tuple[CommunityRanking, ChunkSignals | None]:
        """The subquery's best-first ranking, and the signals its relevance rule reads (one pass each
        over the similarities and BM25 scores)."""
        lexical = self.engine.settings.lexical
        if self.snapshot.vector_index is not None:
            return self._rank_candidates(sub, vector, rule)
        plain = self.snapshot.similarities(vector)
        scores = boost_concepts(self.snapshot, plain, sub.concept_indices, self.qs.concept_boost)
        hybrid = self.qs.ranking == "hybrid"
        bm25 = self.snapshot.bm25(sub.text, lexical) if hybrid or rule.needs_signals else None
        if hybrid and bm25 is not None:
            scores = fuse(scores, bm25, lexical.rrf_k)
        ranking = CommunityRanking(self.snapshot, scores, self.qs.community_rank_k)
        signals = ChunkSignals.from_scores(plain, bm25) if rule.needs_signals and bm25 is not None else None
        return ranking, signals

    def _rank_candidates(
        self, sub: Subquery, vector: np.ndarray, rule: RelevanceRule
    ) -> tuple[CommunityRanking, ChunkSignals | None]:
        """``_rank_chunks`` over an approximate index: only its nearest chunks (and those the concepts
        and BM25 bring in) are ranked; see lazygraph.query.ranking."""
        lexical = self.engine.settings.lexical
        hybrid = self.qs.ranking == "hybrid"
        bm25 = self.snapshot.bm25(sub.text, lexical) if hybrid or rule.needs_signals else None
        ranking, similarity = rank_subquery(
            self.snapshot,
            vector,
            self.qs.community_rank_k,
            sub.concept_indices,
            self.qs.concept_boost,
            bm25 if hybrid else None,
            lexical.rrf_k,
        )
        signals = (
            ChunkSignals.from_scores(similarity, bm25) if rule.needs_signals and bm25 is not None else None
        )
        return ranking, signals

    def _map(
        self,
        question: str,
        subs: list[Subquery],
        matches: list[MatchResult],
        read_passages: dict[int, str],
        roles: LLMRoles,
        recorder: CostRecorder,
    ) -> list[Claim]:
        """Claims from the relevant chunks (``read_passages``: what is quoted of each), grouped by
        community, duplicates merged."""
        claims: list[Claim] = []
        with recorder.stage("map"):
            for i, text, relevant in self._map_targets(question, subs, matches):
                if not relevant:
                    continue
                groups = group_chunks(self.snapshot, relevant, self.qs.max_chunks_per_map_group)
                topics = "; ".join(", ".join(g.topics[:3]) or "-" for g in groups)
                recorder.log(
                    f"map {'question' if i == len(subs) else f'subquery {i + 1}'}: {len(relevant)} "
                    f"relevant chunks in {len(groups)} groups ({topics})"
                )
                claims.extend(
                    extract_claims(self.snapshot, text, i, groups, roles.synthesis, self.qs, read_passages)
                )
        return merge_duplicates(claims)

    def _claim_passages(
        self, subs: list[Subquery], search_vectors: np.ndarray, matches: list[MatchResult]
    ) -> dict[int, str]:
        """What the map step quotes of each relevant chunk: its sentences bearing on the subquery that
        found it, up to ``query.focus_tokens`` (not the whole chunk). When the assessor read exactly
        that, its passages are reused; when it read fewer tokens, the longer focus is rendered here."""
        if self.qs.assessor_focus_tokens == self.qs.focus_tokens:
            return {c: p for m in matches for c, p in m.passages.items()}
        focus = self.focus()
        passages: dict[int, str] = {}
        for sub, vector, match in zip(subs, search_vectors, matches, strict=True):
            todo = [c for c in dict.fromkeys(match.relevant) if c not in passages]
            passages.update(zip(todo, focus.passages(todo, vector, sub.text), strict=True))
        return passages

    def _map_targets(
        self, question: str, subs: list[Subquery], matches: list[MatchResult]
    ) -> list[MapTarget]:
        if self.qs.map_scope == "query":
            # One set of groups over every relevant chunk, asked against the whole question: fewer
            # calls when subqueries each found a chunk or two.
            return [(len(subs), question, [c for m in matches for c in m.relevant])]
        return [(i, subs[i].text, match.relevant) for i, match in enumerate(matches)]

    def _rank(
        self,
        claims: list[Claim],
        target_vectors: np.ndarray,
        chunk_relevance: dict[int, float],
        recorder: CostRecorder,
    ) -> list[Claim]:
        with recorder.stage("embed"):
            claim_vectors = (
                self.engine.encode([c.text for c in claims]) if claims else np.zeros((0, 1), np.float32)
            )
        with recorder.stage("rank"):
            return rank_claims(claims, claim_vectors, target_vectors, chunk_relevance, self.qs)


def subquery_records(retrieval: Retrieval, ids: np.ndarray) -> list[dict[str, Any]]:
    """Per subquery: its text, matched concepts, budget share, tests spent and relevant chunks."""
    return [
        {
            "text": sub.text,
            "concepts": sub.concepts,
            "refined": sub.refined,
            "budget": match.budget,
            "relevance_tests": match.tests,
            "relevant_chunk_ids": [str(ids[c]) for c in match.relevant],
        }
        for sub, match in zip(retrieval.refinement.subqueries, retrieval.matches, strict=True)
    ]


def _record_claims(item: Evidence) -> list[Claim]:
    """How an item appears among the query's claims: its claims, or (a chunk without claims, or a fill
    passage) its passage as an extracted claim."""
    if item.claims:
        return item.claims
    return [
        Claim(item.passage, [item.chunk], 0, item.community, extracted=True, score=item.score, kind=item.kind)
    ]


def best_relevance(matches: list[MatchResult]) -> dict[int, float]:
    """Every tested chunk's highest P(relevant) over the subqueries that tested it."""
    relevance: dict[int, float] = {}
    for match in matches:
        for chunk, p in match.tested.items():
            relevance[chunk] = max(p, relevance.get(chunk, 0.0))
    return relevance


def assessed_relevance(matches: list[MatchResult]) -> dict[int, float]:
    """Every chunk the assessor judged, with its best combined score over the subqueries (chunks the
    cascade settled without a test are left out: their 1 or 0 is not an estimate)."""
    relevance: dict[int, float] = {}
    for match in matches:
        for chunk in match.assessed:
            relevance[chunk] = max(match.tested[chunk], relevance.get(chunk, 0.0))
    return relevance


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0).astype(np.float32)
