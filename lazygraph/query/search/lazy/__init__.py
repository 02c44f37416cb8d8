"""The lazy search (LazyGraphRAG), one module per step, in the order a query runs them:

- subqueries: refine the question into subqueries and match each to the graph's concepts;
- relevance: the rule that decides a chunk bears on a subquery (P(yes), similarity, BM25, cascade);
- match: spend the relevance-test budget over the community tree, best first, deepening;
- claims: group the relevant chunks by community and extract claims from them (map), rank the claims;
- fill: rank the passages that fill the context the claims leave free;
- reduce: the answer from the claims beside their evidence (``lazygraph.query.evidence``), or for a
  global question a report written one theme at a time;
- search: ``LazySearch``, the method that runs them behind ``lazygraph.query.search.base.Search``.
"""

from lazygraph.query.search.lazy.search import LazySearch, Retrieval

__all__ = ["LazySearch", "Retrieval"]
