"""Pure normalisation of noun phrases and entity names into concept names.

Everything here works on plain token records, not on spaCy objects, so the rules can be
tested without a model. Two mentions that normalise to the same string are the same concept
(its id is a hash of that string).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import NamedTuple


class Tok(NamedTuple):
    """The few token attributes normalisation needs."""

    text: str
    pos: str = ""  # coarse part of speech (DET, PRON, PUNCT, NUM, NOUN, PROPN, ...)
    tag: str = ""  # fine tag (NNS = plural common noun, POS = possessive marker, PRP$ ...)
    ws: bool = True  # followed by whitespace in the original text
    is_stop: bool = False


# Leading words that carry no meaning of their own in a concept name.
_LEADING_DROP_POS = {"DET", "PRON", "PUNCT", "CCONJ", "ADP", "PART", "SYM"}
_LEADING_DROP_TAGS = {"PRP$", "WP$", "POS", "DT", "PDT", "WDT"}
_TRAILING_DROP_POS = {"PUNCT", "PART", "SYM", "CCONJ", "ADP"}
_EDGE_PUNCT = "\"'`“”‘’()[]{}<>,.;:!?-–—_/\\|*#~^&%$@+=…"

PRONOUNS = {
    "i",
    "me",
    "my",
    "mine",
    "myself",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "we",
    "us",
    "our",
    "ours",
    "ourselves",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "who",
    "whom",
    "whose",
    "which",
    "what",
    "that",
    "this",
    "these",
    "those",
    "one",
    "ones",
    "someone",
    "somebody",
    "something",
    "anyone",
    "anybody",
    "anything",
    "everyone",
    "everybody",
    "everything",
    "noone",
    "nobody",
    "nothing",
    "none",
    "each other",
    "one another",
    "whoever",
    "whatever",
}

# Calendar words link documents only by date, which says nothing about their subject.
CALENDAR_WORDS = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "year",
    "month",
    "week",
    "day",
    "decade",
    "century",
}

# Phrases too generic to name a concept (after normalisation and singularisation).
STOP_PHRASES = CALENDAR_WORDS | {
    "thing",
    "lot",
    "kind",
    "sort",
    "type",
    "way",
    "part",
    "number",
    "use",
    "example",
    "other",
    "both",
    "all",
    "each",
    "some",
    "many",
    "much",
    "most",
    "such",
    "same",
    "first",
    "second",
    "third",
    "last",
    "rest",
    "end",
    "case",
    "fact",
    "point",
    "place",
    "term",
    "time",
    "times",
    "deal",
    "bit",
    "couple",
    "variety",
    "range",
    "series",
    "group",
    "set",
    "form",
    "member",
    "addition",
    "order",
    "result",
    "reason",
    "side",
    "area",
    "name",
    "line",
    "level",
    "top",
    "bottom",
    "front",
    "back",
    "amount",
    "matter",
    "question",
    "total",
    "half",
    "lack",
    "host",
    "majority",
    "minority",
    "several",
    "few",
    "more",
    "less",
    "etc",
    "e.g",
    "i.e",
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
}

# Entity labels that are values, not concepts.
VALUE_ENTITY_LABELS = {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"}

_IRREGULAR_PLURALS = {
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "criteria": "criterion",
    "phenomena": "phenomenon",
    "wolves": "wolf",
    "knives": "knife",
    "lives": "life",
    "wives": "wife",
    "leaves": "leaf",
    "halves": "half",
    "shelves": "shelf",
    "thieves": "thief",
    "calves": "calf",
    "loaves": "loaf",
    "selves": "self",
    "analyses": "analysis",
    "theses": "thesis",
    "crises": "crisis",
    "hypotheses": "hypothesis",
    "diagnoses": "diagnosis",
    "axes": "axis",
    "indices": "index",
    "matrices": "matrix",
    "vertices": "vertex",
    "appendices": "appendix",
    "cacti": "cactus",
    "fungi": "fungus",
    "nuclei": "nucleus",
    "radii": "radius",
    "stimuli": "stimulus",
    "alumni": "alumnus",
    "bacteria": "bacterium",
    "curricula": "curriculum",
    "media": "media",
    "data": "data",
    "buses": "bus",
    "gases": "gas",
    "shoes": "shoe",
    "toes": "toe",
    "canoes": "canoe",
    "movies": "movie",
    "cookies": "cookie",
    "pies": "pie",
    "ties": "tie",
    "lies": "lie",
    "headaches": "headache",
    "niches": "niche",
    "caches": "cache",
    "avalanches": "avalanche",
    "moustaches": "moustache",
    "mustaches": "mustache",
    "people": "people",
    "oxen": "ox",
}
# Words that end in s but are not plurals (or have the same form in both numbers).
_INVARIANT = {
    "series",
    "species",
    "news",
    "means",
    "physics",
    "mathematics",
    "economics",
    "politics",
    "athletics",
    "gymnastics",
    "ethics",
    "linguistics",
    "statistics",
    "electronics",
    "genetics",
    "aircraft",
    "sheep",
    "fish",
    "deer",
    "police",
    "clothes",
    "headquarters",
    "arms",
    "thanks",
    "olympics",
    "games",
    "rights",
    "sales",
    "arts",
    "affairs",
    "relations",
    "forces",
    "studies",
}
_O_ES_PLURALS = ("oes",)


def singularise(word: str) -> str:
    """Rule-based English plural -> singular for one lower-case word.

    Called only on words the tagger marked as plural common nouns, so the rules can be
    simple: an irregular table, invariant words, then suffix rules from longest to shortest.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[word]
    if word in _INVARIANT:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes")):
        return word[:-2]
    if word.endswith(_O_ES_PLURALS) and len(word) > 4:
        return word[:-2]
    if word.endswith(("ss", "us", "is", "ous")):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def _strip_leading(tokens: list[Tok]) -> list[Tok]:
    # A possessor ("John's book", "the city's mayor") is dropped with its marker: the concept is the head.
    last_possessive = max(
        (i for i, t in enumerate(tokens) if t.tag == "POS" or t.text in ("'s", "’s")), default=-1
    )
    if 0 <= last_possessive < len(tokens) - 1:
        tokens = tokens[last_possessive + 1 :]
    while tokens and (
        tokens[0].pos in _LEADING_DROP_POS
        or tokens[0].tag in _LEADING_DROP_TAGS
        or tokens[0].text.lower() in PRONOUNS
        or not tokens[0].text.strip(_EDGE_PUNCT)
    ):
        tokens = tokens[1:]
    return tokens


def _strip_trailing(tokens: list[Tok]) -> list[Tok]:
    while tokens and (
        tokens[-1].pos in _TRAILING_DROP_POS
        or tokens[-1].tag == "POS"
        or not tokens[-1].text.strip(_EDGE_PUNCT)
    ):
        tokens = tokens[:-1]
    return tokens


def _join(tokens: Sequence[Tok]) -> str:
    parts = [t.text + (" " if t.ws else "") for t in tokens[:-1]] + [tokens[-1].text]
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def is_rejected_name(name: str) -> bool:
    """Names that can never be concepts: too short, numbers only, pronouns, stop phrases."""
    if len(name) <= 1:
        return True
    if not any(ch.isalpha() for ch in name):
        return True  # numbers, dates like 1999-2001, punctuation
    return name in PRONOUNS or name in STOP_PHRASES


def normalise_phrase(tokens: Sequence[Tok], max_tokens: int, singularise_head: bool = True) -> str | None:
    """Concept name of a noun chunk or entity span, or None when it names nothing useful.

    Lower-cases, drops leading determiners/pronouns/possessors and edge punctuation, keeps at most
    the last ``max_tokens`` tokens (the head of an English noun phrase is at the end), and turns a
    plural head noun into its singular.
    """
    kept = _strip_trailing(_strip_leading(list(tokens)))
    if not kept:
        return None
    if all(t.is_stop or t.pos == "PRON" for t in kept):
        return None
    if len(kept) > max_tokens:
        kept = _strip_leading(kept[-max_tokens:])
        if not kept:
            return None
    words = [t._replace(text=t.text.lower()) for t in kept]
    head = words[-1]
    if singularise_head and head.tag == "NNS":
        words[-1] = head._replace(text=singularise(head.text))
    name = _join(words).strip(_EDGE_PUNCT).strip()
    name = name.replace("’", "'")
    if is_rejected_name(name):
        return None
    return name


def concept_id(name: str) -> str:
    """Stable id of a normalised concept name."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
