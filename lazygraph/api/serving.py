"""The serving store of an index: ``build_store`` writes it, ``open_store`` opens it for lookups.

The store is derived from the Delta tables at the versions the index's manifest names
(``lazygraph.serving``) and is built by every index run (``serving.build_on_index``); ``build_store``
builds it on request, under the index's writer lease. Queries read it for the methods it serves
(``query.index_source``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

from lazygraph.settings import Settings, load_settings

if TYPE_CHECKING:
    from lazygraph.serving import ServingStore


def build_store(
    index: str | None = None,
    *,
    settings: Settings | None = None,
    console: Console | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Build the serving store of ``index`` (default ``storage.index``) for its last complete run, unless
    it exists (``force``: rebuild it); the store's metadata, with ``built`` saying whether it was written.

    Holds the index's writer lease while it builds (waiting up to ``writer.wait_s`` for a run that
    holds it), so that no index run publishes other versions, or builds the same store, meanwhile."""
    from lazygraph.run_context import new_run_id
    from lazygraph.serving import build_store as build
    from lazygraph.serving.publish import concept_encoder
    from lazygraph.tables.lease import writer_lease

    settings = settings if settings is not None else load_settings()
    console = console if console is not None else Console(stderr=True)
    target = index or settings.storage.index
    encode = concept_encoder(settings) if settings.serving.concept_vectors else None
    building = console.status(f"building the serving store of {target}")
    with writer_lease(settings, target, new_run_id(), console) as lease, building:
        return build(target, settings, encode=encode, force=force, confirm=lease.check)


def open_store(index: str | None = None, *, settings: Settings | None = None) -> ServingStore:
    """The serving store of ``index`` (default ``storage.index``); ``StoreOutOfDateError`` when it is
    missing or was built from table versions the index's manifest no longer names."""
    from lazygraph.serving import ServingStore

    settings = settings if settings is not None else load_settings()
    return ServingStore.open(index or settings.storage.index, settings)
