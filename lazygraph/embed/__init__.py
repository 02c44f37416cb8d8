"""Embedding stage: chunk and query vectors (the same cost a vector RAG index pays)."""

from lazygraph.embed.embedder import Embedder, get_embedder

__all__ = ["Embedder", "get_embedder"]
