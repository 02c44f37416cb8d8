"""Names and locations of the Delta tables that make up an index.

An index is a directory (a local path or a URI: file://, s3a:// or s3://, abfss://, gs://, hdfs://;
``lazygraph.runtime.storage``) holding one Delta table per name below. Each stage package owns the
tables it writes.

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
| concept_counts       | graph        | concept with its counts, updated by MERGE         |
| pair_counts          | graph        | paired concepts with their chunk count, by MERGE  |
| concepts             | graph        | normalised noun phrase / entity, with frequencies |
| edges                | graph        | co-occurring concept pair, count and NPMI weight  |
| communities          | communities  | community at a level, with parent and size        |
| concept_communities  | communities  | (concept, level) -> community                     |
| chunk_communities    | communities  | (chunk, level, community) with a weight           |
| manifest             | manifest     | index run: settings, counts, versions, timings    |
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lazygraph.errors import ConfigError
from lazygraph.runtime import storage
from lazygraph.settings import Settings, StorageSettings
from lazygraph.tables import schemas

# What every deltalake call site here accepts for its storage: the settings, their storage section, or
# None for the defaults (see ``storage_settings``).
StorageSource = Settings | StorageSettings | None

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
CONCEPT_COUNTS = "concept_counts"
PAIR_COUNTS = "pair_counts"
MANIFEST = "manifest"

# Every table of an index, the manifest last; their specs (schema, key, owner) are in ``schemas``.
ALL_TABLES = tuple(spec.name for spec in schemas.INDEX_TABLES)


def normalise_index_uri(index: str) -> str:
    """The canonical URI of an index (or results) location: a bare path or file:// URI becomes an absolute
    file:// URI, s3:// becomes s3a://, other supported URIs pass through; InputError for any other scheme."""
    return storage.normalise(index)


def table_uri(index: str, table: str) -> str:
    return f"{normalise_index_uri(index)}/{table}"


def local_path(uri: str) -> str | None:
    """The filesystem path of a file:// URI, or None for remote storage."""
    return storage.local_path(uri)


def storage_settings(source: StorageSource = None) -> StorageSettings:
    """The storage section of ``source``; None means the defaults (no endpoint, each client's default
    credential chain).

    Every reader is handed the settings of the process that opened the index (the CLI's, a job's, a Ray
    actor's, which the driver sends it): nothing here reads the environment.
    """
    if source is None:
        return StorageSettings()
    return source.storage if isinstance(source, Settings) else source


def storage_options(source: StorageSource = None, uri: str | None = None) -> dict[str, str]:
    """deltalake ``storage_options`` for ``uri`` from the storage settings; empty for a local table
    (whose reads never load the settings)."""
    if uri is not None and storage.is_local(uri):
        return {}
    return storage_settings(source).delta_options(uri)


@contextmanager
def reaching(uri: str) -> Iterator[None]:
    """deltalake's object-store failures (an unknown bucket, refused credentials, no route to the
    endpoint) on a remote table become one ConfigError naming the location; local errors pass as they are."""
    try:
        yield
    except OSError as exc:
        if storage.is_local(uri):
            raise
        raise ConfigError(
            f"cannot reach {uri}: {_cause(exc)}. Check the storage.* settings (LAZYGRAPH_STORAGE__*: "
            "endpoint, region, credentials) and that the bucket exists"
        ) from exc


def _cause(exc: Exception) -> str:
    """deltalake's chain of causes (one per line, coloured arrows) as its first and last link."""
    text = re.sub(r"\x1b\[[0-9;]*m|↳", "", str(exc))
    causes = [line.strip() for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    summary = causes[0] if len(causes) == 1 else f"{causes[0]} ({causes[-1]})"
    return summary[:300]


def open_delta(uri: str, version: int | None = None, settings: StorageSource = None) -> Any | None:
    """The deltalake (Rust, no JVM) handle of a table (its latest version unless ``version`` is given),
    or None when no table is there yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    options = storage_options(settings, uri)
    try:
        with reaching(uri):
            return DeltaTable(storage.delta_uri(uri), version=version, storage_options=options or None)
    except TableNotFoundError:
        return None


def arrow_dataset(table: Any, settings: StorageSource = None, partitions: list | None = None) -> Any:
    """A deltalake table's current files as a ``pyarrow.dataset``, read by pyarrow itself; with
    ``partitions`` (deltalake partition filters, e.g. ``[("bucket", "in", ["0a", "ff"])]``) only the
    files of those partitions. Partition columns are not in the files: they read as nulls.

    deltalake's own ``to_pyarrow_dataset`` reads through its Rust object store, and a process that
    exits after such a read aborts now and then at interpreter shutdown ("terminate called without
    an active exception", exit 134; delta-io/delta-rs#2184, apache/arrow#34314), which turns a
    successful command into a failed one. Tables in object stores are read through a pyarrow
    filesystem built from the same storage settings. Tables with deletion vectors (which lazygraph
    does not enable), and HDFS tables (pyarrow's HDFS client needs a JVM, deltalake's does not), keep
    deltalake's reader.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    if "deletionVectors" in (table.protocol().reader_features or []):
        return (
            table.to_pyarrow_dataset(file_pruning_predicate=partitions)
            if partitions
            else table.to_pyarrow_dataset()
        )
    schema = pa.schema(table.schema().to_arrow())
    location = table.table_uri
    if storage.is_local(location):
        return ds.dataset(_file_uris(table, partitions), format="parquet", schema=schema)
    if storage.scheme(location) == "hdfs":
        return (
            table.to_pyarrow_dataset(file_pruning_predicate=partitions)
            if partitions
            else table.to_pyarrow_dataset()
        )
    filesystem = storage.arrow_filesystem(location, storage_settings(settings))
    paths = [storage.arrow_path(uri) for uri in _file_uris(table, partitions)]
    return ds.dataset(paths, format="parquet", schema=schema, filesystem=filesystem)


def _file_uris(table: Any, partitions: list | None) -> list[str]:
    return table.file_uris(file_pruning_predicate=partitions) if partitions else table.file_uris()
