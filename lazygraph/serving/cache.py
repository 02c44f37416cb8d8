"""A bounded, thread-safe least-recently-used cache of lookups by key.

A reader asks for many keys at once (the chunks of a ranking, the communities of a set of chunks): the
cache answers the keys it holds and names the rest, which the reader fetches in one Lance query.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``size`` entries (0: caches nothing); the least recently used goes first.

    With ``weight`` (an entry's cost, e.g. its rows) and ``max_weight``, the entries' total weight is
    bounded too: one community can hold a hundred thousand chunks, so a count of entries alone does not
    bound the memory. An entry heavier than ``max_weight`` on its own is not kept."""

    def __init__(
        self, size: int, *, weight: Callable[[V], int] | None = None, max_weight: int | None = None
    ) -> None:
        self.size = size
        self._weight = weight
        self.max_weight = max_weight
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self.total_weight = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def split(self, keys: Iterable[K]) -> tuple[dict[K, V], list[K]]:
        """The cached entries of ``keys``, and the distinct keys not cached (in the order given)."""
        found: dict[K, V] = {}
        missing: list[K] = []
        with self._lock:
            for key in dict.fromkeys(keys):
                if key in self._entries:
                    self._entries.move_to_end(key)
                    found[key] = self._entries[key]
                else:
                    missing.append(key)
            self.hits += len(found)
            self.misses += len(missing)
        return found, missing

    def put_many(self, entries: dict[K, V]) -> None:
        if self.size <= 0:
            return
        with self._lock:
            for key, value in entries.items():
                weight = self._weight(value) if self._weight else 0
                if self.max_weight is not None and weight > self.max_weight:
                    continue
                self._drop(key)
                self._entries[key] = value
                self._weights[key] = weight
                self.total_weight += weight
            while len(self._entries) > self.size or (
                self.max_weight is not None and self.total_weight > self.max_weight
            ):
                self._drop(next(iter(self._entries)))

    def _drop(self, key: K) -> None:
        if key in self._entries:
            del self._entries[key]
            self.total_weight -= self._weights.pop(key)
