"""Query stage: refine -> budgeted match -> map -> reduce over a read-only index snapshot, plus the
vector-RAG baselines."""

from lazygraph.query.engine import QueryEngine, QueryResult

__all__ = ["QueryEngine", "QueryResult"]
