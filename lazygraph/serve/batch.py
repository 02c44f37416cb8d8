"""`lazygraph batch`: many queries through a pool of Ray query actors into a resumable Delta table.

The driver keeps every actor busy (``ray.max_in_flight_per_actor`` queries queued each), writes
answers as they arrive in small Delta commits, and on a re-run answers only the queries that are
not yet ``ok`` in the output table.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lazygraph.errors import ConfigError, LazyGraphError
from lazygraph.llm.base import LLMClient
from lazygraph.serve.llm_actor import LLMActor, uses_shared_llm_actor
from lazygraph.serve.queries import BatchQuery, read_queries
from lazygraph.serve.ray_runtime import ensure_ray
from lazygraph.serve.results import ResultWriter, result_row
from lazygraph.serve.worker import EngineFactory, QueryWorker, open_query_engine
from lazygraph.settings import Settings
from lazygraph.tables.results import STATUS_OK, delete_error_rows, read_statuses, results_uri

METHODS = ("lazy", "vector", "hybrid")


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
) -> dict[str, Any]:
    """Answer the queries not yet answered in ``out``; returns a summary of this run.

    ``engine_factory(settings, index, roles)`` builds each actor's engines (default: QueryEngine.open);
    ``roles`` is None unless the actor's LLM clients forward to the shared LLM actor.
    ``llm_client_factory`` hosts that client in one shared LLM actor; without it, a shared actor
    is started only when the relevance role is vLLM (``ray.shared_relevance_actor``).
    """
    _check_options(settings, method, preset, budget)
    console = console or Console(stderr=True)
    queries = read_queries(Path(queries_file))
    uri = results_uri(out)
    statuses = read_statuses(uri)
    todo = [q for q in queries if statuses.get(q.query_id) != STATUS_OK]
    report: dict[str, Any] = {
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
    }
    if not todo:
        console.print(f"all {len(queries)} queries are already answered in {uri}; nothing to do")
        return report

    start = time.perf_counter()
    # A failed query is tried again; its old error row goes, so the table keeps one row per query.
    report["retried_errors"] = delete_error_rows(uri, [q.query_id for q in todo if q.query_id in statuses])
    started_ray = ensure_ray(settings)
    handles: list[Any] = []  # every actor started here, killed at the end whatever happens
    try:
        llm_handle = _start_llm_actor(settings, llm_client_factory, handles)
        count = min(settings.ray.query_actors, len(todo))
        factory = engine_factory or open_query_engine
        actors = _start_query_actors(settings, index, factory, llm_handle, count, handles)
        report["actors"], report["shared_llm_actor"] = len(actors), llm_handle is not None
        writer = ResultWriter(uri, settings.ray.flush_every, settings.ray.flush_interval_s)
        counts = _dispatch(settings, actors, todo, writer, method, preset, budget, console)
        report.update(
            answered=len(counts["ok_ids"]),
            errors=counts["errors"],
            not_attempted=counts["not_attempted"],
            commits=writer.commits,
        )
    finally:
        _stop(handles, started_ray)
    report["seconds"] = round(time.perf_counter() - start, 3)
    if report["not_attempted"]:
        raise LazyGraphError(
            f"all query actors died; {report['not_attempted']} queries were not attempted. "
            f"The answers so far are saved in {uri}; run the same command again to resume."
        )
    return report


def _check_options(settings: Settings, method: str, preset: str | None, budget: int | None) -> None:
    """Refuse bad options before any actor starts, rather than with one error row per query."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    if preset is not None:
        settings.preset(preset)
    if budget is not None and budget < 0:
        raise ConfigError("the relevance-test budget must be 0 or more")


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
    actor_class = ray.remote(LLMActor).options(
        num_cpus=settings.ray.relevance_actor_num_cpus,
        num_gpus=gpus,
        # One request per query actor may wait on the engine; they are merged into one batch.
        max_concurrency=max(2, settings.ray.query_actors * settings.ray.max_in_flight_per_actor),
    )
    handle = actor_class.remote(settings, client_factory)
    handles.append(handle)
    # A failure to load the model stops the batch now.
    error = _ready([handle.ready.remote()], "the shared LLM actor")[0]
    if error is not None:
        raise error
    return handle


def _start_query_actors(
    settings: Settings,
    index: str,
    engine_factory: EngineFactory,
    llm_handle: Any | None,
    count: int,
    handles: list[Any],
) -> list[Any]:
    import ray

    # Query actors need a GPU only when each loads its own vLLM engine.
    gpus = 0.0 if llm_handle is not None else settings.ray.actor_num_gpus
    actor_class = ray.remote(QueryWorker).options(num_cpus=settings.ray.actor_num_cpus, num_gpus=gpus)
    actors = [actor_class.remote(settings, index, engine_factory, llm_handle) for _ in range(count)]
    handles.extend(actors)
    errors = _ready([a.ready.remote() for a in actors], "a query actor")
    first_error = next((e for e in errors if e is not None), None)
    if first_error is not None:
        raise first_error
    return actors


def _ready(refs: list[Any], what: str) -> list[Any]:
    """The results of ``ready()`` calls; an actor that died on start becomes a readable error."""
    import ray
    from ray.exceptions import RayError

    try:
        return ray.get(refs)
    except RayError as exc:
        first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise LazyGraphError(
            f"{what} died while starting: {type(exc).__name__}: {first}. Check the Ray resources "
            "(ray.actor_num_cpus, ray.actor_num_gpus) and memory, then run the same command again."
        ) from exc


def _dispatch(
    settings: Settings,
    actors: list[Any],
    todo: list[BatchQuery],
    writer: ResultWriter,
    method: str,
    preset: str | None,
    budget: int | None,
    console: Console,
) -> dict[str, Any]:
    import ray
    from ray.exceptions import RayActorError, RayError

    queue = deque(todo)
    pending: dict[Any, tuple[Any, BatchQuery]] = {}
    alive = set(range(len(actors)))
    ok_ids: set[str] = set()
    errors = 0

    def submit(i: int) -> None:
        query = queue.popleft()
        ref = actors[i].answer.remote(query.query_id, query.question, method, preset, budget)
        pending[ref] = (i, query)

    for i in range(len(actors)):
        for _ in range(settings.ray.max_in_flight_per_actor):
            if queue:
                submit(i)
    columns = (
        TextColumn("[bold]batch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("queries", total=len(todo), status="")
        try:
            while pending:
                done, _ = ray.wait(
                    list(pending), num_returns=1, timeout=min(5.0, settings.ray.flush_interval_s)
                )
                if not done:
                    writer.flush_if_due()
                    continue
                i, query = pending.pop(done[0])
                try:
                    row = ray.get(done[0])
                except RayActorError as exc:  # the actor is gone: record and stop feeding it
                    alive.discard(i)
                    row = result_row(query.query_id, query.question, error=f"query actor died: {exc}")
                except RayError as exc:
                    row = result_row(query.query_id, query.question, error=f"{type(exc).__name__}: {exc}")
                writer.add(row)
                if row["status"] == STATUS_OK:
                    ok_ids.add(query.query_id)
                else:
                    errors += 1
                progress.update(task, advance=1, status=f"{len(ok_ids)} ok, {errors} errors")
                if i in alive and queue:
                    submit(i)
                elif queue and not pending and alive:
                    submit(next(iter(alive)))
        finally:
            writer.flush()  # also on Ctrl-C: what was answered is kept
    return {"ok_ids": ok_ids, "errors": errors, "not_attempted": len(queue)}
