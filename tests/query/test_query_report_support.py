"""Report sentences kept only where the sources they cite hold their words (``query.answer.supported``)."""

from __future__ import annotations

from lazygraph.query.answer import CitedSentence, supported

FACTS = [
    "The Avel Estuary Trust asked for two years of baseline monitoring before any turbine went in.",
    "Storm Isolde sank two boats of the Saltmarsh Fishers' Cooperative at their moorings.",
]


def test_a_sentence_its_sources_do_not_hold_is_dropped() -> None:
    copied = CitedSentence("The trust asked for two years of baseline monitoring before any turbine.", [1])
    filler = CitedSentence(
        "Storm Isolde changed the debate by causing flooding and erosion across the ecosystem.", [1]
    )
    kept = supported([copied, filler], FACTS, 0.4)
    assert kept == [copied]


def test_support_counts_every_fact_a_sentence_cites() -> None:
    both = CitedSentence("The trust asked for baseline monitoring, and Storm Isolde sank two boats.", [1, 2])
    assert supported([both], FACTS, 0.8) == [both]
    assert supported([CitedSentence(both.text, [1])], FACTS, 0.8) == []
    assert supported([CitedSentence("No citation at all here.", [])], FACTS, 0.4) == []
    assert supported([CitedSentence("Anything goes.", [])], FACTS, 0.0) == [
        CitedSentence("Anything goes.", [])
    ]
