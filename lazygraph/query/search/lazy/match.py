"""Budgeted matching of one subquery against the index.

Best-first: chunks are ranked by similarity to the subquery (plus a small bonus for mentioning the
subquery's matched concepts); every community is ranked by the ranks of its best k chunks,
compared lexicographically (best chunk first, then the second best, ...).

Breadth-first: in rank order, the top-k untested chunks of each community are tested by the relevance
assessor. The tests of up to ``z - misses`` communities go to the LLM layer as one batch, so the
z-rule below is applied exactly as if the communities were tested one by one.

Cascade: with ``query.relevance.cascade``, chunks the cheap signals already settle are taken or
skipped without a test. Budget the search leaves unspent goes, at the end, to the skipped chunks, most
promising first (a second look), so the cascade saves tests without losing what a full budget finds.

Iterative deepening: once z successive communities yield no relevant chunk (or the ranked list is
exhausted), the search descends into the sub-communities of the communities that did yield one; a
relevant community with no sub-communities is searched again (its next top-k untested chunks). The
search stops when no relevant community remains or the subquery's budget is spent — and the number of
relevance tests never exceeds that budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from lazygraph.llm.base import LLMClient
from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import CommunityRanking
from lazygraph.query.search.lazy.relevance import ChunkSignals, RelevanceRule
from lazygraph.query.snapshot import IndexSnapshot, row
from lazygraph.settings import LazySearchSettings


@dataclass
class MatchResult:
    budget: int
    tests: int = 0
    # chunk index -> P(relevant), for every tested chunk, in test order
    tested: dict[int, float] = field(default_factory=dict)
    # chunk index -> the passage the assessor read (the chunk's focused sentences), for every tested chunk
    passages: dict[int, str] = field(default_factory=dict)
    relevant: list[int] = field(default_factory=list)
    # the chunks whose score in ``tested`` is the assessor's (not the cascade's settled 1 or 0)
    assessed: set[int] = field(default_factory=set)
    communities_tested: list[int] = field(default_factory=list)
    rounds: int = 0


def search_subquery(
    snapshot: IndexSnapshot,
    ranking: CommunityRanking,
    question: str,
    budget: int,
    client: LLMClient | None,
    qs: LazySearchSettings,
    recorder: CostRecorder,
    label: str = "",
    tested: np.ndarray | None = None,
    render: Callable[[list[int]], list[str]] | None = None,
    rule: RelevanceRule | None = None,
    signals: ChunkSignals | None = None,
) -> MatchResult:
    """Spend at most ``budget`` relevance tests finding chunks relevant to ``question``.

    ``tested`` marks chunks already tested for an earlier subquery of the same query: they are skipped,
    so that every test of a query looks at a new chunk (small-model subqueries often overlap).
    ``render`` turns chunks into the passages the assessor reads (default: the whole chunk); the engine
    passes the sentence focus of ``lazygraph.query.focus``. ``rule`` decides relevance from P(yes) and
    the chunk's ``signals`` (default: P(yes) against its threshold); with its cascade, some
    chunks are taken or skipped without a test, and only tested chunks count against the budget.
    """
    rule = rule or RelevanceRule(qs, lexical=signals is not None)
    result = MatchResult(budget=budget)
    if budget <= 0 or snapshot.n_chunks == 0 or client is None:
        recorder.log(f"{label}: no search (budget {budget}, {snapshot.n_chunks} chunks)")
        return result
    k, z = qs.top_k_chunks_per_community, qs.z_successive_misses
    if tested is None:
        tested = np.zeros(snapshot.n_chunks, dtype=bool)
    if render is None:
        render = partial(_whole_passages, snapshot)
    skipped: list[int] = []  # chunks the cascade rejected without a test
    frontier = ranking.rank(snapshot.roots())
    while len(frontier) and result.tests < budget:
        result.rounds += 1
        _log_ranked(snapshot, ranking, frontier, recorder, f"{label} round {result.rounds}")
        relevant_here: list[int] = []
        misses, i = 0, 0
        while i < len(frontier) and result.tests < budget and misses < z:
            batch, i = _next_batch(ranking, frontier, i, z - misses, budget - result.tests, k, qs, tested)
            if not batch:
                break
            flat_chunks = [chunk for _, chunks in batch for chunk in chunks]
            passages = render(flat_chunks)
            result.passages.update(zip(flat_chunks, passages, strict=True))
            scored = _judge(flat_chunks, passages, question, client, rule, signals)
            skipped.extend(scored.rejected)
            result.assessed.update(scored.tested)
            result.tests += scored.tests
            recorder.relevance_tests += scored.tests
            for community, chunks in batch:
                scores = [scored.scores[c] for c in chunks]
                hits = [c for c in chunks if scored.relevant[c]]
                result.tested.update(zip(chunks, scores, strict=True))
                result.relevant.extend(hits)
                result.communities_tested.append(community)
                recorder.visited(int(snapshot.community_level[community]))
                if hits:
                    misses = 0
                elif any(c in scored.tested for c in chunks):
                    # A community the cascade skipped whole cost no test: the z-rule counts only the
                    # misses that spent budget, so the saved tests go further down the ranking.
                    misses += 1
                if hits:
                    relevant_here.append(community)
                recorder.log(
                    f"{label}   test {snapshot.describe_community(community)}: {len(chunks)} chunks, "
                    f"{len(hits)} relevant (p={', '.join(f'{p:.2f}' for p in scores)})"
                )
        if misses >= z:
            recorder.log(f"{label}   {z} successive communities without a relevant chunk")
        frontier = _deeper(snapshot, ranking, relevant_here, tested)
        if len(frontier):
            recorder.log(
                f"{label}   deepen: {len(frontier)} communities next (sub-communities of the "
                f"{len(relevant_here)} relevant ones, or relevant leaves with untested chunks)"
            )
        elif result.tests < budget:
            recorder.log(f"{label}   stop: no relevant community left ({result.tests}/{budget} tests used)")
    if skipped and signals is not None and result.tests < budget:
        _second_look(skipped, question, client, rule, signals, render, result, qs, recorder, label)
    if result.tests >= budget:
        recorder.log(f"{label}   stop: budget spent ({result.tests}/{budget} tests)")
    return result


def _whole_passages(snapshot: IndexSnapshot, chunks: list[int]) -> list[str]:
    return [snapshot.passage(chunk) for chunk in chunks]


def _second_look(
    skipped: list[int],
    question: str,
    client: LLMClient,
    rule: RelevanceRule,
    signals: ChunkSignals,
    render: Callable[[list[int]], list[str]],
    result: MatchResult,
    qs: LazySearchSettings,
    recorder: CostRecorder,
    label: str,
) -> None:
    """Test the chunks the cascade skipped, best prior first, with the budget the search left."""
    chosen = sorted(skipped, key=lambda c: -rule.prior(c, signals))[: result.budget - result.tests]
    found = 0
    for start in range(0, len(chosen), qs.relevance_batch_size):
        chunks = chosen[start : start + qs.relevance_batch_size]
        passages = render(chunks)
        result.passages.update(zip(chunks, passages, strict=True))
        for chunk, p_yes in zip(chunks, client.relevance(question, passages), strict=True):
            score = rule.score(float(p_yes), chunk, signals)
            result.tested[chunk] = score
            result.assessed.add(chunk)
            if rule.is_relevant(score):
                result.relevant.append(chunk)
                found += 1
        result.tests += len(chunks)
        recorder.relevance_tests += len(chunks)
    recorder.log(
        f"{label}   second look: {len(chosen)} of {len(skipped)} skipped chunks tested, {found} relevant"
    )


@dataclass
class _Judged:
    scores: dict[int, float]
    relevant: dict[int, bool]
    tested: set[int]  # the chunks the assessor was asked about
    rejected: list[int]  # the chunks the cascade skipped without a test

    @property
    def tests(self) -> int:
        return len(self.tested)


def _judge(
    chunks: list[int],
    passages: list[str],
    question: str,
    client: LLMClient,
    rule: RelevanceRule,
    signals: ChunkSignals | None,
) -> _Judged:
    """Score and decide every chunk of a batch; only chunks the cascade cannot settle are tested."""
    settled = {c: rule.prejudge(c, signals) for c in chunks}
    to_test = [(c, p) for c, p in zip(chunks, passages, strict=True) if settled[c] is None]
    p_yes = client.relevance(question, [p for _, p in to_test]) if to_test else []
    judged = _Judged({}, {}, {c for c, _ in to_test}, [c for c, v in settled.items() if v is False])
    for (chunk, _), p in zip(to_test, p_yes, strict=True):
        judged.scores[chunk] = rule.score(float(p), chunk, signals)
        judged.relevant[chunk] = rule.is_relevant(judged.scores[chunk])
    for chunk, verdict in settled.items():
        if verdict is not None:
            judged.scores[chunk], judged.relevant[chunk] = float(verdict), verdict
    return judged


def _next_batch(
    ranking: CommunityRanking,
    frontier: np.ndarray,
    i: int,
    max_communities: int,
    budget_left: int,
    k: int,
    qs: LazySearchSettings,
    tested: np.ndarray,
) -> tuple[list[tuple[int, list[int]]], int]:
    """The next communities' untested chunks, as one batch that never exceeds the budget left."""
    batch: list[tuple[int, list[int]]] = []
    planned = 0
    while i < len(frontier) and len(batch) < max_communities:
        room = min(k, budget_left - planned)
        if room <= 0 or (batch and planned + room > qs.relevance_batch_size):
            break
        chunks = ranking.take_untested(int(frontier[i]), room, tested)
        i += 1
        if chunks:  # a community whose chunks were all tested already is not a visit
            batch.append((int(frontier[i - 1]), chunks))
            planned += len(chunks)
    return batch, i


def _deeper(
    snapshot: IndexSnapshot, ranking: CommunityRanking, relevant: list[int], tested: np.ndarray
) -> np.ndarray:
    """Sub-communities of the relevant communities; a relevant leaf with untested chunks stays."""
    children = snapshot.community_children
    nxt: list[int] = []
    for c in relevant:
        kids = row(children, c)
        if len(kids):
            nxt.extend(int(x) for x in kids)
        elif ranking.has_untested(c, tested):
            nxt.append(c)
    if not nxt:
        return np.zeros(0, dtype=np.int64)
    return ranking.rank(np.unique(np.asarray(nxt, dtype=np.int64)))


def _log_ranked(
    snapshot: IndexSnapshot,
    ranking: CommunityRanking,
    frontier: np.ndarray,
    recorder: CostRecorder,
    label: str,
) -> None:
    if not recorder.trace_enabled:
        return
    shown = ", ".join(
        f"{snapshot.describe_community(int(c))} "
        f"(best ranks {','.join(map(str, ranking.top_ranks[c].tolist()))})"
        for c in frontier[:5]
    )
    more = f" and {len(frontier) - 5} more" if len(frontier) > 5 else ""
    recorder.log(f"{label}: ranked {len(frontier)} communities: {shown}{more}")
