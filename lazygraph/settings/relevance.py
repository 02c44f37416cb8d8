"""How the lazy search judges a chunk relevant: the rule, the weights fitted for it, its threshold."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

# The combined rule's weights as `lazygraph eval relevance` fitted them (its ``combinations`` section)
# for one assessor set-up, by name. Both are fits for the embedded assessor (relevance prompt v3) and
# the default embedder (all-MiniLM-L6-v2) on hotpotqa100 questions 70-99 (240 passages, 48 gold).
RELEVANCE_PROFILES: dict[str, dict[str, float]] = {
    # The assessor reading 80 focus tokens: ROC AUC 0.887 out of fold against 0.839 for P(yes) alone;
    # at 0.15 the combined score keeps 46 of 48 gold passages and 40 % of the others.
    "focus80": {"p_yes": 2.4878, "similarity": 2.6516, "bm25": 2.2603, "intercept": -5.7035},
    # The assessor reading 32 (``query.relevance_focus_tokens: 32``): AUC 0.887; at 0.15, 47 of 48 gold
    # passages and 42 % of the others kept. Set it with that option.
    "focus32": {"p_yes": 2.3866, "similarity": 2.6386, "bm25": 2.3739, "intercept": -5.6773},
}
# The threshold each rule's score is compared with unless ``threshold`` is set. P(yes) alone: the
# embedded 1.5B model's P(yes) is compressed towards the middle; on the same questions (top 8 passages
# each) 0.4 keeps 46 of 48 gold passages and 65 % of the others.
CALIBRATED_THRESHOLDS: dict[str, float] = {"combined": 0.15, "p_yes": 0.4}


class RelevanceRuleSettings(BaseModel):
    """How a tested chunk is judged relevant, and which chunks need no LLM test at all.

    ``rule="p_yes"``: the assessor's P(yes) against the threshold (the method as published).
    ``rule="combined"``: a logistic combination of P(yes), the chunk's cosine similarity to the subquery
    and its BM25 score relative to the subquery's best chunk, against the threshold. With ``cascade``,
    a prior from similarity and BM25 alone accepts a chunk without a test above ``accept_above`` and
    skips it below ``reject_below``, so the budget goes where the cheap signals are unsure. Every weight
    comes from ``lazygraph eval relevance`` (its ``combinations`` section), fitted on calibration
    questions held out from evaluation; refit them for another assessor.
    """

    rule: Literal["p_yes", "combined"] = Field(
        "combined", description="p_yes: the assessor's P(yes) alone; combined: with similarity and BM25."
    )
    profile: Literal["focus80", "focus32"] = Field(
        "focus80",
        description="The fitted weights of the combined rule for an assessor set-up: focus80 (the assessor "
        "reads 80 tokens, the default of query.relevance_focus_tokens) or focus32 "
        "(query.relevance_focus_tokens: 32). Weights set below win over the profile's.",
    )
    p_yes: float = Field(description="Combined rule: weight of the assessor's P(yes).")
    similarity: float = Field(description="Combined rule: weight of the cosine similarity to the subquery.")
    bm25: float = Field(description="Combined rule: weight of BM25 relative to the subquery's best chunk.")
    intercept: float = Field(description="Combined rule: intercept of the logistic combination.")
    threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The score at or above which a chunk is relevant, for the rule in force; None: that "
        "rule's calibrated threshold (combined 0.15, p_yes 0.4).",
    )
    cascade: bool = Field(True, description="Settle chunks the cheap signals are sure of without a test.")
    # The cascade's prior (no LLM) takes a chunk above 0.5 (no wrong passage there) and defers one below
    # 0.1 (1 gold passage in 48); deferred chunks are tested at the end with what the budget left.
    prior_similarity: float = Field(2.9818, description="Cascade prior: weight of the cosine similarity.")
    prior_bm25: float = Field(2.7437, description="Cascade prior: weight of the relative BM25.")
    prior_intercept: float = Field(-4.7012, description="Cascade prior: intercept.")
    accept_above: float = Field(
        0.5, ge=0, le=1, description="Cascade: a prior at or above this takes a chunk without a test."
    )
    reject_below: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Cascade: a prior below this defers a chunk to the budget left at the end.",
    )

    @model_validator(mode="before")
    @classmethod
    def _profile_weights(cls, data: Any) -> Any:
        """The profile's weights under any weight given explicitly."""
        if not isinstance(data, dict):
            return data
        profile = data.get("profile", cls.model_fields["profile"].default)
        return {**RELEVANCE_PROFILES.get(profile, {}), **data}

    def threshold_for(self, rule: str) -> float:
        """The threshold ``rule``'s score is compared with: ``threshold`` when it is set and ``rule`` is
        the one in force, else that rule's calibrated one (the combined rule falls back to P(yes) alone
        on an index without BM25 statistics, at its own calibrated threshold)."""
        if self.threshold is not None and rule == self.rule:
            return self.threshold
        return CALIBRATED_THRESHOLDS[rule]
