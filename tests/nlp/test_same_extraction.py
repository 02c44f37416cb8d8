"""An append must find concepts the way the index's earlier runs did (``check_same_extraction``)."""

import json

import pytest

from lazygraph.errors import IndexStateError
from lazygraph.nlp.stage import check_same_extraction
from lazygraph.settings import ConceptSettings


def run_with(**concepts: object) -> dict:
    return {"settings_json": json.dumps({"concepts": concepts})}


def test_the_same_extractor_is_accepted() -> None:
    now = ConceptSettings(noun_phrases="pos_rules", use_entities=False)
    check_same_extraction(run_with(**now.model_dump()), now, "idx")
    check_same_extraction(None, now, "idx")  # a first build has nothing to match


def test_another_extractor_is_refused_with_the_settings_to_use() -> None:
    built = ConceptSettings(noun_phrases="parser", use_entities=True)
    with pytest.raises(IndexStateError) as raised:
        check_same_extraction(
            run_with(**built.model_dump()), ConceptSettings(noun_phrases="pos_rules"), "idx"
        )
    message = str(raised.value)
    assert "concepts.noun_phrases='parser'" in message and "'pos_rules'" in message
    assert "LAZYGRAPH_CONCEPTS__NOUN_PHRASES=parser" in message
    assert "use_entities" not in message  # only what differs is named


def test_a_run_recorded_before_the_setting_existed_used_the_parser_with_entities() -> None:
    older = {"spacy_model": "en_core_web_sm", "max_phrase_tokens": 6}  # no noun_phrases, no use_entities
    check_same_extraction(run_with(**older), ConceptSettings(noun_phrases="parser", use_entities=True), "idx")
    with pytest.raises(IndexStateError, match="LAZYGRAPH_CONCEPTS__USE_ENTITIES=true"):
        check_same_extraction(
            run_with(**older), ConceptSettings(noun_phrases="parser", use_entities=False), "idx"
        )


def test_pairing_settings_do_not_block_an_append() -> None:
    # Pairing limits change only the counts, which the graph stage recounts (counts_are_current).
    built = ConceptSettings(max_pairs_per_chunk=100)
    check_same_extraction(run_with(**built.model_dump()), ConceptSettings(max_pairs_per_chunk=300), "idx")
