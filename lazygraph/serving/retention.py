"""Which serving stores an index keeps: those named by the versions of a live run.

Every run that changes a source table publishes new versions, and its store lives in a new directory
(``layout``), so stores pile up as runs do. `lazygraph maintain` keeps the stores its live runs pin (the
runs whose table versions it keeps readable, ``tables.maintain.live_runs``: a query that opened one of
those stores can go on reading it) and removes every other, complete or not (an unfinished build).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lazygraph import tables
from lazygraph.manifest import run_versions
from lazygraph.serving import layout

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource


def pinned_stores(index: str, runs: Iterable[dict[str, Any]]) -> set[str]:
    """The store locations the runs' recorded versions name (whether built or not)."""
    uri = tables.normalise_index_uri(index)
    return {layout.store_uri(uri, layout.source_versions(run_versions(run, uri))) for run in runs}


def remove_unpinned_stores(
    index: str, live_runs: Iterable[dict[str, Any]], settings: StorageSource = None, dry_run: bool = False
) -> list[str]:
    """Remove the index's stores that no live run names; the stores removed (with ``dry_run``: that
    would be, and nothing is removed). Called under the writer lease: no store is being built."""
    keep = pinned_stores(index, live_runs)
    removed = [store for store in layout.list_stores(index, settings) if store not in keep]
    if not dry_run:
        for store in removed:
            layout.delete_store(store, settings)
    return removed
