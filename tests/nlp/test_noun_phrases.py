"""Noun phrases from the dependency parse and from part-of-speech rules, with the real spaCy model."""

from __future__ import annotations

import pytest

from lazygraph.nlp.extract import doc_concepts, load_pipeline, merge_kinds, noun_phrases
from lazygraph.settings import ConceptSettings

TEXT = (
    "The Halvard University Marine Station reviewed the tidal turbines of the Avel Estuary. "
    "Its report recommended a smaller first phase and strict monitoring of harbour porpoises."
)


def concepts(mode: str, use_entities: bool = True) -> tuple[set[str], list[str]]:
    cfg = ConceptSettings(noun_phrases=mode, use_entities=use_entities)
    nlp = load_pipeline(cfg.spacy_model, cfg.use_entities, mode)
    doc = nlp(TEXT)
    return set(merge_kinds(doc_concepts(doc, cfg, noun_phrases(doc, nlp)))), nlp.pipe_names


@pytest.mark.parametrize("mode", ["parser", "pos_rules"])
def test_both_ways_find_the_noun_phrases(mode: str) -> None:
    found, pipes = concepts(mode, use_entities=False)
    assert {"tidal turbine", "smaller first phase", "strict monitoring", "harbour porpoise"} <= found
    assert {"halvard university marine station", "avel estuary"} <= found
    assert ("parser" in pipes) == (mode == "parser")
    assert not {"its report", "the", "its"} & found


def test_pos_rules_take_the_longest_phrase_once() -> None:
    found, _ = concepts("pos_rules", use_entities=False)
    # A shorter run inside a longer one is not a concept of its own.
    assert "university marine station" not in found and "marine station" not in found
