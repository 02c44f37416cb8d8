"""The driver's side of the query actors: starting them, keeping each busy, replacing dead ones.

A dead actor (its process crashed or was killed, the memory monitor stopped it, its node went away)
shows up as ``RayActorError`` on the calls it had in flight. The pool then kills what is left of it,
starts a replacement in the same slot (at most ``ray.query_actor_restarts`` times per slot), and sends
those queries again (at most ``ray.query_retries`` times each; then the query becomes one error row).
Only the driver writes result rows, and only for answers it received, so a query whose actor died
mid-answer is never written twice.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from lazygraph.errors import LazyGraphError
from lazygraph.serve.progress import BatchProgress, BatchStats
from lazygraph.serve.queries import BatchQuery
from lazygraph.serve.results import ResultWriter, result_row
from lazygraph.serve.worker import CONTROL_GROUP, EngineFactory, QueryWorker
from lazygraph.settings import RaySettings, Settings


@dataclass
class Slot:
    """One place in the pool; its actor is replaced when it dies."""

    number: int
    handle: Any = None  # None once the slot is given up
    generation: int = 0
    restarts: int = 0
    starting_since: float | None = None  # set while a (replacement) actor is loading
    node_id: str | None = None
    in_flight: int = 0

    @property
    def live(self) -> bool:
        return self.handle is not None and self.starting_since is None


@dataclass
class Call:
    """A call waited on: an answer (``query`` set) or the ``ready()`` of a starting actor."""

    slot: Slot
    handle: Any
    query: BatchQuery | None = None
    node_id: str | None = None
    where_ref: Any = None


def actor_lost_errors() -> tuple[type[BaseException], ...]:
    """The Ray errors that mean the actor's process is gone, so a call may be sent elsewhere."""
    from ray.exceptions import NodeDiedError, ObjectLostError, RayActorError, WorkerCrashedError

    return (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError)


def wait_ready(refs: list[Any], what: str, timeout_s: float) -> list[Any]:
    """The results of ``ready()`` calls; a start that dies or hangs becomes an error that says what to do."""
    import ray
    from ray.exceptions import GetTimeoutError, RayError

    try:
        return ray.get(refs, timeout=timeout_s)
    except GetTimeoutError as exc:
        raise LazyGraphError(
            f"{what} was not ready after {timeout_s:.0f} s: no node has the CPUs/GPUs it asks for free "
            "(see `ray status`; lower ray.actor_num_cpus / ray.actor_num_gpus or add nodes), or loading "
            "takes longer (raise ray.actor_start_timeout_s)."
        ) from exc
    except RayError as exc:
        first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise LazyGraphError(
            f"{what} died while starting: {type(exc).__name__}: {first}. Check the Ray resources "
            "(ray.actor_num_cpus, ray.actor_num_gpus) and memory, then run the same command again."
        ) from exc


def in_flight_limit(ray_settings: RaySettings) -> int:
    """Queries a query actor is sent ahead of its answers: ``max_in_flight_per_actor``, and at least
    one more than it answers at once, so that none of its threads waits for the driver."""
    return max(ray_settings.max_in_flight_per_actor, ray_settings.queries_per_actor + 1)


class QueryPool:
    """Query actors in slots; ``run`` answers queries through them and returns those never attempted."""

    def __init__(
        self,
        settings: Settings,
        index: str,
        engine_factory: EngineFactory,
        llm_handle: Any | None,
        handles: list[Any],
        console: Console,
        snapshot: Any | None = None,
    ) -> None:
        import ray

        self.ray_settings = settings.ray
        # ``snapshot``: an object ref of the index snapshot that every actor shares (None: each opens it).
        self.actor_args = (settings, index, engine_factory, llm_handle, snapshot)
        self.handles = handles  # every actor started, killed by the caller at the end
        self.console = console
        self.slots: list[Slot] = []
        # Actors are named after the run, their slot and generation, so an operator can find them
        # with `ray list actors` or ray.util.list_named_actors().
        self.run_name = f"lazygraph-query-{uuid.uuid4().hex[:8]}"
        self.placements: list[dict[str, Any]] = []
        self.queue: deque[BatchQuery] = deque()
        self.pending: dict[Any, Call] = {}
        self.deaths: dict[str, int] = {}
        # Concurrency groups are part of the actor class (Ray refuses them in .options()).
        self._actor_class = ray.remote(concurrency_groups={CONTROL_GROUP: 1})(QueryWorker)
        # Query actors need a GPU only when each loads its own vLLM engine.
        self._options = {
            # Threads answering queries at once (``where`` has its own, in the control group).
            "max_concurrency": self.ray_settings.queries_per_actor,
            "num_cpus": self.ray_settings.actor_num_cpus,
            "num_gpus": 0.0 if llm_handle is not None else self.ray_settings.actor_num_gpus,
            # Spread over the nodes: one lost node then takes few actors, and index snapshots share
            # the memory of several machines.
            "scheduling_strategy": "SPREAD",
        }

    # ---- starting -------------------------------------------------------------------------------------
    def start(self, count: int) -> None:
        """Start ``count`` actors and wait until each has opened the index; raises on the first failure."""
        import ray

        calls = [self._spawn(Slot(number)) for number in range(count)]
        self.slots = [call.slot for call in calls]
        refs = [call.handle.ready.remote() for call in calls]
        errors = wait_ready(refs, "a query actor", self.ray_settings.actor_start_timeout_s)
        first_error = next((e for e in errors if e is not None), None)
        if first_error is not None:
            raise first_error
        for call, where in zip(calls, ray.get([c.where_ref for c in calls]), strict=True):
            self._placed(call.slot, where)

    def _spawn(self, slot: Slot) -> Call:
        slot.generation += 1
        name = f"{self.run_name}-{slot.number}.{slot.generation}"
        handle = self._actor_class.options(name=name, **self._options).remote(*self.actor_args)
        self.handles.append(handle)
        slot.handle, slot.node_id, slot.in_flight = handle, None, 0
        slot.starting_since = time.monotonic()
        # where() runs in its own thread, after the constructor: it is answered as soon as ready() is.
        return Call(slot, handle, where_ref=handle.where.remote())

    def _placed(self, slot: Slot, where: dict[str, Any]) -> None:
        slot.starting_since = None
        slot.node_id = where.get("node_id")
        self.placements.append(
            {
                "actor": slot.number,
                "generation": slot.generation,
                "node_id": slot.node_id,
                "pid": where["pid"],
            }
        )

    # ---- answering ------------------------------------------------------------------------------------
    def run(
        self,
        todo: list[BatchQuery],
        writer: ResultWriter,
        stats: BatchStats,
        progress: BatchProgress,
        request: tuple[str, str | None, int | None],
    ) -> list[BatchQuery]:
        """Answer ``todo`` with (method, preset, budget); returns the queries left if every actor is gone."""
        import ray

        self.writer, self.stats, self.request = writer, stats, request
        stats.started = time.monotonic()  # the rate is of answering, not of starting actors
        self.queue = deque(todo)
        self._fill()
        wait_s = min(5.0, self.ray_settings.flush_interval_s)
        while self._busy():
            done, _ = ray.wait(list(self.pending), num_returns=1, timeout=wait_s)
            if done:
                call = self.pending.pop(done[0])
                if call.query is None:
                    self._on_ready(call, done[0])
                else:
                    self._on_answer(call, done[0])
            writer.flush_if_due()
            self._check_start_timeouts()
            self._fill()
            progress.update()
        return list(self.queue)

    def _busy(self) -> bool:
        """Answers are on their way, or queries wait and an actor is starting to take them."""
        answering = any(call.query is not None for call in self.pending.values())
        return answering or (bool(self.queue) and bool(self.pending))

    def _fill(self) -> None:
        """Top every live actor up to its ``in_flight_limit``, one round at a time, so that a small
        batch is spread over all actors rather than queued on the first."""
        for depth in range(in_flight_limit(self.ray_settings)):
            for slot in self.slots:
                if self.queue and slot.live and slot.in_flight <= depth:
                    self._submit(slot, self.queue.popleft())

    def _submit(self, slot: Slot, query: BatchQuery) -> None:
        method, preset, budget = self.request
        ref = slot.handle.answer.remote(query.query_id, query.question, method, preset, budget)
        self.pending[ref] = Call(slot, slot.handle, query, slot.node_id)
        slot.in_flight += 1

    def _on_answer(self, call: Call, ref: Any) -> None:
        import ray
        from ray.exceptions import RayError

        assert call.query is not None
        if call.slot.handle is call.handle:
            call.slot.in_flight -= 1
        try:
            row = ray.get(ref)
        except actor_lost_errors() as exc:
            self._actor_lost(call.slot, call.handle, exc)
            self._retry_or_fail(call.query, exc)
            return
        except RayError as exc:  # the call failed, the actor lives on: this query's error row
            row = result_row(call.query.query_id, call.query.question, error=f"{type(exc).__name__}: {exc}")
        self._write(row, call.node_id)

    def _write(self, row: dict[str, Any], node_id: str | None) -> None:
        self.writer.add(row)
        self.stats.record(row, node_id)

    def _retry_or_fail(self, query: BatchQuery, exc: BaseException) -> None:
        deaths = self.deaths[query.query_id] = self.deaths.get(query.query_id, 0) + 1
        if deaths <= self.ray_settings.query_retries:
            self.stats.retried.add(query.query_id)
            self.queue.appendleft(query)  # answered next, not after the whole queue
            return
        error = (
            f"the query actor answering it died {deaths} times (last: {_first_line(exc)}); the query may "
            "crash the model or exhaust the node's memory: check the actor logs (`ray logs`), then run "
            "the batch again to retry it, or raise ray.query_retries"
        )
        self._write(result_row(query.query_id, query.question, error=error), None)

    # ---- dead and starting actors ---------------------------------------------------------------------
    def _actor_lost(self, slot: Slot, handle: Any, exc: BaseException) -> None:
        """Replace the slot's actor, once per death: its other calls in flight report the same death."""
        if slot.handle is not handle:
            return
        self._kill(slot)
        if slot.restarts >= self.ray_settings.query_actor_restarts:
            self._say(
                f"query actor {slot.number} died ({_first_line(exc)}) and has had its "
                f"{self.ray_settings.query_actor_restarts} restarts (ray.query_actor_restarts); "
                "going on with the others"
            )
            return
        slot.restarts += 1
        self.stats.actor_restarts += 1
        self._say(f"query actor {slot.number} died ({_first_line(exc)}); starting a new one")
        call = self._spawn(slot)
        self.pending[call.handle.ready.remote()] = call

    def _on_ready(self, call: Call, ref: Any) -> None:
        import ray
        from ray.exceptions import RayError

        slot = call.slot
        if slot.handle is not call.handle:
            return
        try:
            error = ray.get(ref)
            where = ray.get(call.where_ref)
        except actor_lost_errors() as exc:  # died while loading: that is a restart used, too
            self._actor_lost(slot, call.handle, exc)
            return
        except RayError as exc:
            error = LazyGraphError(f"{type(exc).__name__}: {_first_line(exc)}")
        if error is not None:
            self._kill(slot)
            self._say(f"the new query actor {slot.number} could not start ({error}); going on without it")
            return
        self._placed(slot, where)

    def _check_start_timeouts(self) -> None:
        limit = self.ray_settings.actor_start_timeout_s
        now = time.monotonic()
        for ref, call in list(self.pending.items()):
            since = call.slot.starting_since
            if call.query is None and since is not None and now - since > limit:
                del self.pending[ref]
                self._kill(call.slot)
                self._say(
                    f"the new query actor {call.slot.number} was not ready after {limit:.0f} s "
                    "(ray.actor_start_timeout_s; see `ray status`); going on without it"
                )

    def _kill(self, slot: Slot) -> None:
        import ray

        ray.kill(slot.handle, no_restart=True)
        slot.handle, slot.starting_since, slot.in_flight = None, None, 0

    def _say(self, message: str) -> None:
        self.console.print(f"[yellow]{escape(message)}[/]", highlight=False)


def _first_line(exc: BaseException) -> str:
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
