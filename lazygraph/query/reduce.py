"""Reduce: the answer to the user's question from the mapped claims with their evidence, every
sentence citing its sources.

The model reads numbered sources (``lazygraph.query.evidence``): each a chunk's title and the
sentences the map step read, then the claims drawn from them, so the answer is read off the text and
a claim that paraphrased or lost a negation is corrected by its own sentences. The user's question
leads the prompt (v4); the expanded query only says what a complete answer covers. Earlier versions
answered the expanded query (v2) or showed the question beside it (v3): a refinement that guessed a
premise then reached the answer. A global question gets a report (``reduce_global``): a few themes,
each drawn from its own group of sources (the level-1 community of their chunks), every sentence cited.

The model answers in JSON, constrained by a schema (a grammar on llama.cpp, structured output on
OpenAI-compatible servers and vLLM): a list of sentences, each with the numbers of the facts it
uses. Fact numbers outside 1..n cannot be produced, and a sentence may cite at most
``max_facts_per_sentence`` facts, so citations can neither be lost nor balloon into "everything".
Each sentence then carries the chunk ids behind its facts (at most ``max_sources_per_sentence``),
written in the contract's ``[Data: Sources (chunk ids)]`` form, and every cited chunk is resolved to
its document title and the excerpt that best matches what it was cited for.

A backend that ignores the schema and answers in prose still works: ``[F1]``-style labels are read
from the text, and a sentence without one stays uncited. A JSON reply cut off or malformed keeps its
complete sentences and is never shown raw. When nothing relevant was found no model is called: the
answer says so plainly.
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
from lazygraph.settings import QuerySettings

_LABEL_GROUP = re.compile(r"\[\s*((?:[SF]?\s*\d+\s*[,;]?\s*)+)\]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)
_FACT_TAG = re.compile(r"<(/?fact)", re.IGNORECASE)
EXCERPT_CHARS = 240
# What the user reads when the model's reply could not be read twice (never the raw reply).
UNREADABLE_ANSWER = (
    "The answer model's reply could not be read as an answer; ask again, or raise query.answer_max_tokens."
)


@dataclass
class CitedSentence:
    text: str
    facts: list[int]  # 1-based numbers of the facts (or passages) the sentence cites
    chunk_ids: list[str] = field(default_factory=list)
    theme: str = ""  # the theme it belongs to, in a report answering a global question


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
        """The sentences with their citations; a report's themes each on a line of their own, titled."""
        paragraphs: list[tuple[str, list[str]]] = []
        for s in self.sentences:
            cite = f" [Data: Sources ({', '.join(s.chunk_ids)})]" if s.chunk_ids else ""
            if not paragraphs or paragraphs[-1][0] != s.theme:
                paragraphs.append((s.theme, []))
            paragraphs[-1][1].append(f"{s.text}{cite}")
        return "\n".join(
            f"{theme.rstrip('.:')}: {' '.join(parts)}" if theme else " ".join(parts)
            for theme, parts in paragraphs
        )

    @property
    def themes(self) -> list[str]:
        return list(dict.fromkeys(s.theme for s in self.sentences if s.theme))

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"text": s.text, "source_chunk_ids": s.chunk_ids, **({"theme": s.theme} if s.theme else {})}
            for s in self.sentences
        ]


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
    """Sentences from the model's JSON (a list of sentences, or themes of sentences), or from prose
    with [F1]-style labels when it ignored the schema.

    A JSON reply that does not parse (cut off at ``max_tokens``, or malformed by a server that ignored
    the schema) keeps its complete sentence objects, else the text of its closed ``"text"`` strings;
    it is never read as prose, which would show the user raw JSON. Nothing readable gives []."""
    from lazygraph.llm.base import parse_json_text

    try:
        data = parse_json_text(text)
    except LLMError:
        data = None
    items = _sentence_items(data) if data is not None else None
    if items is None and text.lstrip().startswith(("{", "[", "```")):
        items = _salvaged_items(text)
    if items is None:
        return _sentences_from_prose(text, n_facts, max_facts)
    sentences: dict[str, CitedSentence] = {}
    for item, theme in items:
        if not isinstance(item, dict) or not str(item.get("text", "")).strip():
            continue
        facts = [f for f in item.get("facts") or [] if isinstance(f, int) and 1 <= f <= n_facts]
        sentence = str(item["text"]).strip()
        # A small model that loops writes the same sentence again; the reader needs it once.
        cited = sentences.setdefault(
            " ".join(sentence.lower().split()), CitedSentence(sentence, [], theme=theme)
        )
        cited.facts = _unique(cited.facts + facts)[:max_facts]
    return list(sentences.values())


def _sentence_items(data: Any) -> list[tuple[Any, str]] | None:
    """(sentence object, theme) pairs of a parsed reply; None when it is not an answer."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("sentences"), list):
        return [(item, "") for item in data["sentences"]]
    return None


_TITLE = re.compile(r'"title"\s*:\s*"((?:[^"\\]|\\.)*)"')
_TEXT = re.compile(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _salvaged_items(text: str) -> list[tuple[Any, str]]:
    """What a broken JSON reply still says: every whole ``{"text": ..., "facts": [...]}`` object; failing
    that, every closed ``"text"`` string, uncited."""
    decoder = json.JSONDecoder()
    items: list[tuple[Any, str]] = []
    for match in re.finditer(r'\{\s*"text"', text):
        try:
            item, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        items.append((item, ""))
    if items:
        return items
    return [({"text": _unescape(raw), "facts": []}, "") for raw in _TEXT.findall(text)]


def _unescape(raw: str) -> str:
    try:
        return str(json.loads(f'"{raw}"'))
    except json.JSONDecodeError:
        return raw


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


def render_evidence(number: int, item: Any) -> str:
    """One numbered source of the reduce context (an ``Evidence``: sentences, then claims) in its tags;
    the context cut counts the tokens this costs."""
    return render_fact(number, item.text)


def render_context(items: Sequence[Any], snapshot: IndexSnapshot, themed: bool) -> str:
    """The numbered sources; for a global answer, under a header per theme naming its top concepts."""
    if not themed:
        return "\n".join(render_evidence(n, item) for n, item in enumerate(items, start=1))
    from lazygraph.query.evidence import theme_topics

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
    evidence: Sequence[Any],
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


def report_answer(
    question: str, evidence: Sequence[Any], snapshot: IndexSnapshot, client: LLMClient, qs: QuerySettings
) -> Answer:
    """A global question's report: one call per theme group (the sources of one level-1 community, in
    the order the context holds them), each writing a title and a few cited sentences from its own
    sources, all sent as one batch; the themes that said something, in order, make the report.

    A small model given every theme at once writes one or two themes and repeats itself; given one
    theme's few sources it states what they say. So, as in GraphRAG's global search, the answer is
    mapped over communities, here the communities the search reached."""
    groups: dict[int, list[Any]] = {}
    for item in evidence:
        groups.setdefault(item.theme, []).append(item)
    chosen = _theme_parts(list(groups.values()), qs.report_sources_per_theme, qs.report_max_themes)
    prompt = load_prompt("reduce_global", qs.prompts.reduce_global)
    from lazygraph.query.evidence import theme_topics

    batch = [
        prompt.messages(
            evidence=render_facts([item.text for item in group]),
            topics=quote_passage(", ".join(theme_topics(snapshot, group[0].theme)) or "various"),
            question=question,
            max_sentences=str(qs.report_sentences_per_theme),
            max_facts=str(qs.max_facts_per_sentence),
        )
        for group in chosen
    ]
    replies = _theme_replies(client, batch, [theme_schema(len(g), qs) for g in chosen], qs.report_max_tokens)
    sentences: list[CitedSentence] = []
    fact_chunks: list[Sequence[int]] = []
    fact_texts: list[str] = []
    for group, reply in zip(chosen, replies, strict=True):
        title, said = _theme_sentences(reply, len(group), qs.max_facts_per_sentence)
        if not title or _echoes(title, question):  # a small model titles a theme with the question
            title = ", ".join(theme_topics(snapshot, group[0].theme)[:3]).capitalize() or "Other"
        offset = len(fact_chunks)
        for sentence in said:
            sentence.theme = title
            sentence.facts = [f + offset for f in sentence.facts]
        sentences += said
        fact_chunks += [item.chunks for item in group]
        fact_texts += [item.text for item in group]
    if not sentences:
        sentences = [CitedSentence(NO_REPORT, [])]
    return attach_sources(sentences, fact_chunks, fact_texts, snapshot, qs.max_sources_per_sentence)


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


# What a global question's answer says when no theme's sources bore on it.
NO_REPORT = "The sources found for this question do not bear on it, so no report is given."


def theme_schema(n_facts: int, qs: QuerySettings) -> dict[str, Any]:
    """JSON schema of one theme of a report: a title and up to a few cited sentences (none: the theme's
    sources do not bear on the question)."""
    sentences = answer_schema(
        n_facts, qs.max_facts_per_sentence, qs.report_sentences_per_theme, qs.answer_sentence_max_chars
    )["properties"]["sentences"]
    sentences["minItems"] = 0
    return {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 80}, "sentences": sentences},
        "required": ["title", "sentences"],
    }


def _theme_replies(
    client: LLMClient, batch: list[list[dict[str, str]]], schemas: list[dict[str, Any]], max_tokens: int
) -> list[str]:
    """Each theme's reply text ("" for a call that failed: that theme is left out of the report).

    The themes' schemas differ only in how many sources they may cite; one batch call needs one schema,
    so the batch is sent with the largest and each reply's numbers are checked against its own theme."""
    if not batch:
        return []
    widest = max(
        schemas,
        key=lambda schema: len(
            schema["properties"]["sentences"]["items"]["properties"]["facts"]["items"]["enum"]
        ),
    )
    try:
        return [r.text for r in client.chat_batch(batch, max_tokens=max_tokens, json_schema=widest)]
    except LLMError:
        replies = []
        for messages, schema in zip(batch, schemas, strict=True):
            try:
                replies.append(client.chat(messages, max_tokens=max_tokens, json_schema=schema).text)
            except LLMError:
                replies.append("")
        return replies


def _theme_sentences(reply: str, n_facts: int, max_facts: int) -> tuple[str, list[CitedSentence]]:
    """A theme's title and sentences from its reply (unreadable: no sentences, the theme left out)."""
    if not reply.strip():
        return "", []
    title = ""
    match = _TITLE.search(reply)
    if match:
        title = " ".join(_unescape(match.group(1)).split()).rstrip(".:")
    return title, parse_sentences(reply, n_facts, max_facts)


def structured_answer(
    client: LLMClient,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
    fact_chunks: Sequence[Sequence[int]],
    fact_texts: Sequence[str],
    snapshot: IndexSnapshot,
    qs: QuerySettings,
) -> Answer:
    """One structured answer call (sentences, or themes of sentences), its facts resolved to chunks,
    titles and excerpts. A reply that cannot be read as the schema is never shown raw: its complete
    sentences are kept, and with none the call is made once more with twice the tokens."""
    sentences: list[CitedSentence] = []
    for attempt in range(2):
        result = client.chat(messages, max_tokens=max_tokens * (attempt + 1), json_schema=schema)
        sentences = parse_sentences(result.text, len(fact_chunks), qs.max_facts_per_sentence)
        if sentences:
            break
    if not sentences:
        sentences = [CitedSentence(UNREADABLE_ANSWER, [])]
    return attach_sources(sentences, fact_chunks, fact_texts, snapshot, qs.max_sources_per_sentence)
