"""A bounded, thread-safe least-recently-used cache of lookups by key.

A reader asks for many keys at once (the chunks of a ranking, the communities of a set of chunks): the
cache answers the keys it holds and names the rest, which the reader fetches in one Lance query.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``size`` entries (0: caches nothing); the least recently used goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
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
                self._entries[key] = value
                self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
