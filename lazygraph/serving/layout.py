"""Where a serving store lives inside its index, how it is named, and its metadata file.

    <index>/serving_store/v-<digest>/
        chunks.lance                (chunk_id, doc_id, title, ord, text, n_tokens)
        chunk_vectors.lance         (chunk_id, vector): unit-length float32
        communities.lance           (community_id, level, parent_id, size, n_chunks, top_concepts)
        chunk_communities.lance     (chunk_id, level, community_id, weight): grouped by chunk
        chunk_link_ranges.lance     (links_start, links_count): row r is chunk row r, where its links
                                    lie in chunk_communities
        community_chunks.lance      the same links grouped by community (a community's chunks together)
        concepts.lance              kept concepts, with the unit vector of the name when embedded
        concept_communities.lance   (concept_id, level, community_id)
        chunk_concepts.lance        (chunk_id, concept_id, count): the mentions of kept concepts, grouped
                                    by chunk
        concept_chunks.lance        the same mentions grouped by concept, each concept's most-mentioning
                                    chunks first
        concept_edges.lance         (src, dst, weight): the kept edges, once each way, grouped by src
        chunk_terms.lance           (term, chunk_id, count, chunk_length, impact): the BM25 postings,
                                    grouped by term, each term's highest-impact first
        terms.lance                 (term, df, first_row): where each term's postings start, how many
        chunk_term_counts.lance     the same postings grouped by chunk (only with serving.bm25_rescore)
        store.json                  written last: a store is complete exactly when it exists

The digest is taken over the source tables' names and the Delta versions the manifest's last complete
run recorded, so every set of versions has its own directory: a store is never updated in place, and a
reader finds the one store its manifest names or none. ``store.json`` records those versions (and the
Delta table ids, which a table re-created from scratch changes while its version numbers restart).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazygraph import tables
from lazygraph.runtime import storage
from lazygraph.vectors.store import arrow_fs, read_file, write_file

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource

STORE_DIR = "serving_store"
META = "store.json"
# Bumped when the datasets' layout changes: a reader refuses a store of another format.
# 2: the BM25 postings (chunk_terms) in the index's own terms.
# 3: the community links twice, grouped by chunk and by community (community_chunks).
# 4: each term's postings in impact order, and a term directory (terms) to read them to a depth.
# 5: the postings also grouped by chunk (chunk_term_counts, written when serving.bm25_rescore is on).
# 6: each posting names its chunk by row number too (chunk_terms.chunk_row, chunks.chunk_row).
# 7: what the lazy search reads besides: the mentions both ways (chunk_concepts, concept_chunks), the
#    kept edges (concept_edges) and each concept's lower-cased name (concepts.name_key).
# 8: where each chunk's links lie in chunk_communities, by chunk row (chunk_link_ranges).
FORMAT = 8
# The first format the lazy search runs on (an older store serves the vector and hybrid methods only).
LAZY_FORMAT = 7
# Formats a reader still opens (a format-2 store reads a community's chunks from chunk_communities; a
# store before format 4 reads every posting of a term through the B-tree on chunk_terms.term).
READABLE_FORMATS = (2, 3, 4, 5, 6, 7, 8)

# The Delta tables a store is derived from; chunks and their embeddings are required, as for a snapshot.
REQUIRED = (tables.CHUNKS, tables.CHUNK_EMBEDDINGS)
SOURCES = (
    *REQUIRED,
    tables.COMMUNITIES,
    tables.CHUNK_COMMUNITIES,
    tables.CONCEPTS,
    tables.CONCEPT_COMMUNITIES,
    tables.CHUNK_TERMS,
    tables.MENTIONS,
    tables.EDGES,
)

# Dataset names inside a store.
CHUNKS = "chunks"
CHUNK_VECTORS = "chunk_vectors"
COMMUNITIES = "communities"
CHUNK_COMMUNITIES = "chunk_communities"
CHUNK_LINK_RANGES = "chunk_link_ranges"
COMMUNITY_CHUNKS = "community_chunks"
CONCEPTS = "concepts"
CONCEPT_COMMUNITIES = "concept_communities"
CHUNK_TERMS = "chunk_terms"
TERMS = "terms"
CHUNK_TERM_COUNTS = "chunk_term_counts"
CHUNK_CONCEPTS = "chunk_concepts"
CONCEPT_CHUNKS = "concept_chunks"
CONCEPT_EDGES = "concept_edges"
DATASETS = (
    CHUNKS,
    CHUNK_VECTORS,
    COMMUNITIES,
    CHUNK_COMMUNITIES,
    CHUNK_LINK_RANGES,
    COMMUNITY_CHUNKS,
    CONCEPTS,
    CONCEPT_COMMUNITIES,
    CHUNK_TERMS,
    TERMS,
    CHUNK_TERM_COUNTS,
    CHUNK_CONCEPTS,
    CONCEPT_CHUNKS,
    CONCEPT_EDGES,
)


def datasets(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """The datasets a store of this metadata holds (a store of an older format has fewer)."""
    return tuple(name for name in DATASETS if name in meta.get("datasets", {}))


def source_versions(recorded: Mapping[str, int]) -> dict[str, int]:
    """The versions of the source tables among those a manifest row recorded."""
    return {name: int(recorded[name]) for name in SOURCES if name in recorded}


def store_name(versions: Mapping[str, int]) -> str:
    """The directory name of the store of these source versions."""
    text = json.dumps(sorted(versions.items()), separators=(",", ":"))
    return f"v-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def store_uri(index_uri: str, versions: Mapping[str, int]) -> str:
    return f"{tables.normalise_index_uri(index_uri)}/{STORE_DIR}/{store_name(versions)}"


def dataset_uri(store: str, name: str) -> str:
    """A dataset's location as Lance takes it: a local path, or the object store URI (s3a:// as s3://)."""
    uri = f"{store}/{name}.lance"
    local = storage.local_path(uri)
    if local is not None:
        return local
    return "s3://" + uri.removeprefix("s3a://") if uri.startswith("s3a://") else uri


def lance_options(store: str, settings: StorageSource) -> dict[str, str] | None:
    """Lance reaches object stores through the same Rust object_store crate as deltalake, whose
    option keys it accepts; a local store needs none."""
    return tables.storage_options(settings, store) or None


def read_meta(store: str, settings: StorageSource = None) -> dict[str, Any] | None:
    """The store's metadata, or None when the store is absent or unfinished."""
    import pyarrow.fs as pafs

    fs, path = arrow_fs(f"{store}/{META}", settings)
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return json.loads(read_file(f"{store}/{META}", settings).decode())


def write_meta(store: str, meta: Mapping[str, Any], settings: StorageSource = None) -> None:
    """Write ``store.json``, the mark of a complete store, so that no reader ever sees part of it.

    On a filesystem the text goes to a temporary file beside it, renamed over it (a rename is atomic
    within a directory); on an object store one PUT is already atomic (an object appears whole or not
    at all), and a rename there would be a copy."""
    data = json.dumps(meta, indent=2, sort_keys=True).encode()
    local = storage.local_path(f"{store}/{META}")
    if local is None:
        write_file(f"{store}/{META}", data, settings)
        return
    _replace_local(Path(local), data)


def _replace_local(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def list_stores(index_uri: str, settings: StorageSource = None) -> list[str]:
    """Every store directory of the index (complete or not)."""
    import pyarrow.fs as pafs

    root = f"{tables.normalise_index_uri(index_uri)}/{STORE_DIR}"
    fs, path = arrow_fs(root, settings)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    return sorted(
        f"{root}/{info.base_name}"
        for info in fs.get_file_info(pafs.FileSelector(path))
        if info.type == pafs.FileType.Directory and info.base_name.startswith("v-")
    )


def delete_store(store: str, settings: StorageSource = None) -> None:
    fs, path = arrow_fs(store, settings)
    fs.delete_dir(path)


def table_ids(handles: Mapping[str, Any]) -> dict[str, str]:
    """The Delta table id (set when a table is created) of each opened table."""
    return {name: str(handle.metadata().id) for name, handle in handles.items()}
