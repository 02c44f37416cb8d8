"""Reduce: the answer to the user's question from the mapped claims with their evidence, every
sentence citing its sources.

The model reads numbered sources (``lazygraph.query.evidence``): each a chunk's title and the
sentences the map step read, then the claims drawn from them, so the answer is read off the text and
a claim that paraphrased or lost a negation is corrected by its own sentences. The user's question
leads the prompt (v4), and v5 names each thing a question asks at once ("what did it recommend, and
who led it?") and asks a sentence for each; the expanded query only says what a complete answer
covers. Earlier versions answered the expanded query (v2) or showed the question beside it (v3): a
refinement that guessed a premise then reached the answer.

A global question gets a report (``report_answer``, prompt ``reduce_global``): one call per theme
group (the sources of one level-1 community), each writing a title and a few cited sentences from its
own handful of sources, the themes that said something making the report.

The reply is a structured answer (``lazygraph.query.answer``): cited sentences, their facts resolved to
chunk ids, titles and excerpts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from lazygraph.errors import LLMError
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt, quote_passage
from lazygraph.nlp.stance import load_stance_parser
from lazygraph.query.answer import (
    Answer,
    CitedSentence,
    answer_schema,
    attach_sources,
    names_in_sources,
    parse_sentences,
    recite,
    render_fact,
    render_facts,
    reply_title,
    stances_in_sources,
    structured_answer,
    supported,
    unrepeated,
)
from lazygraph.query.evidence import Evidence, theme_topics
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import QuerySettings


def render_evidence(number: int, item: Evidence) -> str:
    """One numbered source of the reduce context (an ``Evidence``: sentences, then claims) in its tags;
    the context cut counts the tokens this costs."""
    return render_fact(number, item.text)


def render_context(items: Sequence[Evidence], snapshot: IndexSnapshot, themed: bool) -> str:
    """The numbered sources; for a global answer, under a header per theme naming its top concepts."""
    if not themed:
        return "\n".join(render_evidence(n, item) for n, item in enumerate(items, start=1))
    lines: list[str] = []
    theme: int | None = None
    for n, item in enumerate(items, start=1):
        if item.theme != theme or not lines:
            theme = item.theme
            topics = ", ".join(theme_topics(snapshot, item.theme)) or "other"
            lines.append(
                f"Theme group {sum(1 for line in lines if line.startswith('Theme group')) + 1} "
                f"(topics: {quote_passage(topics)}):"
            )
        lines.append(render_evidence(n, item))
    return "\n".join(lines)


def reduce_answer(
    question: str,
    evidence: Sequence[Evidence],
    snapshot: IndexSnapshot,
    client: LLMClient,
    qs: QuerySettings,
    *,
    expanded_query: str | None = None,
    subqueries: Sequence[str] = (),
    scope: str = "local",
) -> Answer:
    """The answer to the user's ``question`` over the numbered evidence (``Evidence`` items: the
    sentences of a chunk and the claims drawn from them), the expanded query a guide to what to cover.

    A global question (``scope``) gets a report organised by theme (``report_answer``).
    """
    if scope == "global":
        return report_answer(question, evidence, snapshot, client, qs)
    expanded = expanded_query or question
    prompt = load_prompt("reduce", qs.prompts.reduce)
    parts = question_parts(question) if prompt.version >= 5 else [question]
    messages = prompt.messages(
        evidence=render_context(evidence, snapshot, themed=False),
        claims=render_context(evidence, snapshot, themed=False),  # the placeholder of v1-v3
        question=question if prompt.version >= 4 else expanded,
        user_question=question,
        expanded_query=expanded,
        subqueries="; ".join(subqueries) or question,
        parts=_parts_line(parts),
        max_facts=str(qs.max_facts_per_sentence),
    )
    schema = answer_schema(
        len(evidence), qs.max_facts_per_sentence, qs.answer_max_sentences, qs.answer_sentence_max_chars
    )
    # a sentence for every part the question asks (the grammar holds the model to it)
    schema["properties"]["sentences"]["minItems"] = min(len(parts), qs.answer_max_sentences)
    return structured_answer(
        client,
        messages,
        schema,
        qs.answer_max_tokens,
        [item.chunks for item in evidence],
        [item.text for item in evidence],
        snapshot,
        qs,
    )


# Where a question asks a second thing: ", and who ...", "; when ...".
_PART_BREAK = re.compile(
    r"(?:,\s*|;\s*|\s+)(?:and|but|also)\s+(?=(?:who|whom|what|when|where|which|why|how)\b)"
    r"|;\s*(?=(?:who|whom|what|when|where|which|why|how)\b)",
    re.IGNORECASE,
)


def question_parts(question: str) -> list[str]:
    """The questions a question asks at once ("What did the review recommend, and who led it?": two),
    each to be answered by a sentence of its own; a single question is one part."""
    parts = [p.strip(" ,;?") for p in _PART_BREAK.split(question.strip()) if p.strip(" ,;?")]
    return [f"{p}?" for p in parts] if len(parts) > 1 else [question.strip()]


def _parts_line(parts: Sequence[str]) -> str:
    if len(parts) < 2:
        return ""
    listed = " ".join(f"({n}) {p}" for n, p in enumerate(parts, start=1))
    return f"It asks {len(parts)} things; answer each in a sentence of its own: {listed}\n"


# What a global question's answer says when no theme's sources bore on it.
NO_REPORT = "The sources found for this question do not bear on it, so no report is given."


def report_answer(
    question: str,
    evidence: Sequence[Evidence],
    snapshot: IndexSnapshot,
    client: LLMClient,
    qs: QuerySettings,
) -> Answer:
    """A global question's report: one call per theme group (the sources of one level-1 community, in
    the order the context holds them), each writing a title and a few cited sentences from its own
    sources, all sent as one batch; the themes that said something, in order, make the report.

    A small model given every theme at once writes one or two themes and repeats itself; given one
    theme's few sources it states what they say. So, as in GraphRAG's global search, the answer is
    mapped over communities, here the communities the search reached."""
    groups: dict[int, list[Evidence]] = {}
    for item in evidence:
        groups.setdefault(item.theme, []).append(item)
    chosen = _theme_parts(list(groups.values()), qs.report_sources_per_theme, qs.report_max_themes)
    prompt = load_prompt("reduce_global", qs.prompts.reduce_global)
    read = [[_report_text(item, snapshot) for item in group] for group in chosen]
    batch = [
        prompt.messages(
            evidence=render_facts(texts),
            topics=quote_passage(", ".join(theme_topics(snapshot, group[0].theme)) or "various"),
            question=question,
            max_sentences=str(qs.report_sentences_per_theme),
            max_facts=str(qs.max_facts_per_sentence),
        )
        for group, texts in zip(chosen, read, strict=True)
    ]
    # v2 asks a sentence of every source: the grammar holds the model to as many as the theme has sources
    # (a small model otherwise writes one sentence about the first source and stops).
    at_least = (lambda group: len(group)) if prompt.version >= 2 else (lambda group: 0)
    schemas = [theme_schema(len(g), qs, at_least(g)) for g in chosen]
    replies = _theme_replies(client, batch, schemas, qs.report_max_tokens)
    sentences: list[CitedSentence] = []
    fact_chunks: list[Sequence[int]] = []
    fact_texts: list[str] = []
    for group, texts, reply in zip(chosen, read, replies, strict=True):
        title, said = _theme_sentences(
            reply, len(group), qs.max_facts_per_sentence, qs.answer_sentence_max_chars
        )
        recite(said, [item.text for item in group])
        said = supported(said, [item.text for item in group], qs.report_min_support)
        if qs.report_names_in_sources:
            said = names_in_sources(said, texts)  # the texts as the model read them, titles included
        if qs.report_stances_in_sources and said:
            parser = load_stance_parser(qs.stance_model)
            said = stances_in_sources(said, [item.text for item in group], parser)
        if not title or _echoes(title, question):  # a small model titles a theme with the question
            title = _source_title(snapshot, said, group) or (
                ", ".join(theme_topics(snapshot, group[0].theme)[:3]).capitalize() or "Other"
            )
        offset = len(fact_chunks)
        for sentence in said:
            sentence.theme = title
            sentence.facts = [f + offset for f in sentence.facts]
        sentences += said
        fact_chunks += [item.chunks for item in group]
        fact_texts += [item.text for item in group]
    sentences = unrepeated(sentences)
    if not sentences:
        sentences = [CitedSentence(NO_REPORT, [])]
    return attach_sources(sentences, fact_chunks, fact_texts, snapshot, qs.max_sources_per_sentence)


_WORD = re.compile(r"\w+", re.UNICODE)


def _echoes(title: str, question: str) -> bool:
    """Whether most of a title's words are the question's."""
    said = {w.lower() for w in _WORD.findall(question)}
    words = [w.lower() for w in _WORD.findall(title) if len(w) > 2]
    return bool(words) and sum(w in said for w in words) >= 0.6 * len(words)


def _theme_parts(groups: list[list[Any]], size: int, limit: int) -> list[list[Any]]:
    """The theme groups cut into parts of at most ``size`` sources (a small model reads a handful of
    sources closely and skims a dozen), at most ``limit`` of them: every theme's first part before any
    theme's second, so the report spreads over themes; returned in theme order."""
    parts = [[group[i : i + size] for i in range(0, len(group), size)] for group in groups]
    picked = sorted(
        ((round_, theme) for theme, group_parts in enumerate(parts) for round_ in range(len(group_parts))),
    )[:limit]
    return [parts[theme][round_] for round_, theme in sorted(picked, key=lambda rt: (rt[1], rt[0]))]


def _report_text(item: Evidence, reader: IndexSnapshot) -> str:
    """A source as a theme call reads it: its sentences first and its document's title after them (a
    small model asked for a sentence per source copies each source's first line, and a title first made
    it write headlines: "A smaller exclusion zone" for the agreement that source states)."""
    title, newline, sentences = item.passage.partition("\n")
    if not newline or not sentences.strip() or title != reader.chunk_records([item.chunk])[0].title:
        return item.text
    claims = item.text[len(item.passage) :]  # "\nClaims drawn from it: ..." or nothing
    return f'{sentences.strip()}\n(From the document "{title.strip()}".){claims}'


def _source_title(reader: IndexSnapshot, said: Sequence[CitedSentence], group: Sequence[Evidence]) -> str:
    """The document title of the source the theme's first sentence cites (or of its first source): a
    person's words for what the theme is about, where a list of top concepts reads as noise."""
    item = group[said[0].facts[0] - 1] if said and said[0].facts else group[0]
    if not item.chunks:
        return ""
    return reader.chunk_records([item.chunks[0]])[0].title


def theme_schema(n_facts: int, qs: QuerySettings, at_least: int = 0) -> dict[str, Any]:
    """JSON schema of one theme of a report: a title and up to a few cited sentences, at least
    ``at_least`` of them (capped by the sentences allowed; 0: the model may write none, when the theme's
    sources do not bear on the question)."""
    sentences = answer_schema(
        n_facts, qs.max_facts_per_sentence, qs.report_sentences_per_theme, qs.answer_sentence_max_chars
    )["properties"]["sentences"]
    sentences["minItems"] = min(at_least, qs.report_sentences_per_theme)
    return {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 80}, "sentences": sentences},
        "required": ["title", "sentences"],
    }


def _theme_replies(
    client: LLMClient, batch: list[list[dict[str, str]]], schemas: list[dict[str, Any]], max_tokens: int
) -> list[str]:
    """Each theme's reply text ("" for a call that failed: that theme is left out of the report).

    One batch call takes one schema, and a theme's schema depends on its number of sources (the facts
    it may cite, the sentences it must write), so the themes are sent in one batch per distinct schema."""
    replies = [""] * len(batch)
    by_schema: dict[str, list[int]] = {}
    for i, schema in enumerate(schemas):
        by_schema.setdefault(json.dumps(schema, sort_keys=True), []).append(i)
    for members in by_schema.values():
        schema = schemas[members[0]]
        try:
            answered = client.chat_batch(
                [batch[i] for i in members], max_tokens=max_tokens, json_schema=schema
            )
            for i, result in zip(members, answered, strict=True):
                replies[i] = result.text
        except LLMError:
            for i in members:
                try:
                    replies[i] = client.chat(batch[i], max_tokens=max_tokens, json_schema=schema).text
                except LLMError:
                    replies[i] = ""
    return replies


def _theme_sentences(
    reply: str, n_facts: int, max_facts: int, max_chars: int | None = None
) -> tuple[str, list[CitedSentence]]:
    """A theme's title and sentences from its reply (unreadable: no sentences, the theme left out)."""
    if not reply.strip():
        return "", []
    return reply_title(reply), parse_sentences(reply, n_facts, max_facts, max_chars)
