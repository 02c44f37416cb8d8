"""Reduce: the answer to the expanded query from the mapped claims, every sentence citing its facts.

Prompt v2 shows the model the expanded query alone, as the method describes; v3 shows the user's
question with the expanded query beside it, so that the refinement's rewording cannot replace the
entity or attribute the user asked for.

The model answers in JSON, constrained by a schema (a grammar on llama.cpp, structured output on
OpenAI-compatible servers and vLLM): a list of sentences, each with the numbers of the facts it
uses. Fact numbers outside 1..n cannot be produced, and a sentence may cite at most
``max_facts_per_sentence`` facts, so citations can neither be lost nor balloon into "everything".
Each sentence then carries the chunk ids behind its facts (at most ``max_sources_per_sentence``),
written in the contract's ``[Data: Sources (chunk ids)]`` form, and every cited chunk is resolved to
its document title and the excerpt that best matches what it was cited for.

A backend that ignores the schema and answers in prose still works: ``[F1]``-style labels are read
from the text, and a sentence without one stays uncited. When nothing relevant was found no model is
called: the answer says so plainly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lazygraph.errors import LLMError
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt, quote_passage
from lazygraph.query.snapshot import IndexSnapshot

_LABEL_GROUP = re.compile(r"\[\s*((?:[SF]?\s*\d+\s*[,;]?\s*)+)\]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)
_FACT_TAG = re.compile(r"<(/?fact)", re.IGNORECASE)
EXCERPT_CHARS = 240


@dataclass
class CitedSentence:
    text: str
    facts: list[int]  # 1-based numbers of the facts (or passages) the sentence cites
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class Source:
    chunk_id: str
    doc_id: str
    title: str
    excerpt: str

    def to_json(self) -> dict[str, str]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "title": self.title,
            "excerpt": self.excerpt,
        }


@dataclass
class Answer:
    """The answer as sentences with their sources, and as the contract's text with inline citations."""

    sentences: list[CitedSentence]
    sources: list[Source] = field(default_factory=list)

    @property
    def text(self) -> str:
        parts = []
        for s in self.sentences:
            cite = f" [Data: Sources ({', '.join(s.chunk_ids)})]" if s.chunk_ids else ""
            parts.append(f"{s.text}{cite}")
        return " ".join(parts)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"text": s.text, "source_chunk_ids": s.chunk_ids} for s in self.sentences]


def nothing_found_answer(relevance_tests: int, communities: int) -> str:
    return (
        "No relevant information was found in the index for this question "
        f"({relevance_tests} relevance tests over {communities} communities found no relevant text), "
        "so no answer is given."
    )


def answer_schema(
    n_facts: int, max_facts: int, max_sentences: int, max_chars: int | None = None
) -> dict[str, Any]:
    """JSON schema of a cited answer; fact numbers are an enum, so only real facts can be cited, and a
    sentence holds at most ``max_chars`` characters (None: no bound)."""
    text: dict[str, Any] = {"type": "string"}
    if max_chars is not None:
        text["maxLength"] = max_chars
    return {
        "type": "object",
        "properties": {
            "sentences": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_sentences,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": text,
                        "facts": {
                            "type": "array",
                            "items": {"type": "integer", "enum": list(range(1, n_facts + 1))},
                            "maxItems": max_facts,
                        },
                    },
                    "required": ["text", "facts"],
                },
            }
        },
        "required": ["sentences"],
    }


def parse_sentences(text: str, n_facts: int, max_facts: int) -> list[CitedSentence]:
    """Sentences from the model's JSON, or from prose with [F1]-style labels when it ignored the schema."""
    from lazygraph.llm.base import parse_json_text

    try:
        data = parse_json_text(text)
    except LLMError:
        data = {"sentences": _complete_items(text)}  # a reply cut off at max_tokens
    if isinstance(data, dict) and isinstance(data.get("sentences"), list):
        sentences: dict[str, CitedSentence] = {}
        for item in data["sentences"]:
            if not isinstance(item, dict) or not str(item.get("text", "")).strip():
                continue
            facts = [f for f in item.get("facts") or [] if isinstance(f, int) and 1 <= f <= n_facts]
            sentence = str(item["text"]).strip()
            # A small model that loops writes the same sentence again; the reader needs it once.
            cited = sentences.setdefault(" ".join(sentence.lower().split()), CitedSentence(sentence, []))
            cited.facts = _unique(cited.facts + facts)[:max_facts]
        if sentences:
            return list(sentences.values())
    return _sentences_from_prose(text, n_facts, max_facts)


def _complete_items(text: str) -> list[Any]:
    """The whole sentence objects at the head of a ``{"sentences": [...`` reply that was cut off."""
    key = text.find('"sentences"')
    start = text.find("[", key) if key >= 0 else -1
    if start < 0:
        return []
    decoder, items, at = json.JSONDecoder(), [], start + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return items
        items.append(item)


def _sentences_from_prose(text: str, n_facts: int, max_facts: int) -> list[CitedSentence]:
    sentences = []
    for raw in _SENTENCE_END.split(text.strip()):
        facts = [
            int(n)
            for group in _LABEL_GROUP.findall(raw)
            for n in _NUMBER.findall(group)
            if 1 <= int(n) <= n_facts
        ]
        clean = re.sub(r"\s+([.,;!?])", r"\1", _LABEL_GROUP.sub("", raw)).strip()
        if clean:
            sentences.append(CitedSentence(clean, _unique(facts)[:max_facts]))
    return sentences


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def attach_sources(
    sentences: list[CitedSentence],
    fact_chunks: Sequence[Sequence[int]],
    fact_texts: Sequence[str],
    snapshot: IndexSnapshot,
    max_sources: int,
) -> Answer:
    """Map each sentence's facts to chunk ids (capped) and resolve every cited chunk to an excerpt."""
    sources: dict[int, Source] = {}
    for sentence in sentences:
        chunks = _unique([ch for f in sentence.facts for ch in fact_chunks[f - 1]])[:max_sources]
        sentence.chunk_ids = [str(snapshot.chunk_ids[ch]) for ch in chunks]
        for ch in chunks:
            if ch not in sources:
                cited_for = " ".join(fact_texts[f - 1] for f in sentence.facts if ch in fact_chunks[f - 1])
                sources[ch] = Source(
                    chunk_id=str(snapshot.chunk_ids[ch]),
                    doc_id=str(snapshot.chunk_doc_ids[ch]),
                    title=str(snapshot.chunk_titles[ch] or ""),
                    excerpt=best_excerpt(str(snapshot.chunk_texts[ch]), cited_for or sentence.text),
                )
    return Answer(sentences, list(sources.values()))


def best_excerpt(chunk_text: str, cited_for: str, limit: int = EXCERPT_CHARS) -> str:
    """The chunk's sentence sharing most words with what it is cited for, cut to ``limit`` characters."""
    wanted = {w.lower() for w in _WORD.findall(cited_for)}
    candidates = [s.strip() for s in _SENTENCE_END.split(chunk_text) if s.strip()] or [chunk_text]
    best = max(candidates, key=lambda s: len(wanted & {w.lower() for w in _WORD.findall(s)}))
    return best if len(best) <= limit else best[: limit - 1].rstrip() + "…"


def render_fact(number: int, text: str) -> str:
    """One numbered fact inside its tags (fact and passage tags, chat-control look-alikes neutralised)."""
    quoted = quote_passage(_FACT_TAG.sub(r"‹\1", text))
    return f'<fact id="{number}">{quoted}</fact>'


def render_facts(texts: Sequence[str]) -> str:
    return "\n".join(render_fact(n, t) for n, t in enumerate(texts, start=1))


def cited_answer(
    client: LLMClient,
    messages: list[dict[str, str]],
    fact_chunks: Sequence[Sequence[int]],
    fact_texts: Sequence[str],
    snapshot: IndexSnapshot,
    *,
    max_tokens: int,
    max_facts: int,
    max_sentences: int,
    max_sources: int,
    max_sentence_chars: int | None = None,
) -> Answer:
    """One structured answer call; the cited facts resolved to chunks, titles and excerpts."""
    schema = answer_schema(len(fact_chunks), max_facts, max_sentences, max_sentence_chars)
    result = client.chat(messages, max_tokens=max_tokens, json_schema=schema)
    sentences = parse_sentences(result.text, len(fact_chunks), max_facts)
    return attach_sources(sentences, fact_chunks, fact_texts, snapshot, max_sources)


def reduce_answer(
    question: str,
    claims: Sequence[Any],
    snapshot: IndexSnapshot,
    client: LLMClient,
    *,
    max_tokens: int,
    max_facts: int,
    max_sentences: int,
    max_sources: int,
    prompt_version: int,
    max_sentence_chars: int | None = None,
    expanded_query: str | None = None,
) -> Answer:
    """The answer over the numbered claims (``Claim`` objects: ``text`` and source ``chunks``).

    ``question`` is the user's; ``expanded_query`` the refinement's (None or empty: the question).
    """
    prompt = load_prompt("reduce", prompt_version)
    texts = [c.text for c in claims]
    expanded = expanded_query or question
    messages = prompt.messages(
        claims=render_facts(texts),
        question=expanded,  # the placeholder of v1 and v2: the method answers the expanded query
        user_question=question,
        expanded_query=expanded,
        max_facts=str(max_facts),
    )
    return cited_answer(
        client,
        messages,
        [c.chunks for c in claims],
        texts,
        snapshot,
        max_tokens=max_tokens,
        max_facts=max_facts,
        max_sentences=max_sentences,
        max_sources=max_sources,
        max_sentence_chars=max_sentence_chars,
    )
