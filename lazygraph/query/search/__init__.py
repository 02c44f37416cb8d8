"""The search methods a query can run, one module each, behind one interface (``base.Search``).

A new method is a module implementing ``Search`` and one line in ``SEARCHES``: the engine plans,
checks and answers every method the same way (``QueryEngine.search`` and ``QueryEngine.answer``), and
every consumer (the CLI, the batch runner, the evaluation) takes the method names from ``SEARCHES`` and
what it needs to know of a method from the method itself (``Search.calls_models``, ``Search.reading``).
"""

from lazygraph.errors import IndexSourceError
from lazygraph.query.search.base import Context, Plan, Reading, Search, SearchOutcome
from lazygraph.query.search.hybrid import HybridSearch
from lazygraph.query.search.lazy import LazySearch, Retrieval
from lazygraph.query.search.vector import PassageRetrieval, VectorSearch

# The method names the CLI, the presets and the batch runner accept.
SEARCHES: dict[str, type[Search]] = {"lazy": LazySearch, "vector": VectorSearch, "hybrid": HybridSearch}


def require_source(method: str, index_source: str) -> None:
    """Refuse, before any work, a method the index source cannot serve (``query.index_source``)."""
    if index_source == "store" and method in SEARCHES and not SEARCHES[method].serves_from_store:
        served = ", ".join(name for name, search in SEARCHES.items() if search.serves_from_store)
        raise IndexSourceError(
            f"the {method} method reads the whole index in memory, and query.index_source is store "
            f"(the serving store serves only: {served}); set `query.index_source: snapshot` to run "
            f"{method}, or use --method vector"
        )


__all__ = [
    "SEARCHES",
    "Context",
    "HybridSearch",
    "LazySearch",
    "PassageRetrieval",
    "Plan",
    "Reading",
    "Retrieval",
    "Search",
    "SearchOutcome",
    "VectorSearch",
    "require_source",
]
