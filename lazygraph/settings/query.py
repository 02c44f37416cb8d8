"""The query settings: what every search method's answer shares, the prompts, the LLM cache, and the
presets; the lazy search's own settings are ``LazySearchSettings`` (``lazygraph.settings.lazy``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from lazygraph.settings.lazy import LazySearchSettings


class PromptVersions(BaseModel):
    """The version of each LLM task's prompt file (``lazygraph/llm/prompts/<task>.v<N>.md``).

    Pinned rather than "newest", so that a relevance threshold calibrated on one prompt stays tied
    to it; the versions are recorded in every cost record and in the index manifest.
    """

    relevance: int = Field(3, ge=1, description="The relevance test's prompt.")
    map_claims: int = Field(2, ge=1, description="Claim extraction's prompt.")
    # v4 showed the expanded query as what to cover; v2 answered the expanded query from claims alone, v3
    # showed both.
    reduce: int = Field(
        5,
        ge=1,
        description="The lazy answer's prompt: v5 answers the user's question from each claim beside its "
        'source sentences, a sentence for each thing the question asks ("what did it recommend, and who '
        'led it?").',
    )
    reduce_global: int = Field(
        2,
        ge=1,
        description="One theme of the report answering a global question: a title and cited sentences from "
        "that theme's sources; v2 writes a sentence for each source in turn (at least as many as the "
        "theme has sources, up to report_sentences_per_theme), where v1 let the model stop after one.",
    )
    refine: int = Field(
        2,
        ge=1,
        description="Refine's prompt: v2 writes subqueries as questions that assert nothing, and tells local "
        "from global.",
    )
    vector_answer: int = Field(
        3,
        ge=1,
        description="The baselines' answer prompt: v3 gives them the answer guidance reduce v4 gives the "
        "lazy search.",
    )


class LLMCacheSettings(BaseModel):
    """The cache of relevance verdicts and temperature-0 completions (``lazygraph/llm/cache.py``).

    Kept as a Delta table partitioned by key, read by key (never loaded whole) through a bounded
    in-memory cache, and appended after every query, so a question asked again (tomorrow's run of a
    standing batch, an evaluation at another budget) pays only for what it has not asked before.
    """

    enabled: bool = Field(True, description="Cache relevance verdicts and temperature-0 completions.")
    location: str | None = Field(None, description="The cache's Delta table; None: llm_cache in the index.")
    local_entries: int = Field(
        100_000,
        ge=0,
        description="Verdicts and completions each engine (query actor) keeps in memory, the least "
        "recently used dropped first; the others are read by key from the table. 0: none kept.",
    )


class AnswerSettings(BaseModel):
    """What every search method's answer call reads: the context limit and the cited answer's shape."""

    context_tokens: int = Field(8000, ge=100, description="Context-token limit of the answer prompt.")
    # tiktoken and the model's own tokenizer disagree by a few percent.
    answer_context_share: float = Field(
        0.8, gt=0, le=1, description="Share of the answer model's window the context may fill."
    )
    answer_max_tokens: int = Field(400, ge=16, description="Longest answer, in generated tokens.")
    # Enforced by the output schema, so that a reader can check every sentence against a few passages.
    answer_max_sentences: int = Field(8, ge=1, description="Sentences of an answer.")
    # A small model that starts repeating itself inside one sentence is made to close it and cite,
    # instead of running to answer_max_tokens with a reply that no longer parses.
    answer_sentence_max_chars: int = Field(
        400, ge=40, description="Longest sentence the answer schema allows, in characters."
    )
    max_facts_per_sentence: int = Field(3, ge=1, description="Facts (or passages) one sentence may cite.")
    max_sources_per_sentence: int = Field(5, ge=1, description="Source chunks one sentence may cite.")


class QuerySettings(LazySearchSettings, AnswerSettings):
    """The ``query`` section: the default preset, the prompts, the LLM cache, the answer every method
    shares (``AnswerSettings``) and the lazy search's own settings (``LazySearchSettings``)."""

    # Z0_Lite on the embedded CPU model: on the calibration questions of both gold data sets its
    # twenty relevance tests bought Z20_Lite no answer within noise, at 4.5-5x the LLM tokens
    # (BENCHMARKS.md, "Budgets on the calibration questions"); Z100_Lite, Z500 and Z1500 are the
    # method's presets for served models, where relevance tests are cheap.
    preset: str = Field(
        "Z0_Lite",
        description="The preset a query runs under when it names none (Z0_Lite: the embedded model's).",
    )
    index_source: Literal["auto", "snapshot", "store"] = Field(
        "auto",
        description='Where queries read the index: "snapshot", every table loaded in memory (every '
        'method); "store", the serving store every index run builds, reading only what a query '
        'touches (every method: lazy through a working set per query); "auto", the store when the '
        "query's method can run on it, the index's last complete run has at least "
        "serving.store_above_chunks chunks and the store of its versions opens, else the snapshot (with "
        "one line saying why when the index is that large).",
    )
    timeout_s: float | None = Field(
        3600.0,
        gt=0,
        description="Limit of one query's active time, checked before each LLM call and lowering each "
        "request's timeout; time spent waiting for an LLM server that is down does not count. None: no "
        "limit.",
    )
    llm_cache: LLMCacheSettings = Field(
        default_factory=LLMCacheSettings, description="The cache of LLM verdicts and completions."
    )
    prompts: PromptVersions = Field(default_factory=PromptVersions, description="Prompt versions per task.")

    @model_validator(mode="before")
    @classmethod
    def _one_relevance_threshold(cls, data: Any) -> Any:
        if isinstance(data, dict) and "relevance_threshold" in data:
            raise ValueError(
                "query.relevance_threshold is now query.relevance.threshold (one threshold for the rule in "
                "force); move the value there"
            )
        return data


class PresetSettings(BaseModel):
    """A named query set-up: budget, context limit, answer model and method."""

    budget: int = Field(ge=0, description="Relevance-test budget.")
    context_tokens: int = Field(8000, ge=100, description="Context-token limit of the answer prompt.")
    synthesis_role: Literal["relevance", "synthesis"] = Field(
        "synthesis",
        description='"relevance" (cheap): the relevance model refines, maps and answers too; "synthesis" '
        "(strong): the synthesis model does.",
    )
    method: str = Field(
        "lazy",
        description="The search method (a name of the search registry): lazy, or one without relevance "
        "tests (vector, hybrid) for the SS_* baselines.",
    )


def default_presets() -> dict[str, PresetSettings]:
    return {
        # The embedded default: no relevance tests (chunks ranked by the no-LLM prior, read through
        # their focused passages), a 1,000-token answer context, the cheap model everywhere.
        "Z0_Lite": PresetSettings(budget=0, context_tokens=1000, synthesis_role="relevance"),
        # Twenty relevance tests, the same context: 1.5-2 s a test on the embedded model.
        "Z20_Lite": PresetSettings(budget=20, context_tokens=1000, synthesis_role="relevance"),
        "Z100_Lite": PresetSettings(budget=100, synthesis_role="relevance"),
        "Z500": PresetSettings(budget=500),
        "Z1500": PresetSettings(budget=1500),
        # Vector RAG baselines: no relevance tests, top chunks by similarity up to the context limit.
        "SS_8K": PresetSettings(budget=0, context_tokens=8000, method="vector"),
        "SS_64K": PresetSettings(budget=0, context_tokens=64000, method="vector"),
    }
