"""Query refinement: the LLM splits the question into subqueries and an expanded query; each subquery
is then refined with the graph concepts that match it best (embedding similarity of the concept
names, plus a bonus for a name that appears verbatim in the subquery).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

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


# What a question asks for: "local", particular facts that a few documents answer; "global", themes
# across the corpus (the reduce then writes a report organised by theme).
Scope = Literal["local", "global"]


@dataclass
class Refinement:
    subqueries: list[Subquery]
    expanded_query: str
    llm_ok: bool
    scope: Scope = "local"
    # subqueries the model wrote that named something the question does not (a guessed answer), dropped
    guesses: list[str] = field(default_factory=list)


def refine_schema(qs: QuerySettings) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            # first, so the model has decided what kind of question it plans for before it writes any
            "scope": {"type": "string", "enum": ["local", "global"]},
            "subqueries": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": qs.min_subqueries,
                "maxItems": qs.max_subqueries,
            },
            "expanded_query": {"type": "string"},
        },
        "required": ["scope", "subqueries", "expanded_query"],
    }


def _clean(text: Any) -> str:
    return " ".join(str(text).split()) if isinstance(text, str) else ""


def parse_refinement(data: Any, question: str, qs: QuerySettings) -> Refinement:
    """Validated subqueries, expanded query and scope; falls back to the question itself on junk.

    A subquery or expanded query that names a person, place, date or number the question does not is
    a guess at the answer (a small model "refines" a bridge question by asserting its missing link), and
    a guess searched for, or shown to the reduce, is repeated in the answer: such subqueries are
    dropped and such an expanded query is replaced by the question.
    """
    subqueries: list[str] = []
    guesses: list[str] = []
    expanded = ""
    scope: Scope = "local"
    if isinstance(data, dict):
        raw = data.get("subqueries")
        if isinstance(raw, list):
            for item in raw:
                text = _clean(item)
                # Subqueries without two words (or the prompt's "...?" copied), or copies, carry nothing.
                if len(_WORD.findall(text)) < 2 or text.lower() in {s.lower() for s in subqueries}:
                    continue
                (guesses if guessed_names(text, question) else subqueries).append(text)
        expanded = _clean(data.get("expanded_query"))
        if guessed_names(expanded, question) or len(_WORD.findall(expanded)) < 3:
            expanded = ""
        scope = "global" if data.get("scope") == "global" else "local"
    scope = question_scope(question, scope)
    llm_ok = bool(subqueries) or bool(guesses)
    others = [s for s in subqueries if s.lower() != question.lower()]
    if not others:
        ordered = [question]
    elif qs.question_subquery == "first":
        ordered = [question] + others
    elif qs.question_subquery == "last":
        ordered = others[: qs.max_subqueries - 1] + [question]
    else:
        ordered = others
    subs = [Subquery(t) for t in ordered[: qs.max_subqueries]]
    return Refinement(subs, expanded or question, llm_ok, scope, guesses)


# Words that mark a question about the corpus as a whole ("what are the main themes ...", "across the
# dataset, what are the key changes ..."): a small model often reads such a question as local, so the
# wording alone also makes it global.
GLOBAL_CUES = re.compile(
    r"\b(main|key|major|overall|recurring|common|central)\b.{0,60}\b(themes?|tensions?|trends?|issues?|"
    r"topics?|debates?|changes?|developments?|concerns?|patterns?|lessons?)\b"
    r"|\bacross (the|all|these)\b|\boverview\b|\bthemes\b"
    r"|\b(the|these|all) (documents|dataset|corpus)\b",
    re.IGNORECASE,
)


# Wording that marks a question asking for one particular fact: a yes-or-no question, "when" or
# "where", "how many", "which of", "who/what/which [noun] is/was/did/does", or a question that ends
# on its question word ("... known for his depictions of what?", "... in what year?"). The embedded
# model read 16 % of such questions in the gold sets as global and answered a date or a name with a
# report by theme; a question of this form is answered as local unless its wording also marks it
# global.
PARTICULAR_FACT = re.compile(
    r"^\W*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b"
    r"|^\W*(when|where)\b"
    r"|^\W*(who|what|which)(\s+[\w'-]+)?\s+(is|was|did|does)\b"
    r"|^\W*which\s+of\b"
    r"|\bhow\s+(many|much|old|long|far|tall|big|large)\b"
    r"|\b(what|who|whom|when|where|which)(\s+[\w'-]+){0,2}\W*\?\s*$",
    re.IGNORECASE,
)


def question_scope(question: str, model_scope: Scope) -> Scope:
    """The scope a question is answered in: the model's reading, checked against the wording.

    Wording about the corpus as a whole (``GLOBAL_CUES``) makes a question global whatever the model
    said; a question worded as asking for one particular fact (``PARTICULAR_FACT``) stays local even
    when the model called it global. Otherwise the model decides."""
    if GLOBAL_CUES.search(question):
        return "global"
    if model_scope == "global" and PARTICULAR_FACT.search(question.strip()):
        return "local"
    return model_scope


# Capitalised words that start questions or name no one: never counted as a guessed name.
# fmt: off
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is",
    "are", "was", "were", "do", "does", "did", "in", "on", "of", "for", "and", "or", "to", "by",
    "with", "from", "at", "as", "about", "between", "both", "either", "neither", "each", "all", "any",
    "this", "that", "these", "those", "name", "list", "find", "give", "tell", "describe", "explain",
    "compare",
})
# fmt: on
_NAME = re.compile(r"\b[A-Z][\w'-]*|\b\d[\d,.]*\b")


def guessed_names(text: str, question: str) -> list[str]:
    """The capitalised words and numbers of ``text`` that ``question`` does not contain (its guesses).

    Words are compared in lower case and by their first five letters, so "French" for "France" or a
    plural is not taken for a new name; the first word is capitalised as any sentence's is."""
    said = {w.lower()[:5] for w in _WORD.findall(question)}
    found = []
    for match in _NAME.finditer(text):
        word = match.group()
        if not text[: match.start()].strip() and not word[0].isdigit():
            continue  # the sentence's first word
        if word.lower() not in _FUNCTION_WORDS and word.lower()[:5] not in said:
            found.append(word)
    return found


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
    return parse_refinement(data, question, qs)


def name_candidates(text: str) -> list[str]:
    """The lower-cased names a concept may have to be named in the text: its n-grams, and each
    n-gram ending in "s" without it (concept names are lemmatised; a plural still names the concept)."""
    words = [w.lower() for w in _WORD.findall(text)]
    names: dict[str, None] = {}
    for n in range(1, min(MAX_NGRAM, len(words)) + 1):
        for i in range(len(words) - n + 1):
            gram = " ".join(words[i : i + n])
            names[gram] = None
            if gram.endswith("s"):
                names[gram[:-1]] = None
    return [name for name in names if name]


def named_score(similarity: float | None) -> float:
    """The score of a concept the subquery names: above every match by similarity alone, and among the
    named ones by similarity (a name far from the subquery counts as 0), so that "north carolina"
    ranks before "north" in a question about North Carolina."""
    base = similarity if similarity is not None and np.isfinite(similarity) else 0.0
    return float(np.float32(max(base, 0.0) + LEXICAL_BONUS))


def lexical_matches(text: str, name_index: dict[str, int]) -> set[int]:
    """Concepts whose (lower-cased) name is an n-gram of the text."""
    return {name_index[name] for name in name_candidates(text) if name in name_index}


def match_concepts(
    snapshot: IndexSnapshot,
    subquery: Subquery,
    subquery_vector: np.ndarray,
    concept_vectors: np.ndarray | None,
    qs: QuerySettings,
) -> None:
    """Attach the best-matching graph concepts to ``subquery`` (in place): the concepts named by words
    of the subquery first, most similar first (``named_score``), then the most similar names at least
    ``min_concept_similarity``; equal scores in the index's concept order."""
    if qs.concepts_per_subquery == 0 or snapshot.n_concepts == 0:
        return
    similarity = np.full(snapshot.n_concepts, -np.inf, dtype=np.float32)
    if concept_vectors is not None and len(concept_vectors) == snapshot.n_concepts:
        similarity = concept_vectors @ subquery_vector
    scores = np.where(similarity >= qs.min_concept_similarity, similarity, -np.inf).astype(np.float32)
    for idx in lexical_matches(subquery.text, snapshot.concept_name_index()):
        scores[idx] = named_score(float(similarity[idx]))
    candidates = np.flatnonzero(np.isfinite(scores))
    # Best first; equal scores (two names the subquery says, both far from it) in index order.
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    chosen = [int(i) for i in order[: qs.concepts_per_subquery]]
    subquery.concept_indices = chosen
    subquery.concepts = [str(snapshot.concept_names[i]) for i in chosen]
