"""Context fill: the context tokens the claims leave free go to the passages most likely relevant.

A lazy search turns the chunks it judged relevant into claims, which are short: at a small budget
they often fill a fraction of the context limit, while a vector baseline given the same limit fills
all of it. And the relevance decision is only as good as its assessor: a 1.5B model turns down gold
passages that the cheap signals rank high. So after the ranked claims, the rest of the context holds
focused passages (the sentences of a chunk that bear on the question, as the map step quotes them),
best first by the no-LLM prior of the relevance rule: a calibrated P(relevant) from the chunk's
similarity and BM25 to the question.

The assessor's verdicts act through the claims, not through this order. Ranking the judged chunks by
their combined score instead (``query.context_fill_order: assessed``) puts every chunk the assessor
turned down behind all the unjudged ones. On the hotpotqa100 calibration questions (70-99, budget
20, the assessor at 32 focus tokens) that lost gold documents the prior would have kept: 0.917
against 0.933 at 1k tokens, 0.950 against 0.983 at 2k. The assessor judged a chunk against one
subquery (and, with ``query.relevance_focus_tokens``, from fewer tokens than the passage quotes);
the prior scores it against the whole question the context serves.

Each subquery is a target of the fill too (``query.context_fill_targets: subqueries``, the default):
a candidate's prior is its best over the question and the subqueries, and each subquery's best chunks
join the pool. A multi-hop question's first hop ("which state has the birthplace of X as its
capital?") is worded in its subquery, not in the question, whose words mostly describe the last hop;
at budget 0, with no test to find it, the question's prior alone ranks the bridge document low. On
the calibration questions this raised gold-document recall at budget 0 on musique50-dev and the
answers on both data sets, for no LLM call (BENCHMARKS.md, "The fill at budget 0").

Passages whose prior is under ``query.context_fill_min`` are never added: past that point a
passage is more likely a distractor than evidence, and a small answer model reads every distractor
(the cut is calibrated on held-out questions, see the setting). A chunk of a document already in
the context is skipped: the claims' items show their own source sentences, and the fill is there to
bring documents the claims did not. The candidates are the best chunks by the hybrid ranking of the
question and of each subquery, plus every chunk the search judged. Without lexical statistics (an
index built before chunk_terms) there is no calibrated prior: a search that tested chunks answers
from its claims, one that tested none fills by similarity to the question alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lazygraph.query.evidence import Evidence
from lazygraph.query.ranking import fuse
from lazygraph.query.search.lazy.relevance import ChunkSignals, RelevanceRule
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import LazySearchSettings, LexicalSettings


@dataclass
class FillCandidates:
    """Chunks that may fill the context, best first, with their estimated P(relevant)."""

    chunks: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    # what the passages are focused on: the question and its vector
    question: str = ""
    question_vector: np.ndarray | None = None
    # chunk -> its focused passage, rendered on first use (only the head of the list ever fits)
    passages: dict[int, str] = field(default_factory=dict)


def rank_fill_candidates(
    snapshot: IndexSnapshot,
    question: str,
    question_vector: np.ndarray,
    assessed: dict[int, float],
    rule: RelevanceRule,
    qs: LazySearchSettings,
    lexical: LexicalSettings,
    scope: str = "local",
    subqueries: Sequence[tuple[str, np.ndarray]] = (),
) -> FillCandidates:
    """The fill candidates of one query: ``assessed`` maps each chunk the assessor judged to its best
    combined score over the subqueries. A global question is not cut at ``context_fill_min``: it asks
    about the corpus as a whole, and its prior (similarity and BM25 to a generic question) is low for
    most of what answers it.

    ``subqueries`` (each one's text and unit search vector) are further targets when
    ``query.context_fill_targets`` is ``subqueries``: a chunk's prior is then its best over the
    question and each subquery, and each brings its own best chunks into the pool."""
    if qs.context_fill == "none" or snapshot.n_chunks == 0:
        return FillCandidates()
    similarity = snapshot.similarities(question_vector)
    if not snapshot.has_lexical:
        # Without a prior, a search whose chunks were tested answers from what the tests kept; one
        # that tested none (budget 0) would have no context at all.
        if assessed:
            return FillCandidates()
        return _by_similarity(similarity, question, question_vector, qs.context_fill_candidates)
    targets = [(question, similarity)]
    if qs.context_fill_targets == "subqueries":
        targets += [(text, snapshot.similarities(vector)) for text, vector in subqueries]
    head = min(snapshot.n_chunks, qs.context_fill_candidates)
    pool: dict[int, None] = {}
    priors = np.zeros(snapshot.n_chunks, dtype=np.float64)
    for text, target_similarity in targets:
        bm25 = snapshot.bm25(text, lexical)
        fused = fuse(target_similarity, bm25, lexical.rrf_k)
        top = np.argpartition(-fused, head - 1)[:head] if head < snapshot.n_chunks else np.arange(head)
        pool.update(dict.fromkeys(map(int, top)))
        priors = np.maximum(priors, rule.priors(ChunkSignals.from_scores(target_similarity, bm25)))
    pool.update(dict.fromkeys(assessed))
    if qs.context_fill_order == "prior":
        scored = [(c, float(priors[c])) for c in pool]
    else:
        scored = [(c, assessed[c] if c in assessed else float(priors[c])) for c in pool]
    cut = 0.0 if scope == "global" else qs.context_fill_min
    scored = [(c, s) for c, s in scored if s >= cut]
    scored.sort(key=lambda item: -item[1])
    return FillCandidates([c for c, _ in scored], [s for _, s in scored], question, question_vector)


def _by_similarity(
    similarity: np.ndarray, question: str, question_vector: np.ndarray, head: int
) -> FillCandidates:
    """The candidates of an index without BM25 statistics (built before the chunk_terms table) when no
    chunk was tested: the prior's fitted weights never saw BM25 missing, so the fill ranks by
    similarity alone and is not cut, as vector RAG reads."""
    head = min(len(similarity), head)
    top = np.argpartition(-similarity, head - 1)[:head] if head < len(similarity) else np.arange(head)
    ranked = sorted(map(int, top), key=lambda chunk: -float(similarity[chunk]))
    return FillCandidates(ranked, [float(similarity[c]) for c in ranked], question, question_vector)


def fill_context(
    kept: list[Evidence],
    candidates: FillCandidates,
    limit: int,
    count_tokens: Callable[[str], int],
    render: Callable[[list[int]], list[str]],
    community_of: Callable[[int], int],
    document_of: Callable[[int], str],
    render_item: Callable[[int, Evidence], str],
) -> list[Evidence]:
    """``kept`` (already cut to ``limit``) followed by the candidates' passages that still fit, each an
    item without claims. A candidate whose document is already in the context is skipped: the fill is
    there to bring documents the claims did not, not more of the same one. ``render`` gives the focused
    passages of chunks; ``render_item`` an item as the answer prompt shows it."""
    used = sum(item.tokens or count_tokens(render_item(n, item)) for n, item in enumerate(kept, start=1))
    present = {document_of(item.chunk) for item in kept}
    out = list(kept)
    for chunk, score in zip(candidates.chunks, candidates.scores, strict=True):
        if limit - used < 16:  # no passage is shorter than a title and a sentence
            break
        document = document_of(chunk)
        if document in present:
            continue
        if chunk not in candidates.passages:
            _render_ahead(candidates, chunk, render)
        item = Evidence(chunk, candidates.passages[chunk], [], community_of(chunk), "passage", score)
        item.tokens = count_tokens(render_item(len(out) + 1, item))
        if used + item.tokens <= limit:
            out.append(item)
            used += item.tokens
            present.add(document)
    return out


def interleave_themes(candidates: FillCandidates, theme_of: Callable[[int], int]) -> FillCandidates:
    """The candidates reordered for a global question: the best of each theme in turn (round robin over
    themes in order of their best candidate), so that the fill spreads over the corpus's themes instead
    of filling with the one the question's wording is closest to."""
    queues: dict[int, list[tuple[int, float]]] = {}
    for chunk, score in zip(candidates.chunks, candidates.scores, strict=True):
        queues.setdefault(theme_of(chunk), []).append((chunk, score))
    order: list[tuple[int, float]] = []
    while queues:
        for theme in list(queues):
            order.append(queues[theme].pop(0))
            if not queues[theme]:
                del queues[theme]
    return FillCandidates(
        [c for c, _ in order],
        [s for _, s in order],
        candidates.question,
        candidates.question_vector,
        candidates.passages,
    )


# Passages rendered per call: the focus embeds the sentences of every chunk it has not seen in one batch.
RENDER_AHEAD = 16


def _render_ahead(candidates: FillCandidates, chunk: int, render: Callable[[list[int]], list[str]]) -> None:
    """Render ``chunk``'s passage with those of the next candidates not rendered yet, in one call."""
    start = candidates.chunks.index(chunk)
    todo = [c for c in candidates.chunks[start:] if c not in candidates.passages][:RENDER_AHEAD]
    candidates.passages.update(zip(todo, render(todo), strict=True))
