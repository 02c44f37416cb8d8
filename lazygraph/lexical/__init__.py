"""The lexical signal of an index: the terms of every chunk, counted by the index job for BM25.

``terms`` holds the one tokenizer shared by indexing and querying; ``stage`` is the index-run stage
that counts the terms of new chunks and merges them into the chunk_terms table. The query side turns
that table into BM25 statistics (``lazygraph.query.snapshot.lexical``).
"""

from lazygraph.lexical.terms import STOP_WORDS, term_counts, tokenize

__all__ = ["STOP_WORDS", "term_counts", "tokenize"]
