"""The lazy search's own settings: refine, the budgeted match, claims, the context fill and the report.

Declared as one section with the settings every method shares (``QuerySettings``), so the YAML keys
stay flat (``query.focus_tokens``); the lazy search is the only method that reads these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from lazygraph.settings.relevance import RelevanceRuleSettings


class LazySearchSettings(BaseModel):
    """What the lazy search (``lazygraph.query.search.lazy``) reads of the query settings."""

    # --- refine: subqueries and their concepts
    min_subqueries: int = Field(3, ge=1, description="Fewest subqueries refine is asked for.")
    max_subqueries: int = Field(5, ge=1, description="Most subqueries refine may write.")
    refine_max_tokens: int = Field(256, ge=16, description="Longest refine reply, in tokens.")
    concepts_per_subquery: int = Field(5, ge=0, description="Graph concepts matched to each subquery.")
    min_concept_similarity: float = Field(
        0.45,
        ge=-1,
        le=1,
        description="Concepts whose name embedding is less similar are not used to refine a subquery, unless "
        "their name appears in it verbatim.",
    )
    # Keeps small-model subqueries that drop a key entity from steering the search away.
    question_weight: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Weight of the whole question's embedding mixed into each subquery's search vector "
        "(0: the subquery only).",
    )
    # A chunk is tested once per query, against the first subquery that reaches it; "last" lets the
    # focused subqueries judge the chunks most similar to the question (a small assessor judges a passage
    # against a one-hop subquery better than against a multi-hop question), and the question then spends
    # what they left.
    question_subquery: Literal["first", "last", "none"] = Field(
        "first", description="Where the question itself is searched among the LLM's subqueries."
    )
    cache_dir: Path | None = Field(
        None, description="Where concept-name embeddings are cached between processes; None: <home>/cache."
    )
    # --- match: the budgeted relevance tests
    relevance: RelevanceRuleSettings = Field(
        default_factory=RelevanceRuleSettings,
        description="How a tested chunk is judged relevant: rule, weights, threshold, cascade.",
    )
    ranking: Literal["similarity", "hybrid"] = Field(
        "hybrid",
        description="How a subquery ranks chunks (and so communities): similarity (cosine plus the concept "
        "bonus) or hybrid (that ranking fused with the subquery's BM25 ranking, as --method hybrid ranks).",
    )
    concept_boost: float = Field(
        0.1, ge=0, description="Similarity bonus per matched concept a chunk mentions (scaled by the share)."
    )
    z_successive_misses: int = Field(
        3, ge=1, description="Successive communities without a relevant chunk before the search deepens."
    )
    top_k_chunks_per_community: int = Field(3, ge=1, description="Chunks tested per community visit.")
    community_rank_k: int = Field(
        3, ge=1, description="Communities are ranked by the similarity ranks of their best k chunks."
    )
    relevance_batch_size: int = Field(8, ge=1, description="Relevance tests sent to the LLM as one batch.")
    # 200 tokens holds 90 % of HotpotQA's and MuSiQue's paragraphs whole and two thirds of a 300-token
    # chunk: at 80, and at 160, the demo's review chunk (172 tokens) lost its last sentence, the one saying
    # what the review recommended.
    focus_tokens: int = Field(
        200,
        ge=0,
        description="Tokens of a relevant chunk's sentences most similar to the subquery (and its title) "
        "that the map step reads and claims are drawn from, and that the answer model reads beside those "
        "claims (0: whole chunks).",
    )
    # A yes/no test rarely needs more than the sentence naming the subquery's subject, and every token read
    # costs time on a CPU model (about a second per hundred prompt tokens). The combined rule's weights are
    # fitted at 80 (profile focus80); 32 reads 1.3x the tests a minute with the same separation once
    # combined with similarity and BM25 (profile focus32; BENCHMARKS.md).
    relevance_focus_tokens: int | None = Field(
        80,
        ge=0,
        description="What the relevance assessor reads of a chunk (its best sentences up to this many "
        "tokens, always at least the best one), and what a fill passage quotes; None: focus_tokens. With "
        "32, set query.relevance.profile: focus32.",
    )
    focus_lexical_weight: float = Field(
        0.3,
        ge=0,
        description="How much a sentence's IDF-weighted share of the subquery's terms adds to its cosine "
        "when the focus picks sentences (0: cosine alone).",
    )
    # --- map: claims
    map_scope: Literal["subquery", "query"] = Field(
        "query",
        description="subquery: claims per subquery from the chunks it found (the method as designed); "
        "query: one extraction over all relevant chunks against the whole question (fewer calls).",
    )
    max_claims_per_group: int = Field(6, ge=1, description="Claims one extraction call may return.")
    max_chunks_per_map_group: int = Field(4, ge=1, description="Chunks quoted in one extraction call.")
    map_max_tokens: int = Field(320, ge=16, description="Longest extraction reply, in tokens.")
    # score = similarity to the subquery + support_weight * (sources - 1) + relevance_weight * best
    # P(relevant) of its sources, minus diversity_penalty for every claim already kept from its community.
    claim_support_weight: float = Field(0.05, ge=0, description="Claim rank: weight of extra sources.")
    claim_relevance_weight: float = Field(
        0.2, ge=0, description="Claim rank: weight of its sources' best P(relevant)."
    )
    claim_diversity_penalty: float = Field(
        0.05, ge=0, description="Claim rank: penalty per claim already kept from the same community."
    )
    # --- the context fill (lazygraph.query.search.lazy.fill)
    context_fill: Literal["passages", "none"] = Field(
        "passages",
        description="passages: the tokens the claims leave free hold focused passages, best first by the "
        "relevance rule's no-LLM prior; none: claims only, the method as published.",
    )
    context_fill_order: Literal["prior", "assessed"] = Field(
        "prior",
        description="prior: the no-LLM prior of every candidate; assessed: a judged chunk's combined score "
        "in place of its prior (a chunk turned down then comes last).",
    )
    # On the calibration questions at budget 0 (no relevance test, so the fill is the whole context),
    # ranking by each subquery as well raised gold-document recall on musique50-dev's multi-hop
    # questions and the span F1 on both data sets, none behind (BENCHMARKS.md, "The fill at budget 0").
    context_fill_targets: Literal["question", "subqueries"] = Field(
        "subqueries",
        description="question: fill candidates ranked by their prior for the question alone; subqueries: by "
        "their best prior over the question and each subquery (each hop of a multi-hop question brings "
        "its own chunks, with no LLM call).",
    )
    context_fill_candidates: int = Field(
        200,
        ge=1,
        description="The question's best chunks by the hybrid ranking that may fill (besides every chunk "
        "judged).",
    )
    # On the calibration questions (hotpotqa100 70-99, musique50-dev 0-19) candidates under 0.1 were
    # 0.1-2.6 % gold, those from 0.1 to 0.2 were 3-11 %: below 0.1 a passage is a distractor the small
    # answer model must read past.
    context_fill_min: float = Field(
        0.1, ge=0, le=1, description="A passage whose prior is under this never fills (0: fill to the limit)."
    )
    # --- the report answering a global question: one call per theme group
    report_max_themes: int = Field(
        10,
        ge=1,
        description="Theme calls of a report answering a global question (one per theme group, or per part "
        "of a large one); every theme's first part is read before any theme's second.",
    )
    report_sentences_per_theme: int = Field(3, ge=1, description="Sentences per theme of a report.")
    report_sources_per_theme: int = Field(
        4,
        ge=1,
        description="Sources one theme call reads: a theme group with more is split into several calls.",
    )
    # On the demo's report 23 of 24 sentences held 0.8-1.0 of their terms in the chunks they cite; the
    # one written to fill a slot from the question's words ("Storm Isolde changed the debate by causing
    # flooding and erosion...", cited to a source about the trust's birds) held 0.17.
    report_min_support: float = Field(
        0.4,
        ge=0,
        le=1,
        description="A report sentence is kept only when the sources it cites hold at least this share of "
        "its terms (0: keep every sentence).",
    )
    report_names_in_sources: bool = Field(
        True,
        description="A report sentence is kept only when every name in it (a capitalised word after its "
        "first) is in a source it cites: a sentence copied with one person swapped for another keeps "
        "most of its terms, so term support alone lets it through.",
    )
    report_stances_in_sources: bool = Field(
        True,
        description="A report sentence is kept only when it states each action as the cited source "
        "sentence it was written from does, done or not done: 'the council approved the turbines', "
        "written from 'the company asked the council to approve the turbines', is dropped.",
    )
    stance_model: str = Field(
        "en_core_web_sm",
        description="The spaCy pipeline (tagger, parser, lemmatizer) that reads those stances.",
    )
    report_max_tokens: int = Field(
        300, ge=16, description="Longest reply of one theme call, in generated tokens."
    )

    @property
    def assessor_focus_tokens(self) -> int:
        """Tokens of a chunk's focused sentences the relevance assessor reads."""
        return self.focus_tokens if self.relevance_focus_tokens is None else self.relevance_focus_tokens
