"""The serving store of an index: ``build_store`` writes it, ``open_store`` opens it for lookups.

The store is derived from the Delta tables at the versions the index's manifest names
(``lazygraph.serving``); the query engine does not read from it yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
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
    it exists (``force``: rebuild it); the store's metadata, with ``built`` saying whether it was written."""
    from lazygraph.serving import build_store as build

    settings = settings if settings is not None else load_settings()
    console = console if console is not None else Console(stderr=True)
    target = index or settings.storage.index
    encode = _lazy_encoder(settings) if settings.serving.concept_vectors else None
    with console.status(f"building the serving store of {target}"):
        return build(target, settings, encode=encode, force=force)


def open_store(index: str | None = None, *, settings: Settings | None = None) -> ServingStore:
    """The serving store of ``index`` (default ``storage.index``); ``StoreOutOfDateError`` when it is
    missing or was built from table versions the index's manifest no longer names."""
    from lazygraph.serving import ServingStore

    settings = settings if settings is not None else load_settings()
    return ServingStore.open(index or settings.storage.index, settings)


def _lazy_encoder(settings: Settings) -> Callable[[list[str]], np.ndarray]:
    """The embedding model's encoder, loaded on the first call: an index without concepts never loads it."""
    loaded: list[Any] = []

    def encode(texts: list[str]) -> np.ndarray:
        if not loaded:
            from lazygraph.embed import get_embedder

            loaded.append(get_embedder(settings.embedding))
        return np.asarray(loaded[0].encode(list(texts)), dtype=np.float32)

    return encode
