"""`lazygraph batch`: many queries through a pool of Ray query actors into a resumable Delta table.

The driver keeps every actor busy (``ray.max_in_flight_per_actor`` queries sent to each ahead of its
answers; an actor answers ``ray.queries_per_actor`` at once, in threads), replaces an
actor whose process dies and sends its queries again (``lazygraph.serve.pool``), writes answers as they
arrive in small Delta commits, and on a re-run answers only the queries that are not yet ``ok`` in the
output table by the index's current version.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.errors import ConfigError, LazyGraphError
from lazygraph.llm.base import LLMClient
from lazygraph.query.engine import check_index_source, choose_index_source
from lazygraph.query.search import SEARCHES
from lazygraph.query.source import with_index_source
from lazygraph.serve.llm_actor import LLMActor, uses_shared_llm_actor
from lazygraph.serve.pool import QueryPool, in_flight_limit, wait_ready
from lazygraph.serve.progress import BatchProgress, BatchStats
from lazygraph.serve.queries import BatchQuery, read_queries
from lazygraph.serve.ray_runtime import ensure_ray
from lazygraph.serve.results import ResultWriter
from lazygraph.serve.worker import EngineFactory, open_query_engine
from lazygraph.settings import Settings
from lazygraph.tables import StorageSource
from lazygraph.tables.results import STATUS_OK, Answered, read_answered, results_uri


def run_batch(
    settings: Settings,
    index: str,
    queries_file: Path,
    out: str,
    preset: str | None = None,
    budget: int | None = None,
    method: str = "lazy",
    console: Console | None = None,
    engine_factory: EngineFactory | None = None,
    llm_client_factory: Callable[[], LLMClient] | None = None,
    rerun_stale: bool = True,
) -> dict[str, Any]:
    """Answer the queries not yet answered in ``out`` by the index as it is now; returns a report.

    A query whose row is ``ok`` but was answered by another version of the index (``index_version``)
    is answered again unless ``rerun_stale`` is False; its new row replaces the old one, and the LLM
    cache answers what the index change did not touch.

    ``engine_factory(settings, index, roles)`` builds each actor's engines (default: ``ray.engine_factory``,
    else QueryEngine.open); ``roles`` is None unless the actor's LLM clients forward to the shared LLM
    actor. ``llm_client_factory`` hosts that client in one shared LLM actor; without it, a shared actor
    is started only when the relevance role is vLLM (``ray.shared_relevance_actor``).
    """
    _check_options(settings, method, preset, budget)
    factory = engine_factory or configured_engine_factory(settings)
    console = console or Console(stderr=True)
    queries = read_queries(Path(queries_file))
    uri = results_uri(out)
    answered = read_answered(uri, settings)
    current = current_index_version(index, settings)
    todo, stale = plan_work(queries, answered, current, rerun_stale)
    report = _new_report(uri, queries, todo) | {"index_version": current, "stale_reanswered": len(stale)}
    if not todo:
        console.print(
            f"all {len(queries)} queries are already answered in {uri} by this version of the index; "
            "nothing to do"
        )
        return report
    if stale:
        console.print(f"{len(stale)} answers are of an older version of the index: answering them again")

    # Chosen once here: every actor is given the source, so none chooses (or says why) again.
    report["index_source"] = choose_index_source(settings, index, method, preset, console)
    settings = with_index_source(settings, report["index_source"])
    start = time.perf_counter()
    # A failed query is tried again; its new row replaces the error row, so the table keeps one row per query.
    report["retried_errors"] = sum(
        1 for q in todo if q.query_id in answered and answered[q.query_id].status != STATUS_OK
    )
    stats = BatchStats(total=len(todo))
    started_ray = ensure_ray(settings)
    handles: list[Any] = []  # every actor started here, killed at the end whatever happens
    try:
        llm_handle = _start_llm_actor(settings, llm_client_factory, handles)
        snapshot = _share_snapshot(settings, index, console) if _shares_snapshot(settings, factory) else None
        pool = QueryPool(settings, index, factory, llm_handle, handles, console, snapshot)
        pool.start(min(settings.ray.query_actors, len(todo)))
        report["actors"], report["shared_llm_actor"] = len(pool.slots), llm_handle is not None
        writer = ResultWriter(
            uri,
            settings.ray.flush_every,
            settings.ray.flush_interval_s,
            settings,
            existing=answered,
            index_version=current,
        )
        with BatchProgress(console, stats) as progress:
            try:
                left = pool.run(todo, writer, stats, progress, (method, preset, budget))
            finally:
                writer.flush()  # also on Ctrl-C, or SIGTERM (ray.init makes it SystemExit): answers are kept
        report.update(
            answered=stats.answered,
            errors=stats.failed,
            not_attempted=len(left),
            commits=writer.commits,
            actor_placements=pool.placements,
        )
        if llm_handle is not None:
            report["llm_actor_restarts"] = llm_actor_restarts(llm_handle)
    finally:
        _stop(handles, started_ray)
    report.update(stats.to_report(), seconds=round(time.perf_counter() - start, 3))
    if report["not_attempted"]:
        raise _pool_lost(report["not_attempted"], uri)
    return report


def current_index_version(index: str, settings: StorageSource = None) -> str | None:
    """The version of the index's last complete run (None when there is none: the engines say why)."""
    from lazygraph.manifest import index_version, last_complete_run

    try:
        run = last_complete_run(index, settings)
    except LazyGraphError:
        return None
    return index_version(run) if run is not None else None


def plan_work(
    queries: list[BatchQuery], answered: dict[str, Answered], current: str | None, rerun_stale: bool
) -> tuple[list[BatchQuery], list[BatchQuery]]:
    """(the queries to answer, those of them whose ok answer is of another index version). A query is
    done when its row is ok and, with ``rerun_stale``, was answered by the ``current`` version."""
    todo, stale = [], []
    for query in queries:
        row = answered.get(query.query_id)
        if row is None or row.status != STATUS_OK:
            todo.append(query)
        elif rerun_stale and row.index_version != current:
            todo.append(query)
            stale.append(query)
    return todo, stale


def llm_actor_restarts(handle: Any) -> int | None:
    """How many times Ray restarted the shared LLM actor (None when Ray cannot tell)."""
    try:
        from ray._private import state  # the GCS's actor table; the public state API needs the dashboard

        return int(state.actors(handle._actor_id.hex()).get("NumRestarts", 0))
    except Exception:  # a Ray without this table: the report leaves the figure out
        return None


def _pool_lost(not_attempted: int, uri: str) -> LazyGraphError:
    return LazyGraphError(
        f"every query actor died and none could be restarted (ray.query_actor_restarts); "
        f"{not_attempted} queries were not attempted. The answers so far are saved in {uri}; check the "
        "actor logs (`ray logs`) and the cluster's memory, then run the same command again to resume."
    )


def _new_report(uri: str, queries: list[BatchQuery], todo: list[BatchQuery]) -> dict[str, Any]:
    return {
        "out": uri,
        "queries": len(queries),
        "skipped_already_ok": len(queries) - len(todo),
        "answered": 0,
        "errors": 0,
        "not_attempted": 0,
        "actors": 0,
        "shared_llm_actor": False,
        "commits": 0,
        "retried_errors": 0,
        "seconds": 0.0,
        "actor_placements": [],
    } | BatchStats(total=0).to_report()


def _shares_snapshot(settings: Settings, factory: EngineFactory) -> bool:
    """Whether the driver loads the snapshot for the actors: for the default engine on the snapshot.
    On the serving store each actor opens the store itself, and nothing index-sized is put in Ray."""
    return factory is open_query_engine and settings.query.index_source == "snapshot"


def _share_snapshot(settings: Settings, index: str, console: Console) -> Any:
    """The index snapshot, loaded once by the driver and put in Ray's object store.

    Every query actor receives it from there: on one node, all of them read the same arrays (texts,
    embeddings, CSR arrays are buffers, deserialised without a copy); another node fetches it once.
    """
    import ray

    from lazygraph.query.snapshot import load_snapshot

    with console.status(f"loading index {index} once for every query actor"):
        return ray.put(load_snapshot(index, settings))


def configured_engine_factory(settings: Settings) -> EngineFactory:
    """``ray.engine_factory`` ("module:callable") imported, or the lazy query engine when unset."""
    path = settings.ray.engine_factory
    if not path:
        return open_query_engine
    module_name, _, attribute = path.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"ray.engine_factory {path!r} cannot be loaded ({type(exc).__name__}: {exc}); give "
            "'module:callable' with the module importable here and on every Ray node, or unset it"
        ) from exc
    if not callable(factory):
        raise ConfigError(f"ray.engine_factory {path!r} is not callable; name a function or a class")
    return factory


def _check_options(settings: Settings, method: str, preset: str | None, budget: int | None) -> None:
    """Refuse bad options before any actor starts, rather than with one error row per query."""
    if method not in SEARCHES:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(SEARCHES)}")
    if preset is not None:
        settings.preset(preset)
    if budget is not None and budget < 0:
        raise ConfigError("the relevance-test budget must be 0 or more")
    check_index_source(settings, method, preset)  # the lazy method needs the snapshot


def _stop(handles: list[Any], started_ray: bool) -> None:
    import ray

    for handle in handles:
        ray.kill(handle)
    if started_ray:
        ray.shutdown()


def _start_llm_actor(
    settings: Settings, client_factory: Callable[[], LLMClient] | None, handles: list[Any]
) -> Any | None:
    if client_factory is None and not uses_shared_llm_actor(settings):
        return None
    import ray

    gpus = settings.ray.actor_num_gpus
    if client_factory is None and gpus <= 0:
        raise ConfigError(
            "llm.relevance.backend is vllm, so the shared relevance actor needs a GPU: "
            "set ray.actor_num_gpus (e.g. 1), or set ray.shared_relevance_actor to false"
        )
    # Named so that operators (and the tests) can find it: `ray list actors`, ray.get_actor.
    actor_class = ray.remote(LLMActor).options(
        name=f"lazygraph-llm-{uuid.uuid4().hex[:8]}",
        num_cpus=settings.ray.relevance_actor_num_cpus,
        num_gpus=gpus,
        # One request per query answered at once may wait on the engine; they are merged into one batch.
        max_concurrency=max(2, settings.ray.query_actors * in_flight_limit(settings.ray)),
        # Ray restarts a dead LLM actor and sends its calls in flight again: scoring and temperature-0
        # completions give the same answer twice, so a retried call is safe.
        max_restarts=settings.ray.llm_actor_restarts,
        max_task_retries=settings.ray.llm_actor_restarts,
    )
    handle = actor_class.remote(settings, client_factory)
    handles.append(handle)
    # A failure to load the model stops the batch now.
    error = wait_ready([handle.ready.remote()], "the shared LLM actor", settings.ray.actor_start_timeout_s)[0]
    if error is not None:
        raise error
    return handle
