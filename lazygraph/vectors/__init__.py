"""Approximate nearest-neighbour search over the chunk embeddings, for indexes too large for exact search.

Below ``vectors.ann_min_chunks`` chunks nothing here runs: the snapshot holds the float32 matrix and
ranks every chunk exactly. From there:

- ann: ``VectorIndex``, an IVF index with scalar-quantised codes (faiss): train, encode, search;
- job: ``refresh_vector_index``, the index job's step that builds it with Spark (train on a sample,
  encode per partition), called at the end of every run that changes chunk_embeddings;
- store: the build's files beside the Delta tables, tied to a chunk_embeddings version, and loading
  them into a snapshot;
- ranking, query: a subquery's candidates, per-chunk similarities and community ranking from them;
- synthetic, bench: clustered synthetic vectors and the benchmark of recall, latency and memory.
"""

from lazygraph.vectors.ann import VectorIndex
from lazygraph.vectors.job import refresh_vector_index

__all__ = ["VectorIndex", "refresh_vector_index"]
