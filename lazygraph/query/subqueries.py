"""Query refinement: the LLM splits the question into subqueries and an expanded query; each subquery
is then refined with the graph concepts that match it best (embedding similarity of the concept
names, plus a bonus for a name that appears verbatim in the subquery).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazygraph.errors import LLMError
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import QuerySettings

# A concept named verbatim in the subquery ranks before any match by embedding alone.
LEXICAL_BONUS = 1.0
MAX_NGRAM = 6
_WORD = re.compile(r"[\w'-]+", re.UNICODE)


@dataclass
class Subquery:
    text: str
    concepts: list[str] = field(default_factory=list)
    concept_indices: list[int] = field(default_factory=list)

    @property
    def refined(self) -> str:
        """What is embedded for the search: the subquery plus its matched concepts."""
        if not self.concepts:
            return self.text
        return f"{self.text} ({'; '.join(self.concepts)})"


@dataclass
class Refinement:
    subqueries: list[Subquery]
    expanded_query: str
    llm_ok: bool


def refine_schema(qs: QuerySettings) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "subqueries": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": qs.min_subqueries,
                "maxItems": qs.max_subqueries,
            },
            "expanded_query": {"type": "string"},
        },
        "required": ["subqueries", "expanded_query"],
    }


def _clean(text: Any) -> str:
    return " ".join(str(text).split()) if isinstance(text, str) else ""


def parse_refinement(data: Any, question: str, qs: QuerySettings) -> tuple[list[str], str, bool]:
    """Validated subqueries and expanded query; falls back to the question itself on junk."""
    subqueries: list[str] = []
    expanded = ""
    if isinstance(data, dict):
        raw = data.get("subqueries")
        if isinstance(raw, list):
            for item in raw:
                text = _clean(item)
                # Subqueries of one or two characters, or copies, carry nothing.
                if len(text) >= 3 and text.lower() not in {s.lower() for s in subqueries}:
                    subqueries.append(text)
        expanded = _clean(data.get("expanded_query"))
    llm_ok = bool(subqueries)
    others = [s for s in subqueries if s.lower() != question.lower()]
    if not others:
        ordered = [question]
    elif qs.question_subquery == "first":
        ordered = [question] + others
    elif qs.question_subquery == "last":
        ordered = others[: qs.max_subqueries - 1] + [question]
    else:
        ordered = others
    return ordered[: qs.max_subqueries], expanded or question, llm_ok


def refine_question(question: str, client: LLMClient | None, qs: QuerySettings) -> Refinement:
    """Ask the LLM for subqueries; a failed or malformed reply degrades to the question alone."""
    data: Any = None
    if client is not None:
        prompt = load_prompt("refine", qs.prompts.refine)
        messages = prompt.messages(
            question=question, min_subqueries=str(qs.min_subqueries), max_subqueries=str(qs.max_subqueries)
        )
        try:
            data = client.chat(
                messages, max_tokens=qs.refine_max_tokens, json_schema=refine_schema(qs)
            ).json()
        except LLMError:
            data = None
    texts, expanded, ok = parse_refinement(data, question, qs)
    return Refinement([Subquery(t) for t in texts], expanded, ok)


def lexical_matches(text: str, name_index: dict[str, int]) -> set[int]:
    """Concepts whose (lower-cased) name is an n-gram of the text."""
    words = [w.lower() for w in _WORD.findall(text)]
    found = set()
    for n in range(1, min(MAX_NGRAM, len(words)) + 1):
        for i in range(len(words) - n + 1):
            gram = " ".join(words[i : i + n])
            # Concept names are lemmatised; a plural in the query still names the same concept.
            for candidate in (gram, gram[:-1] if gram.endswith("s") else None):
                idx = name_index.get(candidate) if candidate else None
                if idx is not None:
                    found.add(idx)
    return found


def match_concepts(
    snapshot: IndexSnapshot,
    subquery: Subquery,
    subquery_vector: np.ndarray,
    concept_vectors: np.ndarray | None,
    qs: QuerySettings,
) -> None:
    """Attach the best-matching graph concepts to ``subquery`` (in place)."""
    if qs.concepts_per_subquery == 0 or snapshot.n_concepts == 0:
        return
    scores = np.full(snapshot.n_concepts, -np.inf, dtype=np.float32)
    if concept_vectors is not None and len(concept_vectors) == snapshot.n_concepts:
        scores = concept_vectors @ subquery_vector
        scores[scores < qs.min_concept_similarity] = -np.inf
    lexical = lexical_matches(subquery.text, snapshot.concept_name_index())
    for idx in lexical:
        base = scores[idx] if np.isfinite(scores[idx]) else 0.0
        scores[idx] = max(base, 0.0) + LEXICAL_BONUS
    k = min(qs.concepts_per_subquery, snapshot.n_concepts)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    chosen = [int(i) for i in top if np.isfinite(scores[i])]
    subquery.concept_indices = chosen
    subquery.concepts = [str(snapshot.concept_names[i]) for i in chosen]
