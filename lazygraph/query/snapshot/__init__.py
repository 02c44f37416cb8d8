"""A read-only, in-memory snapshot of what querying needs, loaded once per process from the Delta tables.

Everything is held as numpy arrays indexed by dense integers (chunk index, community index, concept
index), and every one-to-many relation as a scipy CSR array, read row by row with ``row``:

- model: ``IndexSnapshot``, the arrays and the operations on them (similarities, passages, lookups);
- chunks, communities, concepts, lexical: the builders of each part from the index tables (lexical:
  the BM25 statistics of ``IndexSnapshot.bm25``);
- embeddings: the chunk vectors decoded from their binary column;
- columns, sparse: the Arrow and CSR helpers the builders share;
- build: ``build_snapshot``, the parts assembled from Arrow tables;
- load: ``load_snapshot``, the tables read at the versions of the last complete run, and its cache.
"""

from lazygraph.embed.codec import decode_embeddings
from lazygraph.query.snapshot.build import build_snapshot
from lazygraph.query.snapshot.communities import UNASSIGNED_COMMUNITY
from lazygraph.query.snapshot.load import clear_cache, load_snapshot
from lazygraph.query.snapshot.model import IndexSnapshot
from lazygraph.query.snapshot.sparse import entry_rows, row

__all__ = [
    "UNASSIGNED_COMMUNITY",
    "IndexSnapshot",
    "build_snapshot",
    "clear_cache",
    "decode_embeddings",
    "entry_rows",
    "load_snapshot",
    "row",
]
