"""Approximate nearest-neighbour search over the chunk embeddings, for indexes too large for exact search.

Below ``vectors.ann_min_chunks`` chunks nothing here runs: the snapshot holds the float32 matrix and
ranks every chunk exactly. From there:

- ann: ``VectorIndex``, an IVF index with scalar-quantised codes (faiss): train, encode, search;
- job: ``refresh_vector_index``, the index job's step that builds it with Spark (train on a sample,
  encode per partition), called at the end of every run that changes chunk_embeddings;
- store: the build's files beside the Delta tables, tied to a chunk_embeddings version, and loading
  them into a query process;
- search: a query's nearest chunks and every chunk's similarity to it;
- synthetic: clustered synthetic vectors for tests and benchmarks.

Nothing here knows about queries: the ranking of chunks and communities built on a search is
``lazygraph.query.ranking``.
"""
