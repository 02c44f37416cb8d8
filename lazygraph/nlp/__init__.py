"""Concept extraction: spaCy noun chunks and entities, normalised into concept names."""

from lazygraph.nlp.normalise import concept_id, normalise_phrase, singularise

__all__ = ["concept_id", "normalise_phrase", "singularise"]
