"""The serving store of every version an index run publishes, built by the run itself.

Every run that writes a manifest row (create, ``--append``, ``--delete``, a rerun, each ``--watch``
micro-batch, and ``lazygraph maintain`` after compacting) calls ``build_after_publish`` right after the
row is written, while it still holds the index's writer lease: no other run can publish newer versions
or build a store meanwhile, and a run that lost its lease leaves the store unfinished (``store.json`` is
written only after the lease is checked, ``build_store(confirm=...)``).

The store is rebuilt in full, not updated: its Lance datasets are derived from exact Delta versions, a
store is named by those versions and never changed in place (``layout``), and carrying the rows that
changed between two versions (Delta's change data feed) into a copy of the previous store is future
work. A run that changed no source table (a rerun) names the same versions, so its store is reused.

A failed build never fails the run: its Delta versions are already published and queries do not need
the store. The run's report says ``failed`` with the reason, and the console says how to build it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from lazygraph import tables
from lazygraph.serving.earlier_vectors import encoder_key
from lazygraph.serving.writer import Encode, build_store

if TYPE_CHECKING:
    from rich.console import Console

    from lazygraph.settings import Settings
    from lazygraph.tables.lease import WriterLease

# The status of the store in a run's report (``serving_store``).
BUILT, REUSED, SKIPPED, FAILED = "built", "reused", "skipped", "failed"


def build_after_publish(
    settings: Settings,
    index: str,
    console: Console,
    *,
    lease: WriterLease | None = None,
    encode: Encode | None = None,
) -> dict[str, Any]:
    """Build (or reuse) the serving store of the versions the index's manifest names now; the report
    entry: ``status`` (built, reused, skipped when ``serving.build_on_index`` is off, failed), with the
    store and seconds, or the ``message`` of a failure. Never raises for a failed build.

    ``lease``: the writer lease the caller holds, checked before the store is marked complete;
    ``encode``: embeds concept names (None: the embedding model, loaded only when the store is built)."""
    if not settings.serving.build_on_index:
        return {"status": SKIPPED, "message": "serving.build_on_index is off"}
    started = time.perf_counter()
    if encode is None and settings.serving.concept_vectors:
        encode = concept_encoder(settings)
    try:
        meta = build_store(index, settings, encode=encode, confirm=lease.check if lease is not None else None)
    # A store is derived data: whatever went wrong (storage, Lance, the embedding model, a lost lease),
    # the run it follows is published already and must not be reported as failed.
    except Exception as exc:  # noqa: BLE001
        return _failed(index, exc, console)
    report = {
        "status": BUILT if meta["built"] else REUSED,
        "store": meta["store"],
        "seconds": round(time.perf_counter() - started, 3),
    }
    if meta["built"] and meta.get("concept_vectors"):
        report["concept_vectors_reused"] = meta.get("concept_vectors_reused", 0)
    return report


def _failed(index: str, exc: Exception, console: Console) -> dict[str, Any]:
    from rich.markup import escape

    message = _first_line(exc)
    uri = tables.normalise_index_uri(index)
    console.print(
        f"[yellow]serving store not built ({escape(message)}); the index run is published; "
        f"run `lazygraph store build --index {escape(uri)}`[/]",
        soft_wrap=True,
        highlight=False,
    )
    return {"status": FAILED, "message": message}


def _first_line(exc: Exception) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    text = text if len(text) <= 300 else text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ConceptEncoder:
    """The embedding model's encoder of concept names, loaded on the first call: a store that is reused,
    or an index without concepts, never loads it. ``key`` names the model's settings, so that a store
    can take the vectors of names an earlier store encoded with the same model (``earlier_vectors``)."""

    def __init__(self, settings: Settings) -> None:
        self.embedding = settings.embedding
        self.key = encoder_key(settings.embedding)
        self._model: Any = None

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            from lazygraph.embed import get_embedder

            self._model = get_embedder(self.embedding)
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)


def concept_encoder(settings: Settings) -> Callable[[list[str]], np.ndarray]:
    """The encoder of concept names the index's stores use (``ConceptEncoder``)."""
    return ConceptEncoder(settings)
