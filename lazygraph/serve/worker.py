"""The query actor: opens the index once (the snapshot, or its serving store), then answers queries,
``ray.queries_per_actor`` at once in threads sharing its engine (one after another by default): the
engine's models, clients and caches are made once under a lock, and each query counts its own LLM
calls (``LLMClient.ledger`` is per thread).

Every failure of a single query becomes an error row; only a failure to open the index is fatal,
and it is reported by ``ready()`` rather than by a dead actor, so the user sees the real message.
A dead actor's process is the driver's business (``lazygraph.serve.pool``): it replaces the actor and
sends the queries it had in flight again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import ray

from lazygraph.errors import LazyGraphError
from lazygraph.llm.remote import RemoteRoles
from lazygraph.serve.results import result_row
from lazygraph.settings import Settings

# (settings, index, roles) -> engine; roles None: the engine builds its clients from the settings.
EngineFactory = Callable[[Settings, str, Callable[[str], Any] | None], Any]

# ``where()`` runs in its own thread, so the driver (or an operator) learns an actor's node and process
# at once, even while the actor is busy answering.
CONTROL_GROUP = "control"


def open_query_engine(
    settings: Settings, index: str, roles: Callable[[str], Any] | None = None, snapshot: Any | None = None
) -> Any:
    """The default engine factory: the query engine on a read-only snapshot of the index (the one
    given, shared through Ray's object store, or else loaded here), or on its serving store, opened
    here, with ``query.index_source: store`` (which the batch driver sets when ``auto`` chose it)."""
    from lazygraph.query.engine import QueryEngine

    return QueryEngine.open(settings, index, console=None, roles=roles, snapshot=snapshot)


class QueryWorker:
    """Ray actor body (wrapped with ``ray.remote`` by the batch runner).

    With ``llm_handle`` the LLM runs in the shared LLM actor: the engine is given a builder of its
    roles per synthesis role (``RemoteRoles.roles``) whose clients forward there, so a *_Lite preset
    still gets the cheap model and a full preset the synthesis model, as without the actor.
    """

    def __init__(
        self,
        settings: Settings,
        index: str,
        engine_factory: EngineFactory,
        llm_handle: Any | None = None,
        snapshot: Any | None = None,
    ) -> None:
        self.error: LazyGraphError | None = None
        self.engine: Any = None
        roles = None if llm_handle is None else RemoteRoles(settings, llm_handle).roles
        try:
            if snapshot is None:
                self.engine = engine_factory(settings, index, roles)
            else:  # the snapshot in the object store (Ray passes the object, not the ref)
                self.engine = engine_factory(settings, index, roles, snapshot)
        except LazyGraphError as exc:
            self.error = exc
        except Exception as exc:  # anything else is wrapped so that it survives the trip to the driver
            self.error = LazyGraphError(
                f"the query engine could not open {index}: {type(exc).__name__}: {exc}"
            )

    def ready(self) -> LazyGraphError | None:
        return self.error

    def index_version(self) -> str | None:
        """The version of the index this actor's engine answers from (None when it cannot tell; the
        driver then records the version it found at the start)."""
        # The engine's reader (the snapshot, or the serving store); another factory's engine may hold a
        # snapshot only.
        reader = getattr(self.engine, "reader", None) or getattr(self.engine, "snapshot", None)
        return getattr(reader, "index_version", None) or None

    @ray.method(concurrency_group=CONTROL_GROUP)
    def where(self) -> dict[str, Any]:
        """The Ray node id and the process id of this actor (recorded in the batch report)."""
        return placement()

    def answer(
        self, query_id: str, question: str, method: str, preset: str | None, budget: int | None
    ) -> dict[str, Any]:
        import time

        start = time.perf_counter()
        try:
            result = self.engine.answer(
                question, method=method, preset=preset, budget=budget, context_tokens=None, trace=False
            )
            record = result.to_json()
            # Which node and process answered: a row can be traced to the actor's logs.
            record["serving"] = placement()
            answer = record.get("answer", getattr(result, "answer", None))
            return result_row(
                query_id,
                question,
                answer=answer,
                result_json=json.dumps(record, default=str),
                seconds=time.perf_counter() - start,
                index_version=self.index_version(),
            )
        except Exception as exc:  # one bad query must not stop the batch
            return result_row(
                query_id, question, error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - start
            )


def placement() -> dict[str, Any]:
    """This process's Ray node id (None outside Ray) and process id."""
    node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    return {"node_id": node_id, "pid": os.getpid()}
