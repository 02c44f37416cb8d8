"""lazygraph: LazyGraphRAG built for clusters (Spark indexing, Ray serving, budgeted LLM use)."""

__version__ = "0.1.0"
