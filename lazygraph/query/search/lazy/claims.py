"""Map: from the relevant chunks of a subquery to ranked claims that fit the context limit.

1. The concept subgraph of the relevant chunks (their concepts and the kept edges among them) names
   the key topics of each group.
2. Chunks are grouped by concept community (the finest-level community holding most of the chunk's
   concept mentions); groups are packed in tree order so that sibling communities share a call, at most
   ``max_chunks_per_map_group`` chunks per call.
3. One claim-extraction call per group, all of a subquery's groups sent as one batch. Passages are
   numbered 1..n in the prompt (a small model copies small numbers reliably, hex ids not), each inside
   its own passage tags with tag look-alikes in its text neutralised, so a document cannot pose as the
   instructions; the numbers are validated and mapped back to chunk ids. A chunk that no claim cites
   is represented by its sentence sharing most words with the subquery, marked ``extracted`` and
   ranked below the model's claims.
4. Claims are ranked (similarity to the subquery, support, the relevance of their sources, diversity
   across communities) and cut to the context-token limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazygraph.errors import LLMError
from lazygraph.llm.base import ChatResult, LLMClient
from lazygraph.llm.prompts import load_prompt, passage_block, quote_passage
from lazygraph.query.answer import render_fact
from lazygraph.query.evidence import Claim
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.query.snapshot.model import ConceptSubgraph
from lazygraph.settings import QuerySettings

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
TOPICS_PER_GROUP = 6
# Claims quoted from the text because the model gave none rank below the model's own claims.
EXTRACTED_PENALTY = 0.1


@dataclass
class MapGroup:
    community: int
    chunks: list[int]
    topics: list[str] = field(default_factory=list)


def claims_schema(max_claims: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "maxItems": max_claims,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "sources": {"type": "array", "items": {"type": "integer"}},
                    },
                    "required": ["text", "sources"],
                },
            }
        },
        "required": ["claims"],
    }


# ---- grouping ----------------------------------------------------------------------------------------
def primary_community(snapshot: IndexSnapshot, chunk: int) -> int:
    """The finest-level community holding most of the chunk's mentions (-1 if none)."""
    for level in range(snapshot.n_levels - 1, -1, -1):
        c = (
            int(snapshot.chunk_primary_community[level, chunk])
            if snapshot.chunk_primary_community.size
            else -1
        )
        if c >= 0:
            return c
    return -1


def _tree_path(snapshot: IndexSnapshot, community: int) -> tuple[str, ...]:
    path: list[str] = []
    while community >= 0:
        path.append(str(snapshot.community_ids[community]))
        community = int(snapshot.community_parent[community])
    return tuple(reversed(path))


def subgraph_topics(graph: ConceptSubgraph, limit: int = TOPICS_PER_GROUP) -> list[str]:
    """Concepts of a group's subgraph, most connected within it first, then the most mentioned (ties
    in the index's concept order)."""
    order = np.lexsort((-graph.mentions, -graph.degree))
    return [graph.names[i] for i in order[:limit]]


def group_chunks(snapshot: IndexSnapshot, chunks: list[int], max_per_group: int) -> list[MapGroup]:
    """Chunks grouped by concept community, packed in community-tree order."""
    by_community: dict[int, list[int]] = {}
    for chunk in dict.fromkeys(chunks):
        by_community.setdefault(primary_community(snapshot, chunk), []).append(chunk)
    ordered = sorted(
        by_community.items(), key=lambda item: _tree_path(snapshot, item[0]) if item[0] >= 0 else ("~",)
    )
    groups: list[MapGroup] = []
    current: MapGroup | None = None
    for community, members in ordered:
        for chunk in members:
            if current is None or len(current.chunks) >= max_per_group:
                current = MapGroup(community, [])
                groups.append(current)
            current.chunks.append(chunk)
    graphs = snapshot.concept_subgraphs([group.chunks for group in groups])
    for group, graph in zip(groups, graphs, strict=True):
        group.topics = subgraph_topics(graph)
    return groups


# ---- extraction ------------------------------------------------------------------------------------
def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def parse_claims(data: Any, group: MapGroup, snapshot: IndexSnapshot, subquery: int) -> list[Claim]:
    """Claims whose sources are valid passage numbers; a claim citing none is attributed by word overlap."""
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        return []
    claims = []
    for item in data["claims"]:
        if not isinstance(item, dict):
            continue
        text = " ".join(str(item.get("text", "")).split())
        if len(text) < 3:
            continue
        numbers = item.get("sources") if isinstance(item.get("sources"), list) else []
        chunks = [group.chunks[n - 1] for n in numbers if isinstance(n, int) and 1 <= n <= len(group.chunks)]
        if not chunks:
            words = _words(text)
            overlaps = [len(words & _words(str(snapshot.chunk_texts[c]))) for c in group.chunks]
            if max(overlaps, default=0) == 0:
                continue  # neither cited nor supported by any passage of the group: dropped
            chunks = [group.chunks[int(np.argmax(overlaps))]]
        claims.append(Claim(text, list(dict.fromkeys(chunks)), subquery, group.community))
    return claims


# fmt: off
_STOPWORDS = frozenset({
    "the", "and", "for", "was", "were", "are", "is", "its", "his", "her", "their", "that", "this",
    "with", "from", "which", "who", "whom", "whose", "what", "when", "where", "how", "also", "has",
    "have", "had", "not", "but", "one", "into", "than", "then", "them", "they", "there", "been",
    "being", "about", "after", "before", "over", "under", "such", "only", "other", "more", "most",
    "some", "any", "all", "both", "each",
})
# fmt: on
# Share of a claim's content words its passage must hold for the claim to stand.
GROUNDED_SHARE = 0.8


def grounded(claim: str, passage: str) -> bool:
    """Whether the passage states what the claim does, as far as words tell: every name and number of
    the claim appears in it, and most of its content words (compared by their first five letters, so
    an inflection or a plural still counts).

    A 1.5B map model, asked a question, often writes the question back with a name from the passage
    in the answer's place ("the song's writer was the second wife of Yoko Ono", from a passage saying
    she is John Lennon's second wife). Such a claim names what its passage does not say, and is
    dropped, as is one that lost (or added) the negation of the sentence it restates; the passage
    itself still reaches the answer."""
    said = {w.lower()[:5] for w in _WORD.findall(passage)}
    # names and numbers, split into words as the passage is ("Eun-ji": "Eun", "ji")
    names = [
        w for w in _WORD.findall(claim) if (w[0].isupper() or w[0].isdigit()) and w.lower() not in _STOPWORDS
    ]
    if any(n.lower()[:5] not in said for n in names):
        return False
    content = [w for w in _words(claim) if w not in _STOPWORDS]
    if not content:
        return True
    if sum(w[:5] in said for w in content) < GROUNDED_SHARE * len(content):
        return False
    return _same_polarity(claim, passage, {w[:5] for w in content})


_NEGATION = re.compile(r"\b(not|no|never|nor|neither|none|without)\b|n't\b", re.IGNORECASE)


def _same_polarity(claim: str, passage: str, stems: set[str]) -> bool:
    """Whether the claim keeps the negation of the passage sentence it restates (the one sharing most of
    its words): "the review did not recommend refusal" must not become "the review recommended refusal".
    """
    sentences = [s for s in _SENTENCE.split(passage) if s.strip()] or [passage]
    closest = max(sentences, key=lambda s: len(stems & {w[:5] for w in _words(s)}))
    return bool(_NEGATION.search(closest)) == bool(_NEGATION.search(claim))


def _quoted(snapshot: IndexSnapshot, chunk: int, texts: dict[int, str] | None) -> str:
    return (texts or {}).get(chunk) or snapshot.passage(chunk)


def extractive_claims(
    snapshot: IndexSnapshot, group: MapGroup, subquery_text: str, subquery: int
) -> list[Claim]:
    """The sentence of each chunk sharing most words with the subquery (used when the model gives nothing)."""
    query_words = _words(subquery_text)
    claims = []
    for chunk in group.chunks:
        sentences = [s for s in _SENTENCE.split(str(snapshot.chunk_texts[chunk])) if s.strip()]
        if not sentences:
            continue
        best = max(sentences, key=lambda s: len(query_words & _words(s)))
        title = str(snapshot.chunk_titles[chunk] or "")
        text = f"{title}: {best.strip()}" if title and title.lower() not in best.lower() else best.strip()
        claims.append(Claim(text, [chunk], subquery, group.community, extracted=True))
    return claims


def render_passages(snapshot: IndexSnapshot, chunks: list[int], texts: dict[int, str] | None = None) -> str:
    """The chunks as passages 1..n, each inside its own tags, so that no passage can pose as the prompt.

    ``texts`` gives the text to quote per chunk (the sentences the relevance test read); other chunks
    are quoted whole.
    """
    blocks = []
    for n, chunk in enumerate(chunks, start=1):
        blocks.append(passage_block(n, (texts or {}).get(chunk) or snapshot.passage(chunk)))
    return "\n\n".join(blocks)


def extract_claims(
    snapshot: IndexSnapshot,
    subquery_text: str,
    subquery: int,
    groups: list[MapGroup],
    client: LLMClient,
    qs: QuerySettings,
    texts: dict[int, str] | None = None,
) -> list[Claim]:
    """One claim-extraction call per group; chunks no claim cites fall back to a quoted sentence.

    ``texts``: the passage to quote per chunk (default: the whole chunk).
    """
    prompt = load_prompt("map_claims", qs.prompts.map_claims)
    schema = claims_schema(qs.max_claims_per_group)
    batch = [
        prompt.messages(
            question=subquery_text,
            concepts=quote_passage(", ".join(group.topics)) or "(none)",  # concept names come from documents
            passages=render_passages(snapshot, group.chunks, texts),
            max_claims=str(qs.max_claims_per_group),
        )
        for group in groups
    ]
    claims: list[Claim] = []
    for group, reply in zip(groups, _extract_all(client, batch, qs.map_max_tokens, schema), strict=True):
        try:
            data = reply.json() if reply is not None else None
        except LLMError:
            data = None
        found = [
            claim
            for claim in parse_claims(data, group, snapshot, subquery)
            if any(grounded(claim.text, _quoted(snapshot, c, texts)) for c in claim.chunks)
        ]
        # A chunk the relevance test accepted but no claim cites still reaches the claim pool, through its
        # sentence closest to the subquery (small models often extract from one passage of several).
        cited = {chunk for claim in found for chunk in claim.chunks}
        missing = MapGroup(group.community, [c for c in group.chunks if c not in cited], group.topics)
        claims.extend(found + extractive_claims(snapshot, missing, subquery_text, subquery))
    return claims


def _extract_all(
    client: LLMClient, batch: list[list[dict[str, str]]], max_tokens: int, schema: dict[str, Any]
) -> list[ChatResult | None]:
    """Every group's reply, as one batch, so a batching backend (vLLM, an OpenAI-compatible server)
    runs them at once; if the batch fails, each call alone, so one failure costs only its group."""
    if not batch:
        return []
    try:
        return list(client.chat_batch(batch, max_tokens=max_tokens, json_schema=schema))
    except LLMError:
        replies: list[ChatResult | None] = []
        for messages in batch:
            try:
                replies.append(client.chat(messages, max_tokens=max_tokens, json_schema=schema))
            except LLMError:
                replies.append(None)
        return replies


# ---- ranking and the context cut -------------------------------------------------------------------
def merge_duplicates(claims: list[Claim]) -> list[Claim]:
    """Claims with the same text (case and spacing aside) become one, with the union of their sources."""
    merged: dict[str, Claim] = {}
    for claim in claims:
        key = " ".join(claim.text.lower().split())
        if key in merged:
            kept = merged[key]
            kept.chunks = list(dict.fromkeys(kept.chunks + claim.chunks))
            kept.extracted = kept.extracted and claim.extracted
        else:
            merged[key] = claim
    return list(merged.values())


def rank_claims(
    claims: list[Claim],
    claim_vectors: np.ndarray,
    subquery_vectors: np.ndarray,
    chunk_relevance: dict[int, float],
    qs: QuerySettings,
) -> list[Claim]:
    """Claims best first; each pick lowers the score of claims from the same community (diversity)."""
    if not claims:
        return []
    own = np.array([c.subquery for c in claims])
    similarity = np.einsum("ij,ij->i", claim_vectors, subquery_vectors[own])
    support = np.array([len(c.chunks) - 1 for c in claims], dtype=np.float64)
    relevance = np.array([max(chunk_relevance.get(ch, 0.0) for ch in c.chunks) for c in claims])
    extracted = np.array([c.extracted for c in claims], dtype=np.float64)
    base = (
        similarity
        + qs.claim_support_weight * support
        + qs.claim_relevance_weight * relevance
        - EXTRACTED_PENALTY * extracted
    )
    communities = np.array([c.community for c in claims])
    picked_per_community: dict[int, int] = {}
    remaining = np.ones(len(claims), dtype=bool)
    ranked: list[Claim] = []
    for _ in range(len(claims)):
        penalty = np.array([picked_per_community.get(int(c), 0) for c in communities], dtype=np.float64)
        score = np.where(remaining, base - qs.claim_diversity_penalty * penalty, -np.inf)
        best = int(np.argmax(score))
        remaining[best] = False
        claims[best].score = float(score[best])
        picked_per_community[int(communities[best])] = picked_per_community.get(int(communities[best]), 0) + 1
        ranked.append(claims[best])
    return ranked


def fit_to_context(claims: list[Claim], limit: int, count_tokens: Callable[[str], int]) -> list[Claim]:
    """The ranked claims that fit in ``limit`` tokens (a claim too long to fit is skipped, not cut)."""
    kept, used = [], 0
    for claim in claims:
        claim.tokens = claim.tokens or count_tokens(render_claim(len(kept) + 1, claim))
        if used + claim.tokens <= limit:
            kept.append(claim)
            used += claim.tokens
    return kept


def render_claim(number: int, claim: Claim) -> str:
    """The claim as the answer prompt quotes it (so the context cut counts the tokens it will cost)."""
    return render_fact(number, claim.text)
