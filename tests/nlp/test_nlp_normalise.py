"""Normalisation rules of concept names (pure functions, no spaCy model)."""

from __future__ import annotations

import pytest

from lazygraph.nlp.extract import excluded_pipes, merge_kinds
from lazygraph.nlp.normalise import Tok, concept_id, is_rejected_name, normalise_phrase, singularise


def toks(*specs: str) -> list[Tok]:
    """'word/POS/TAG' specs; stop words marked with a trailing '!'."""
    out = []
    for spec in specs:
        is_stop = spec.endswith("!")
        text, pos, tag = spec.rstrip("!").split("/")
        out.append(Tok(text, pos, tag, True, is_stop))
    return out


@pytest.mark.parametrize(
    ("plural", "singular"),
    [
        ("cities", "city"),
        ("rockets", "rocket"),
        ("classes", "class"),
        ("churches", "church"),
        ("boxes", "box"),
        ("heroes", "hero"),
        ("wolves", "wolf"),
        ("children", "child"),
        ("women", "woman"),
        ("analyses", "analysis"),
        ("series", "series"),
        ("species", "species"),
        ("physics", "physics"),
        ("status", "status"),
        ("glass", "glass"),
        ("houses", "house"),
        ("movies", "movie"),
        ("buses", "bus"),
        ("data", "data"),
        ("bus", "bus"),
        ("gas", "gas"),
    ],
)
def test_singularise(plural: str, singular: str) -> None:
    assert singularise(plural) == singular


def test_determiner_and_case_are_removed() -> None:
    assert (
        normalise_phrase(toks("The/DET/DT!", "Apollo/PROPN/NNP", "Program/PROPN/NNP"), 6) == "apollo program"
    )


def test_plural_head_is_singularised_only_when_tagged_plural() -> None:
    plural = normalise_phrase(toks("the/DET/DT!", "space/NOUN/NN", "rockets/NOUN/NNS"), 6)
    singular = normalise_phrase(toks("a/DET/DT!", "space/NOUN/NN", "rocket/NOUN/NN"), 6)
    assert plural == singular == "space rocket"
    # Proper plural names (NNPS) are names, not plurals to undo.
    assert normalise_phrase(toks("The/DET/DT!", "Beatles/PROPN/NNPS"), 6) == "beatles"


def test_possessor_and_possessive_pronoun_are_dropped() -> None:
    assert normalise_phrase(toks("John/PROPN/NNP", "'s/PART/POS", "guitars/NOUN/NNS"), 6) == "guitar"
    assert normalise_phrase(toks("their/PRON/PRP$!", "cities/NOUN/NNS"), 6) == "city"


def test_edge_punctuation_is_stripped() -> None:
    tokens = [
        Tok('"', "PUNCT", "``", False),
        Tok("Dragon", "PROPN", "NNP"),
        Tok("Dice", "PROPN", "NNP", False),
        Tok('"', "PUNCT", "''", False),
    ]
    assert normalise_phrase(tokens, 6) == "dragon dice"


def test_hyphenated_words_keep_their_spacing() -> None:
    tokens = [
        Tok("state", "NOUN", "NN", False),
        Tok("-", "PUNCT", "HYPH", False),
        Tok("of", "ADP", "IN", False),
        Tok("-", "PUNCT", "HYPH", False),
        Tok("art", "NOUN", "NN", True),
        Tok("design", "NOUN", "NN"),
    ]
    assert normalise_phrase(tokens, 6) == "state-of-art design"


@pytest.mark.parametrize(
    "tokens",
    [
        toks("he/PRON/PRP!"),
        toks("it/PRON/PRP!"),
        toks("1999/NUM/CD"),
        toks("the/DET/DT!", "1,000/NUM/CD"),
        toks("a/DET/DT!", "lot/NOUN/NN"),
        toks("the/DET/DT!", "way/NOUN/NN"),
        toks("X/PROPN/NNP"),
        toks("the/DET/DT!"),
        toks("something/PRON/NN!"),
        toks("all/DET/DT!", "this/DET/DT!"),
    ],
)
def test_useless_phrases_are_dropped(tokens: list[Tok]) -> None:
    assert normalise_phrase(tokens, 6) is None


def test_long_phrases_keep_their_head() -> None:
    words = [f"w{i}/NOUN/NN" for i in range(9)] + ["engines/NOUN/NNS"]
    assert normalise_phrase(toks(*words), 3) == "w7 w8 engine"


def test_entities_are_not_singularised() -> None:
    assert (
        normalise_phrase(toks("Los/PROPN/NNP", "Angeles/PROPN/NNS"), 6, singularise_head=False)
        == "los angeles"
    )


def test_rejected_names() -> None:
    assert is_rejected_name("a")
    assert is_rejected_name("1999-2001")
    assert is_rejected_name("they")
    assert not is_rejected_name("moon")


def test_concept_id_is_a_stable_hash_of_the_name() -> None:
    assert concept_id("moon") == concept_id("moon")
    assert concept_id("moon") != concept_id("moons")
    assert len(concept_id("moon")) == 16
    assert all(c in "0123456789abcdef" for c in concept_id("moon"))


def test_entity_kind_wins_when_a_name_is_found_both_ways() -> None:
    from collections import Counter

    merged = merge_kinds(Counter({("nasa", "entity"): 2, ("nasa", "phrase"): 1, ("rocket", "phrase"): 3}))
    assert merged == {"nasa": (3, "entity"), "rocket": (3, "phrase")}


def test_parser_only_pipeline_without_entities() -> None:
    assert "ner" in excluded_pipes(False)
    assert "ner" not in excluded_pipes(True)
    assert "lemmatizer" in excluded_pipes(True)


@pytest.mark.parametrize("name", ["june", "monday", "year", "century"])
def test_calendar_words_are_not_concepts(name: str) -> None:
    assert is_rejected_name(name)
    assert not is_rejected_name("june carter")
