"""Citations re-pointed at the fact a sentence's words come from (``query.answer.recite``)."""

from __future__ import annotations

from lazygraph.query.answer import CitedSentence, recite

FACTS = [
    "Most decisions about the harbour are taken by Port Ellery Town Council, advised by the Halvard "
    "University Marine Station.",
    "After two public hearings, Port Ellery Town Council voted nine to four to grant consent for the "
    "onshore works of the Avel Tidal Array.",
    "Storm Isolde sank two boats of the Saltmarsh Fishers' Cooperative at their moorings.",
    "The fishing fleet has replaced most of its lost gear, partly with emergency money from the "
    "benefit fund.",
]


def cited(text: str, facts: list[int]) -> list[int]:
    sentence = CitedSentence(text, facts)
    recite([sentence], FACTS)
    return sentence.facts


def test_a_sentence_copied_from_one_fact_and_cited_to_another_is_re_pointed() -> None:
    vote = "Port Ellery Town Council voted nine to four to grant consent for the onshore works."
    assert cited(vote, [1]) == [2]
    money = "The fishing fleet replaced most of its lost gear with emergency money from the benefit fund."
    assert cited(money, [3]) == [4]


def test_right_citations_stay() -> None:
    vote = "Port Ellery Town Council voted nine to four to grant consent for the onshore works."
    assert cited(vote, [2]) == [2]
    # Two facts that hold the sentence together stand, though neither holds all of it.
    both = "Storm Isolde sank two boats, and the fleet later replaced its lost gear with emergency money."
    assert cited(both, [3, 4]) == [3, 4]


def test_a_summary_no_fact_holds_keeps_its_citations() -> None:
    summary = "Tensions grew between livelihoods and renewable ambitions across the estuary."
    assert cited(summary, [1]) == [1]
    assert cited(summary, []) == []
