"""Reduce: the answer to the user's question from the mapped claims with their evidence, every
sentence citing its sources.

The model reads numbered sources (``lazygraph.query.evidence``): each a chunk's title and the
sentences the map step read, then the claims drawn from them, so the answer is read off the text and
a claim that paraphrased or lost a negation is corrected by its own sentences. The user's question
leads the prompt (v4); the expanded query only says what a complete answer covers. Earlier versions
answered the expanded query (v2) or showed the question beside it (v3): a refinement that guessed a
premise then reached the answer. A global question gets a report (``reduce_global``): a few themes,
each drawn from its own group of sources (the level-1 community of their chunks), every sentence cited.

The reply is a structured answer (``lazygraph.query.answer``): cited sentences, their facts resolved to
chunk ids, titles and excerpts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt, quote_passage
from lazygraph.query.answer import Answer, answer_schema, render_fact, structured_answer
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

    A global question (``scope``) gets a report organised by theme, each theme a few cited sentences.
    """
    expanded = expanded_query or question
    if scope == "global":
        prompt = load_prompt("reduce_global", qs.prompts.reduce_global)
        messages = prompt.messages(
            evidence=render_context(evidence, snapshot, themed=True),
            question=question,
            expanded_query=expanded,
            min_themes=str(min(2, qs.report_max_themes)),
            max_themes=str(qs.report_max_themes),
            max_sentences=str(qs.report_sentences_per_theme),
            max_facts=str(qs.max_facts_per_sentence),
        )
        schema = report_schema(len(evidence), qs)
        max_tokens = qs.report_max_tokens
    else:
        prompt = load_prompt("reduce", qs.prompts.reduce)
        messages = prompt.messages(
            evidence=render_context(evidence, snapshot, themed=False),
            claims=render_context(evidence, snapshot, themed=False),  # the placeholder of v1-v3
            question=question if prompt.version >= 4 else expanded,
            user_question=question,
            expanded_query=expanded,
            subqueries="; ".join(subqueries) or question,
            max_facts=str(qs.max_facts_per_sentence),
        )
        schema = answer_schema(
            len(evidence), qs.max_facts_per_sentence, qs.answer_max_sentences, qs.answer_sentence_max_chars
        )
        max_tokens = qs.answer_max_tokens
    return structured_answer(
        client,
        messages,
        schema,
        max_tokens,
        [item.chunks for item in evidence],
        [item.text for item in evidence],
        snapshot,
        qs,
    )


def report_schema(n_facts: int, qs: QuerySettings) -> dict[str, Any]:
    """JSON schema of a report: themes, each a title and a few cited sentences."""
    sentences = answer_schema(
        n_facts, qs.max_facts_per_sentence, qs.report_sentences_per_theme, qs.answer_sentence_max_chars
    )["properties"]["sentences"]
    return {
        "type": "object",
        "properties": {
            "themes": {
                "type": "array",
                "minItems": 1,
                "maxItems": qs.report_max_themes,
                "items": {
                    "type": "object",
                    "properties": {"title": {"type": "string", "maxLength": 80}, "sentences": sentences},
                    "required": ["title", "sentences"],
                },
            }
        },
        "required": ["themes"],
    }
