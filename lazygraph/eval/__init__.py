"""Evaluation: gold-document recall of lazy search against the vector baseline."""
