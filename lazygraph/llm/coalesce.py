"""Merging concurrent requests for one engine into as few engine calls as possible.

A GPU engine (vLLM) schedules one large batch far better than many small ones arriving together, so
the LLM actor passes every relevance request through a ``BatchCoalescer``: requests that arrive while
the engine is busy are run together in its next batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Request:
    items: list[Any]
    results: list[Any] | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class BatchCoalescer:
    """Merges concurrent ``submit`` calls into as few ``run`` calls as possible, one at a time.

    A caller queues its items, then waits for the engine lock. Whoever gets the lock runs every
    request queued so far in one batch and hands each caller its share; callers whose request was
    served by someone else's batch return at once.
    """

    def __init__(self, run: Callable[[list[Any]], list[Any]], max_batch_items: int = 4096) -> None:
        self._run = run
        self._max_batch_items = max_batch_items
        self._queue: list[_Request] = []
        self._queue_lock = threading.Lock()
        self.engine_lock = threading.Lock()
        self.batch_sizes: list[int] = []

    def submit(self, items: Sequence[Any]) -> list[Any]:
        request = _Request(list(items))
        with self._queue_lock:
            self._queue.append(request)
        while not request.done:
            with self.engine_lock:
                if not request.done:
                    self._run_queued()
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results

    def _take_queued(self) -> list[_Request]:
        with self._queue_lock:
            taken, size = [], 0
            while self._queue and (not taken or size + len(self._queue[0].items) <= self._max_batch_items):
                request = self._queue.pop(0)
                taken.append(request)
                size += len(request.items)
            return taken

    def _run_queued(self) -> None:
        taken = self._take_queued()
        flat = [item for request in taken for item in request.items]
        try:
            results = self._run(flat) if flat else []
            error = None
        except BaseException as exc:  # handed to every caller of this batch
            results, error = [], exc
        self.batch_sizes.append(len(flat))
        start = 0
        for request in taken:
            if error is None:
                request.results = results[start : start + len(request.items)]
                start += len(request.items)
            request.error = error
            request.done = True
