"""Verb stances (done, not done, unrealised) read with the real spaCy model."""

from __future__ import annotations

import pytest

from lazygraph.nlp.stance import Stance, load_stance_parser, stated_verbs, verb_stances


@pytest.fixture(scope="module")
def nlp():  # noqa: ANN201
    return load_stance_parser("en_core_web_sm")


@pytest.mark.parametrize(
    ("text", "lemma", "stance"),
    [
        ("The council approved the remaining four turbines.", "approve", Stance.DONE),
        ("The turbines were approved in 2023.", "approve", Stance.DONE),
        ("The review did not recommend refusal.", "recommend", Stance.NOT_DONE),
        ("He has never approved such a plan.", "approve", Stance.NOT_DONE),
        ("Brightwater asked the council to approve the turbines.", "approve", Stance.UNREALISED),
        ("The council would approve the turbines.", "approve", Stance.UNREALISED),
        ("The committee recommended postponing a decision.", "postpone", Stance.UNREALISED),
        ("The array is switched off if turbidity stayed high.", "stay", Stance.UNREALISED),
        # a governor that carries its complement out, or leaves it undone
        ("The council voted nine to four to approve the phased array.", "approve", Stance.DONE),
        ("The council failed to approve the array.", "approve", Stance.NOT_DONE),
        ("The eastern meadows have begun to regrow.", "regrow", Stance.DONE),
        # a participle describing what was done
        ("The newspaper ran an article asking who gains from the array.", "ask", Stance.DONE),
        # a conjunct shares its head's negation
        ("The council did not approve or fund the wall.", "fund", Stance.NOT_DONE),
    ],
)
def test_each_verb_gets_the_stance_its_sentence_gives_it(nlp, text: str, lemma: str, stance: Stance) -> None:  # noqa: ANN001
    assert verb_stances(nlp(text), lemma) == {stance}


def test_only_what_is_stated_as_done_or_not_done_is_a_stated_verb(nlp) -> None:  # noqa: ANN001
    stated = stated_verbs(nlp("Brightwater asked the council to approve the remaining turbines."))
    assert stated == [("ask", Stance.DONE)]  # "approve" is asked for, and "remaining" modifies a noun


def test_a_not_after_the_verb_does_not_negate_it(nlp) -> None:  # noqa: ANN001
    """The demo's s26: the parser hangs the quote's "not" on "called" in this sentence."""
    source = nlp(
        "A smaller exclusion zone\nIn early 2024 the two sides agreed a revised arrangement. … Maren Tovey "
        "called the deal 'not what we wanted, but something we can live with'. …"
    )
    assert {stance for sentence in source.sents for stance in verb_stances(sentence, "call")} == {Stance.DONE}
