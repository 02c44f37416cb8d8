"""Query serving on Ray: a pool of query actors sharing one read-only index snapshot each,
batch results appended to a resumable Delta table, and (on GPU clusters) one actor that owns
the vLLM engine and answers the relevance tests of every query actor in batches.
"""

from __future__ import annotations

from lazygraph.serve.queries import BatchQuery, read_queries

__all__ = ["BatchQuery", "read_queries"]
