"""Which index source a query reads (``query.index_source``): the in-memory snapshot or the serving store.

``snapshot`` and ``store`` are taken as set. ``auto`` reads the store when the query's method can run
on it, the index is large (``serving.store_above_chunks`` chunks in its last complete run) and the
store of the run's versions opens; otherwise the snapshot. Falling back on a large index is said in
one console line, since the snapshot then costs the memory and load time the store would have saved.
"""

from __future__ import annotations

import json
from typing import Literal

from rich.console import Console

from lazygraph import manifest, tables
from lazygraph.errors import IndexStateError, LazyGraphError
from lazygraph.query.search import SEARCHES
from lazygraph.serving import ServingStore, layout
from lazygraph.settings import Settings

Source = Literal["snapshot", "store"]


def resolve_index_source(settings: Settings, index: str, method: str, console: Console | None) -> Source:
    """The source a query of ``method`` (the planned one, after any preset) reads the index from."""
    chosen = settings.query.index_source
    if chosen != "auto":
        return chosen
    serves = SEARCHES[method].serves_from_store
    uri = tables.normalise_index_uri(index)
    try:
        run = manifest.last_complete_run(uri, settings)
    except LazyGraphError:
        if serves:
            raise
        # Only the notice below needed the manifest: the snapshot loader reports what is wrong.
        return "snapshot"
    if run is None:  # nothing to size; the snapshot loader says what is wrong with the index
        return "snapshot"
    chunks = indexed_chunks(uri, run, settings)
    threshold = settings.serving.store_above_chunks
    if chunks is None or chunks < threshold:
        return "snapshot"
    if not serves:
        _notice(
            console,
            f"the {method} method needs the snapshot, so {chunks:,} chunks are loaded in memory; "
            "use --method vector or --method hybrid to read the serving store instead",
        )
        return "snapshot"
    try:
        store = ServingStore.open(uri, settings)
    except IndexStateError as exc:  # missing, unfinished or of older versions (StoreOutOfDateError)
        _notice(console, f"{exc}; loading the snapshot of {chunks:,} chunks meanwhile")
        return "snapshot"
    if not SEARCHES[method].store_serves(store):
        _notice(
            console,
            f"the serving store {store.uri} was written before it held what the {method} method reads "
            f"(rebuild it with `lazygraph store build --index {uri} --force`); loading the snapshot of "
            f"{chunks:,} chunks meanwhile",
        )
        return "snapshot"
    return "store"


def with_index_source(settings: Settings, source: Source) -> Settings:
    """The settings with ``query.index_source`` fixed to ``source`` (what a batch's actors are given,
    so that each opens the source the driver chose without choosing again)."""
    if settings.query.index_source == source:
        return settings
    query = settings.query.model_copy(update={"index_source": source})
    return settings.model_copy(update={"query": query})


def indexed_chunks(uri: str, run: dict, settings: Settings) -> int | None:
    """The chunk count of a complete run, read without loading a table: the count its manifest row
    records, else the row count in the metadata of its serving store; None when neither is there."""
    recorded = json.loads(run.get("counts_json") or "{}").get("tables", {})
    if tables.CHUNKS in recorded:
        return int(recorded[tables.CHUNKS])
    versions = layout.source_versions(manifest.run_versions(run, uri))
    meta = layout.read_meta(layout.store_uri(uri, versions), settings)
    if meta is None:
        return None
    return int(meta.get("datasets", {}).get(layout.CHUNKS, 0))


def _notice(console: Console | None, why: str) -> None:
    """One line on the console: the query still runs, from the snapshot."""
    line = f"query.index_source auto: reading the snapshot, not the serving store: {why}"
    (console or Console(stderr=True)).print(line, soft_wrap=True, highlight=False)
