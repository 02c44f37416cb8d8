"""The one tokenizer of the lexical (BM25) signal, used by the index job and by every query.

Index and query must cut text the same way or no term would match, so both call ``tokenize`` and
nothing else. The rules, in order:

1. Unicode NFKC normalisation and case folding ("Ｎ" and "N", "Straße" and "STRASSE" match);
2. word tokens: maximal runs of Unicode letters and digits (apostrophes, hyphens and underscores
   split, so "Mozart's" gives "mozart" and "s");
3. dropped: tokens of one character, English stop words (``STOP_WORDS``) and tokens longer than
   ``MAX_TERM_CHARS`` (hashes, encoded data: they never match a question and bloat the vocabulary);
   numbers are kept ("1969" matches "1969");
4. a light plural stripping of alphabetic tokens, Harman's "S" stemmer (Harman 1991, "How effective
   is suffixing?", JASIS 42(1)): "-ies" -> "-y", "-es" -> "-e", "-s" -> "" with its exceptions, so
   that "tides"/"tide" and "rockets"/"rocket" match. It is deliberately weaker than Porter: it never
   merges words of different meaning ("university"/"universe"), at the cost of some plurals
   ("potatoes" -> "potatoe").

Changing these rules changes the terms of new chunks only: re-index (a new directory) after a change.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# Letters and digits only: ``\w`` without the underscore.
_WORD = re.compile(r"[^\W_]+")

MAX_TERM_CHARS = 48

# Function words of English: frequent in every chunk, they carry no lexical evidence (BM25 would
# give them a near-zero idf anyway, but they would still cost postings and query time). The
# contraction stems ("don", "isn", ...) are what the tokenizer leaves of "don't", "isn't" ("won" is
# not one of them: far more often the verb than "won't").
_STOP_WORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each else ever few for from
    further had has have having he her here hers herself him himself his how however if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up upon very was we were what when
    where whether which while who whom whose why will with within without would yet you your yours
    yourself yourselves
    don doesn didn isn aren wasn weren hasn haven hadn wouldn shouldn couldn ll ve re
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())


def strip_plural(word: str) -> str:
    """Harman's S stemmer on an alphabetic word of four characters or more (others are returned as is)."""
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """The terms of ``text`` in order, repeated as often as they occur (see the module doc)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [
        strip_plural(word)
        for word in _WORD.findall(folded)
        if 1 < len(word) <= MAX_TERM_CHARS and word not in STOP_WORDS
    ]


def term_counts(text: str) -> Counter[str]:
    """How often each term occurs in ``text``."""
    return Counter(tokenize(text))
