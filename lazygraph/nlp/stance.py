"""Whether a text states an action as done, as not done, or only as asked for, planned or possible.

A report sentence copied from its source can keep every word and still change what the source says:
"Brightwater Tidal asked the council to approve the remaining four turbines" became "The council
approved the remaining four turbines" in the demo's report, where the source goes on to say the
decision was postponed. Term and name checks see the same words; what changed is the verb's stance.
Here every verb of a parsed sentence gets one of three stances, read from spaCy's tags and
dependency labels (no model of its own):

- ``DONE``: a finite or perfect form ("approved", "has approved", "was approved", "did approve"), or
  a participle describing what was done ("an article asking who gains");
- ``NOT_DONE``: the same, negated ("did not approve", "never approved");
- ``UNREALISED``: an infinitive, a form under a modal, a bare gerund, a condition ("asked ... to
  approve", "would approve", "recommended postponing", "if turbidity stayed high"): the text does not
  say it happened.

A few verbs carry their complement's action out ("voted to approve" is an approval, "failed to
approve" is not one), so a verb under them takes their stance.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Stance(Enum):
    DONE = "done"
    NOT_DONE = "not done"
    UNREALISED = "unrealised"


# Verbs whose "to" complement happened when they did ("the council voted to approve" approved it).
CARRIED_OUT_BY = frozenset({"vote", "decide", "manage", "choose", "elect", "begin", "start", "continue"})
# Verbs whose "to" complement did not happen when they did ("failed to approve").
LEFT_UNDONE_BY = frozenset({"fail", "refuse", "decline"})
CONDITIONS = frozenset({"if", "unless", "whether"})
FINITE_TAGS = frozenset({"VBD", "VBZ", "VBP", "VBN"})


def verb_stance(verb: Any) -> Stance:
    """The stance of one spaCy verb token (see the module's docstring)."""
    own = [child for child in verb.children if child.dep_ in ("aux", "auxpass", "neg")]
    if verb.dep_ == "conj" and not own and verb.head.pos_ in ("VERB", "AUX"):
        return verb_stance(verb.head)  # "did not approve or fund": fund shares approve's stance
    if any(child.dep_ == "mark" and child.lower_ in CONDITIONS for child in verb.children):
        return Stance.UNREALISED  # "if turbidity stayed high": a condition, not an event
    # A verb's own negation comes before it ("did not call", "never called"); a "not" after it negates
    # something else ("called the deal 'not what we wanted'"), which the parser may still hang on it.
    negated = any(child.dep_ == "neg" and child.i < verb.i for child in own)
    auxiliaries = [child for child in own if child.dep_ in ("aux", "auxpass")]
    if any(aux.tag_ == "MD" for aux in auxiliaries):
        return Stance.UNREALISED
    if any(aux.tag_ == "TO" for aux in auxiliaries) or verb.tag_ == "VB":
        if not any(aux.lemma_ == "do" for aux in auxiliaries):
            return _carried_stance(verb)
    elif verb.tag_ == "VBG" and verb.dep_ == "xcomp" and not any(aux.lemma_ == "be" for aux in auxiliaries):
        return _carried_stance(verb)  # "recommended postponing" did not postpone; "began regrowing" did
    elif verb.tag_ not in FINITE_TAGS and verb.tag_ != "VBG":
        return Stance.UNREALISED
    return Stance.NOT_DONE if negated else Stance.DONE


def _carried_stance(verb: Any) -> Stance:
    """An infinitive's stance: its governor's where the governor carries it out or leaves it undone."""
    head = verb.head
    if verb.dep_ != "xcomp" or head is verb or head.pos_ not in ("VERB", "AUX"):
        return Stance.UNREALISED
    if head.lemma_ in CARRIED_OUT_BY:
        return verb_stance(head)
    if head.lemma_ in LEFT_UNDONE_BY and verb_stance(head) is Stance.DONE:
        return Stance.NOT_DONE
    return Stance.UNREALISED


def stated_verbs(sentence: Any) -> list[tuple[str, Stance]]:
    """The (lemma, stance) of each verb a parsed sentence states as done or not done."""
    stated = []
    for token in sentence:
        if token.pos_ == "VERB" and token.dep_ not in ("amod", "compound"):
            stance = verb_stance(token)
            if stance is not Stance.UNREALISED:
                stated.append((token.lemma_.lower(), stance))
    return stated


def verb_stances(sentence: Any, lemma: str) -> set[Stance]:
    """The stances a parsed sentence gives the verb ``lemma``."""
    return {
        verb_stance(token)
        for token in sentence
        if token.pos_ == "VERB" and token.lemma_.lower() == lemma and token.dep_ not in ("amod", "compound")
    }


_PARSERS: dict[str, Any] = {}


def load_stance_parser(model: str) -> Any:
    """The spaCy pipeline that reads stances (tagger, parser and lemmatizer; no entities), loaded once
    per process."""
    if model not in _PARSERS:
        import spacy

        from lazygraph.nlp.extract import load_spacy_model

        _PARSERS[model] = load_spacy_model(spacy, model, ["ner"])
    return _PARSERS[model]
