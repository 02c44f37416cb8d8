"""Loading a snapshot from the Delta tables of an index, once per process and complete run.

Tables are read at the versions the index's last complete run recorded in its manifest
(lazygraph.manifest), and snapshots are cached per index URI and those versions: a process that
answers many queries reads the tables once.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import TYPE_CHECKING

from lazygraph import manifest, tables
from lazygraph.errors import IndexStateError
from lazygraph.query.snapshot.build import build_snapshot
from lazygraph.query.snapshot.columns import keys, positions
from lazygraph.query.snapshot.model import IndexSnapshot
from lazygraph.settings import Settings, VectorIndexSettings
from lazygraph.tables.read import read_table

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource

_REQUIRED = (tables.CHUNKS, tables.CHUNK_EMBEDDINGS)
_OPTIONAL = (
    tables.CONCEPTS,
    tables.MENTIONS,
    tables.EDGES,
    tables.COMMUNITIES,
    tables.CONCEPT_COMMUNITIES,
    tables.CHUNK_COMMUNITIES,
    tables.CHUNK_TERMS,  # absent from indexes built before it: no lexical signal then
)

_CACHE: dict[tuple, IndexSnapshot] = {}
_CACHE_LOCK = threading.Lock()


def load_snapshot(index: str, settings: StorageSource = None) -> IndexSnapshot:
    """The snapshot of ``index`` as of its last complete indexing run (cached per process).

    Every table is read at the version that run recorded in the manifest, never at its latest: a run
    in progress (or killed) may have written some tables and not others. The cache key is those
    versions, so a process sees a new snapshot once a later run completes. ``settings`` reach the
    index's storage and, when they are the whole settings, choose its vector index (``vectors``; a
    storage section alone, or None, takes the defaults).
    """
    uri = tables.normalise_index_uri(index)
    run, recorded = manifest.complete_versions(uri, settings)
    versions = tuple(sorted((n, v) for n, v in recorded.items() if n in _REQUIRED + _OPTIONAL))
    missing = [n for n in _REQUIRED if n not in recorded]
    if missing:
        raise IndexStateError(
            f"the index at {uri} has no {', '.join(missing)} in its last complete run; "
            f"rebuild it in a new directory with `lazygraph index --input DOCS --index DIR`"
        )
    build = _vector_build(uri, recorded[tables.CHUNK_EMBEDDINGS], settings)
    # the run too: a directory rebuilt from scratch reuses versions
    key = (uri, run["run_id"], versions, build)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    handles = manifest.open_complete(uri, _REQUIRED + _OPTIONAL, recorded, settings)
    arrow = {}
    for name, dt in handles.items():
        # With an approximate index the vectors stay on disk: only ids and the model name are read.
        columns = ["chunk_id", "model"] if build and name == tables.CHUNK_EMBEDDINGS else None
        arrow[name] = read_table(dt, settings, columns=columns)
    snapshot = build_snapshot(uri, versions, arrow)
    snapshot.index_version = manifest.index_version(run)
    if build is not None:
        from lazygraph.vectors.store import load_vector_index

        chunk_keys = keys(arrow[tables.CHUNKS], "chunk_id")
        locate = partial(positions, universe=chunk_keys)
        snapshot.vector_index = load_vector_index(build, locate, _vector_settings(settings), settings)
    with _CACHE_LOCK:
        _CACHE[key] = snapshot
    return snapshot


def _vector_settings(settings: StorageSource) -> VectorIndexSettings:
    return settings.vectors if isinstance(settings, Settings) else VectorIndexSettings()


def _vector_build(uri: str, embeddings_version: int, settings: StorageSource) -> str | None:
    """The approximate index to load instead of the embedding matrix (None: exact search)."""
    from lazygraph.vectors.store import usable_build

    return usable_build(uri, embeddings_version, _vector_settings(settings), settings)


def clear_cache() -> None:
    """Forget every loaded snapshot: the next load reads the tables again."""
    with _CACHE_LOCK:
        _CACHE.clear()
