"""What every search method's answer is: cited sentences and the sources they cite.

The answer model replies in JSON, constrained by a schema (a grammar on llama.cpp, structured output on
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
from dataclasses import dataclass, field, replace
from typing import Any

from lazygraph.errors import LLMError
from lazygraph.lexical import tokenize
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import quote_passage
from lazygraph.query.reader import ChunkRef, IndexReader
from lazygraph.settings import AnswerSettings

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


def parse_sentences(
    text: str, n_facts: int, max_facts: int, max_chars: int | None = None
) -> list[CitedSentence]:
    """Sentences from the model's JSON (a list of sentences), or from prose with [F1]-style labels when
    it ignored the schema.

    A JSON reply that does not parse (cut off at ``max_tokens``, or malformed by a server that ignored
    the schema) keeps its complete sentence objects, else the text of its closed ``"text"`` strings;
    it is never read as prose, which would show the user raw JSON. Nothing readable gives [].
    ``max_chars``: the schema's longest sentence; a text that long was stopped by the grammar, so it
    keeps only its complete sentences (``whole_sentences``)."""
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
        if max_chars is not None and len(sentence) >= max_chars:
            sentence = whole_sentences(sentence)
        # A small model that loops writes the same sentence again; the reader needs it once.
        cited = sentences.setdefault(
            " ".join(sentence.lower().split()), CitedSentence(sentence, [], theme=theme)
        )
        cited.facts = _unique(cited.facts + facts)[:max_facts]
    return list(sentences.values())


def whole_sentences(text: str) -> str:
    """``text`` less the sentence it ends inside of: a model that copies several sentences of a source
    into one answer sentence runs into the schema's ``maxLength``, and the grammar stops it mid-word
    ("... of the Avel Tidal Array. Mayor G"). A text with no complete sentence is kept, marked cut."""
    from lazygraph.query.focus import split_sentences

    if text.rstrip().rstrip("\"')]").endswith((".", "!", "?")):
        return text
    parts = split_sentences(text)
    if len(parts) > 1:
        return " ".join(parts[:-1])
    return text.rstrip() + " …"


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


def reply_title(reply: str) -> str:
    """The ``"title"`` a JSON reply gives, read even from a reply cut off after it ("" if none), its
    whitespace collapsed and a trailing full stop or colon dropped."""
    match = _TITLE.search(reply)
    return " ".join(_unescape(match.group(1)).split()).rstrip(".:") if match else ""


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


# A cited fact set holding at least this share of what the best single fact holds of a sentence's
# terms stands; below it the sentence is re-pointed (``recite``).
CITATION_SUPPORT = 0.8
# Under this share of its terms in any one fact a sentence is a synthesis: its citations are left alone.
CITATION_FLOOR = 0.5


def recite(sentences: Sequence[CitedSentence], fact_texts: Sequence[str]) -> None:
    """Point each sentence at the facts its words come from, in place.

    A small model copies a sentence from one source and cites the number of its neighbour (the demo's
    "voted nine to four", word for word in one source, cited to another). Where one fact holds clearly
    more of a sentence's terms (``lexical.tokenize``) than all the facts it cites together, that fact
    is cited instead. A sentence no fact holds half of (a summary across facts) keeps the model's
    citations, as does an uncited one."""
    fact_terms = [set(tokenize(text)) for text in fact_texts]
    for sentence in sentences:
        terms = set(tokenize(sentence.text))
        if not sentence.facts or not terms or not fact_terms:
            continue
        share = [len(terms & facts) / len(terms) for facts in fact_terms]
        best = max(range(len(share)), key=share.__getitem__)
        cited = set().union(*(fact_terms[f - 1] for f in sentence.facts))
        if share[best] < CITATION_FLOOR or len(terms & cited) / len(terms) >= CITATION_SUPPORT * share[best]:
            continue
        sentence.facts = [best + 1]


def supported(
    sentences: Sequence[CitedSentence], fact_texts: Sequence[str], floor: float
) -> list[CitedSentence]:
    """The sentences whose cited facts together hold at least ``floor`` of their terms: a sentence the
    model wrote to fill a slot, from the question's words rather than its sources, holds few."""
    fact_terms = [set(tokenize(text)) for text in fact_texts]
    kept = []
    for sentence in sentences:
        terms = set(tokenize(sentence.text))
        cited = set().union(*(fact_terms[f - 1] for f in sentence.facts if 0 < f <= len(fact_terms)))
        share = len(terms & cited) / len(terms) if terms else 0.0
        if share >= floor:
            kept.append(sentence)
    return kept


def names_in_sources(sentences: Sequence[CitedSentence], fact_texts: Sequence[str]) -> list[CitedSentence]:
    """The sentences whose every name is in a source they cite. A name is a capitalised word after a
    sentence's first; it counts as present when the cited sources hold the word in any case.

    Term support (``supported``) weighs every word alike, so a sentence copied from its source with
    one person swapped for another keeps nearly all its terms: the demo's report once wrote "Dr. Priya
    Nandakumar and Dr. Tomasz Wren tagged fifty young sea trout", citing the source in which Wren and
    his student Lucy Harrow did. A name is the word a reader trusts most and checks least, so a
    sentence naming anyone or anything its sources do not is dropped, not re-pointed: the source
    that holds the name rarely holds the rest of the sentence."""
    fact_words = [{w.lower() for w in _WORD.findall(text)} for text in fact_texts]
    kept = []
    for sentence in sentences:
        names = {w.lower() for w in _WORD.findall(sentence.text)[1:] if w[0].isupper()}
        cited = set().union(*(fact_words[f - 1] for f in sentence.facts if 0 < f <= len(fact_words)))
        if names <= cited:
            kept.append(sentence)
    return kept


def stances_in_sources(
    sentences: Sequence[CitedSentence], fact_texts: Sequence[str], nlp: Any
) -> list[CitedSentence]:
    """The sentences that state each of their actions as the source sentence they were written from
    does: done, or not done.

    For every verb a sentence states as done or not done (``nlp.stance``), the source sentences
    holding the same verb are found among all ``fact_texts`` (the sources the model read), and of those
    the ones sharing most of the sentence's content words are taken as the ones it was written from
    (a cited one wins a tie; an uncited one counts only where the sentence holds most of its words);
    where none of them gives the verb the same stance the sentence is
    dropped. "The council approved the remaining four turbines", written from "Brightwater Tidal
    asked the council to approve the remaining four turbines", is dropped; so is "the review
    recommended refusal" from "the review did not recommend refusal", and "the council decided on the
    second phase" from "the council must still decide on the second phase" even where the model cited
    another source (it does). A verb no source uses leaves the sentence alone: a paraphrase cannot be
    judged this way. ``nlp`` is a spaCy pipeline with a tagger, parser and lemmatizer
    (``load_stance_parser``)."""
    from lazygraph.nlp.stance import stated_verbs

    fact_sentences = [list(doc.sents) for doc in nlp.pipe(fact_texts)]
    kept = []
    for sentence, doc in zip(sentences, nlp.pipe([s.text for s in sentences]), strict=True):
        cited = {f for f in sentence.facts if 0 < f <= len(fact_sentences)}
        sources = [(s, n in cited) for n, sents in enumerate(fact_sentences, start=1) for s in sents]
        held = all(
            _stance_held(part, lemma, stance, sources)
            for part in doc.sents
            for lemma, stance in stated_verbs(part)
        )
        if held:
            kept.append(sentence)
    return kept


_CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM"})


def _content_lemmas(span: Any) -> set[str]:
    return {t.lemma_.lower() for t in span if t.pos_ in _CONTENT_POS and not t.is_stop}


def _stance_held(sentence: Any, lemma: str, stance: Any, sources: Sequence[tuple[Any, bool]]) -> bool:
    """Whether the source sentences closest to ``sentence`` among those using the verb ``lemma`` give it
    ``stance``; ``sources`` pairs each source sentence with whether the sentence cites it."""
    from lazygraph.nlp.stance import verb_stances

    words = _content_lemmas(sentence)
    candidates = []
    for source, is_cited in sources:
        stances = verb_stances(source, lemma)
        if not stances:
            continue
        source_words = _content_lemmas(source) - {lemma}
        shared = words & source_words
        # An uncited sentence counts only where the answer holds most of it (the model copied it and
        # cited another source); one merely sharing the verb was not what the model wrote from.
        if is_cited or (shared and len(shared) >= len(source_words) / 2):
            candidates.append(((len(shared), is_cited), stances))
    if not candidates:
        return True
    closest = max(rank for rank, _ in candidates)
    return any(stance in stances for rank, stances in candidates if rank == closest)


def unrepeated(sentences: Sequence[CitedSentence]) -> list[CitedSentence]:
    """The sentences less what repeats earlier words: a report written one theme at a time can state
    the same sentence under two themes (two sources hold it), or end two of its sentences with the
    same one, and a reader gains nothing from reading it twice. An answer sentence that holds several
    (the model may write two in one) loses those already stated; one left with nothing is dropped. The
    first keeps its place and its citations."""
    from lazygraph.query.focus import split_sentences

    seen: set[tuple[str, ...]] = set()
    kept = []
    for sentence in sentences:
        parts = split_sentences(sentence.text) or [sentence.text]
        fresh = []
        for part in parts:
            words = tuple(w.lower() for w in _WORD.findall(part))
            if words and words in seen:
                continue
            seen.add(words)
            fresh.append(part)
        if not fresh:
            continue
        if len(fresh) < len(parts):
            sentence = replace(sentence, text=" ".join(fresh))
        kept.append(sentence)
    return kept


def attach_sources(
    sentences: list[CitedSentence],
    fact_chunks: Sequence[Sequence[ChunkRef]],
    fact_texts: Sequence[str],
    reader: IndexReader,
    max_sources: int,
) -> Answer:
    """Map each sentence's facts to chunk ids (capped) and resolve every cited chunk to an excerpt."""
    sources: dict[ChunkRef, Source] = {}
    for sentence in sentences:
        chunks = _unique([ch for f in sentence.facts for ch in fact_chunks[f - 1]])[:max_sources]
        records = reader.chunk_records(chunks)
        sentence.chunk_ids = [record.chunk_id for record in records]
        for ch, record in zip(chunks, records, strict=True):
            if ch not in sources:
                cited_for = " ".join(fact_texts[f - 1] for f in sentence.facts if ch in fact_chunks[f - 1])
                sources[ch] = Source(
                    chunk_id=record.chunk_id,
                    doc_id=record.doc_id,
                    title=record.title,
                    excerpt=best_excerpt(record.text, cited_for or sentence.text),
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


def structured_answer(
    client: LLMClient,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
    fact_chunks: Sequence[Sequence[ChunkRef]],
    fact_texts: Sequence[str],
    reader: IndexReader,
    qs: AnswerSettings,
) -> Answer:
    """One structured answer call (a list of cited sentences), its facts resolved to chunks,
    titles and excerpts. A reply that cannot be read as the schema is never shown raw: its complete
    sentences are kept, and with none the call is made once more with twice the tokens."""
    sentences: list[CitedSentence] = []
    for attempt in range(2):
        result = client.chat(messages, max_tokens=max_tokens * (attempt + 1), json_schema=schema)
        sentences = parse_sentences(
            result.text, len(fact_chunks), qs.max_facts_per_sentence, qs.answer_sentence_max_chars
        )
        if sentences:
            break
    if not sentences:
        sentences = [CitedSentence(UNREADABLE_ANSWER, [])]
    recite(sentences, fact_texts)
    return attach_sources(sentences, fact_chunks, fact_texts, reader, qs.max_sources_per_sentence)
