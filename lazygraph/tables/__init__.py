"""Names and locations of the Delta tables that make up an index.

An index is a directory (any Hadoop-compatible URI: file://, s3a://, abfss://, hdfs://) holding
one Delta table per name below. Each stage package owns the tables it writes.

Every table's schema, key and owning stage are declared once in ``schemas``; every Spark read,
MERGE and overwrite of an index goes through ``store.IndexStore``; the manifest (which version of
each table makes up the index) is read and written by ``lazygraph.manifest``; the results table of
a batch job is written by ``results``.

| table                | owner        | one row per                                      |
|----------------------|--------------|--------------------------------------------------|
| documents            | ingest       | document (doc_id, title, text, text_hash)         |
| rejected             | ingest       | input record refused, with the reason             |
| chunks               | ingest       | token window of a document (stable chunk_id)      |
| mentions             | nlp          | (chunk, concept) pair with its count              |
| chunk_embeddings     | embed        | chunk vector                                      |
| chunk_terms          | lexical      | (chunk, term) pair with its count (BM25 input)    |
| concepts             | graph        | normalised noun phrase / entity, with frequencies |
| edges                | graph        | co-occurring concept pair, count and NPMI weight  |
| communities          | communities  | community at a level, with parent and size        |
| concept_communities  | communities  | (concept, level) -> community                     |
| chunk_communities    | communities  | (chunk, level, community) with a weight           |
| manifest             | manifest     | index run: settings, counts, versions, timings    |
"""

from __future__ import annotations

from typing import Any

from lazygraph.tables import schemas

DOCUMENTS = "documents"
REJECTED = "rejected"
CHUNKS = "chunks"
CONCEPTS = "concepts"
MENTIONS = "mentions"
EDGES = "edges"
COMMUNITIES = "communities"
CONCEPT_COMMUNITIES = "concept_communities"
CHUNK_COMMUNITIES = "chunk_communities"
CHUNK_EMBEDDINGS = "chunk_embeddings"
CHUNK_TERMS = "chunk_terms"
MANIFEST = "manifest"

# Every table of an index, the manifest last; their specs (schema, key, owner) are in ``schemas``.
ALL_TABLES = tuple(spec.name for spec in schemas.INDEX_TABLES)


def normalise_index_uri(index: str) -> str:
    """A bare path (or a relative file:// one) becomes an absolute file:// URI; other URIs pass through."""
    from pathlib import Path

    if index.startswith("file://") and not index.startswith("file:///"):
        index = index[len("file://") :]  # file://./relative/path
    if "://" in index:
        return index.rstrip("/")
    return Path(index).expanduser().resolve().as_uri()


def table_uri(index: str, table: str) -> str:
    return f"{normalise_index_uri(index)}/{table}"


def local_path(uri: str) -> str | None:
    """The filesystem path of a file:// URI, or None for remote storage."""
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(uri).path)
    if "://" not in uri:
        return uri
    return None


def open_delta(uri: str, version: int | None = None) -> Any | None:
    """The deltalake (Rust, no JVM) handle of a table (its latest version unless ``version`` is given),
    or None when no table is there yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(local_path(uri) or uri, version=version)
    except TableNotFoundError:
        return None


def arrow_dataset(table: Any) -> Any:
    """A deltalake table's current files as a ``pyarrow.dataset``, read by pyarrow itself.

    deltalake's own ``to_pyarrow_dataset`` reads through its Rust object store, and a process that
    exits after such a read aborts now and then at interpreter shutdown ("terminate called without
    an active exception", exit 134; delta-io/delta-rs#2184, apache/arrow#34314), which turns a
    successful command into a failed one. Tables with deletion vectors (which lazygraph does not
    enable) keep deltalake's reader, the only one that applies them.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    if "deletionVectors" in (table.protocol().reader_features or []):
        return table.to_pyarrow_dataset()
    return ds.dataset(table.file_uris(), format="parquet", schema=pa.schema(table.schema().to_arrow()))
