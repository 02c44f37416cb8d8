"""Query stage: refine -> budgeted match -> map -> reduce over a read-only index snapshot, plus the
vector-RAG baselines.

Read it top-down: ``engine`` (one query's path, ``QueryEngine``) runs a method of ``search`` (the
registry ``SEARCHES``; ``search/lazy/`` holds the lazy search's own steps) over ``snapshot`` (the
index in memory) or, for the vector method, over ``store_reader`` (the serving store, read as a query
touches it); ``reader`` is the interface both give that method. Below them, leaves every method
shares: ``answer`` (cited sentences), ``ranking`` (rank fusion and community ranking), ``evidence``
(the lazy context's items), ``focus`` (the sentences of a chunk bearing on a query), ``cost`` (the
cost record). ``result`` is the query's record, ``question`` the checks before any model runs,
``show`` the reading of a cited chunk.
"""
