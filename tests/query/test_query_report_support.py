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


def test_a_sentence_stated_under_two_themes_is_kept_once() -> None:
    from lazygraph.query.answer import unrepeated

    first = CitedSentence("Brightwater agreed to pay the first instalment early.", [1])
    again = CitedSentence("brightwater agreed to pay the first instalment early", [2])
    other = CitedSentence("Brightwater agreed to pay the second instalment early.", [2])
    assert unrepeated([first, other, again]) == [first, other]
    assert unrepeated([]) == []


def test_a_sentence_ending_two_answer_sentences_is_kept_once() -> None:
    """The demo's report ended two sentences of one theme with the same one; a title's full stop does
    not split a sentence, so "Dr. Wren ..." twice in different sentences loses nothing."""
    from lazygraph.query.answer import unrepeated

    first = CitedSentence(
        "The council debated the fund. Brightwater agreed to pay the first instalment early.",
        [1],
        theme="Fund",
    )
    second = CitedSentence(
        "The station built a finer sediment model. Brightwater agreed to pay the first instalment early.",
        [2],
        theme="Fund",
    )
    titled = CitedSentence("Dr. Wren mapped the eelgrass. Dr. Wren tagged sea trout.", [3])
    again = CitedSentence("Brightwater agreed to pay the first instalment early.", [4])
    kept = unrepeated([first, second, titled, again])
    assert [s.text for s in kept] == [
        first.text,
        "The station built a finer sediment model.",
        "Dr. Wren mapped the eelgrass. Dr. Wren tagged sea trout.",
    ]
    assert kept[1].facts == [2] and kept[1].theme == "Fund"


# The demo's source s22 (abridged) and its neighbour s06, as a theme call reads them.
S22 = (
    "Dr. Tomasz Wren and his student Lucy Harrow tagged fifty young sea trout in spring 2023.\n"
    '(From the document "Sea trout in the River Avel".)'
)
S06 = "Dr. Priya Nandakumar assigned the work to a team led by Dr. Tomasz Wren."


def test_a_sentence_naming_someone_its_source_does_not_is_dropped() -> None:
    from lazygraph.query.answer import names_in_sources

    swapped = CitedSentence("Dr. Priya Nandakumar and Dr. Tomasz Wren tagged fifty young sea trout.", [1])
    faithful = CitedSentence("Dr. Tomasz Wren and Lucy Harrow tagged fifty young sea trout.", [1])
    # Term support lets the swapped sentence through: only the name is wrong.
    assert supported([swapped], [S22, S06], 0.4) == [swapped]
    assert names_in_sources([swapped, faithful], [S22, S06]) == [faithful]
    # A name in another cited source counts; the first word, names from the title and case do not matter.
    assert names_in_sources([CitedSentence(swapped.text, [1, 2])], [S22, S06]) == [
        CitedSentence(swapped.text, [1, 2])
    ]
    titled = CitedSentence("Sea trout in the River Avel were tagged by wren's team.", [1])
    assert names_in_sources([titled], [S22, S06]) == [titled]
    assert names_in_sources([CitedSentence("Harrow tagged Fifty fish.", [1])], [S22]) == [
        CitedSentence("Harrow tagged Fifty fish.", [1])
    ]
    assert names_in_sources([CitedSentence("Lucy Harrow tagged fish.", [])], [S22]) == []


# The demo's source s28 (abridged) and the review's findings in s09.
S28 = (
    "Brightwater Tidal asked Port Ellery Town Council in mid-2024 to approve the remaining four turbines "
    "of the Avel Tidal Array. The Harbour and Shore Committee recommended postponing a decision for at "
    "least one full year."
)
S09 = (
    "The review did not recommend refusal. It recommended a smaller first phase of two turbines and "
    "continuous turbidity monitoring."
)


def test_a_sentence_stating_as_done_what_its_source_only_asked_for_is_dropped() -> None:
    """The demo's report once said the council "approved the remaining four turbines", citing s28,
    which says the company asked for that and the decision was postponed: every word is in the
    source, so term support and the names check let it through."""
    from lazygraph.nlp.stance import load_stance_parser
    from lazygraph.query.answer import names_in_sources, stances_in_sources

    nlp = load_stance_parser("en_core_web_sm")
    approved = CitedSentence(
        "Port Ellery Town Council approved the remaining four turbines of the Avel Tidal Array in mid-2024.",
        [1],
    )
    assert supported([approved], [S28], 0.4) == [approved]
    assert names_in_sources([approved], [S28]) == [approved]
    asked = CitedSentence("Brightwater Tidal asked the council to approve the remaining four turbines.", [1])
    advised = CitedSentence("The committee recommended postponing a decision for a year.", [1])
    postponed = CitedSentence("The committee postponed the decision for a year.", [1])
    assert stances_in_sources([approved, asked, advised, postponed], [S28, S09], nlp) == [asked, advised]
    # a negation turned around is dropped; the same verb stated as the source states it is kept
    refused = CitedSentence("The review recommended refusal.", [2])
    phased = CitedSentence("The review recommended a smaller first phase of two turbines.", [2])
    assert stances_in_sources([refused, phased], [S28, S09], nlp) == [phased]
    # a verb the cited sources do not use cannot be judged, and the sentence stays
    paraphrase = CitedSentence("The council shelved the decision on the remaining four turbines.", [1])
    assert stances_in_sources([paraphrase], [S28, S09], nlp) == [paraphrase]
    # a citation does not hide the sentence it was written from: cited to s09, which has no "approve",
    # the sentence is still judged against s28's closest sentence
    assert stances_in_sources([CitedSentence(approved.text, [2])], [S28, S09], nlp) == []
    # and where the closest sentences tie, the cited one decides
    tied = CitedSentence("The committee recommended it.", [2])
    assert stances_in_sources([tied], [S28, "The committee did not recommend it."], nlp) == []
    assert stances_in_sources(
        [CitedSentence(tied.text, [1])], [S28, "The committee did not recommend it."], nlp
    ) == [CitedSentence(tied.text, [1])]
