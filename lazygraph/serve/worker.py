"""The query actor: opens the index snapshot once, then answers queries one after another.

Every failure of a single query becomes an error row; only a failure to open the index is fatal,
and it is reported by ``ready()`` rather than by a dead actor, so the user sees the real message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lazygraph.errors import LazyGraphError
from lazygraph.llm.remote import RemoteRoles
from lazygraph.serve.results import result_row
from lazygraph.settings import Settings

# (settings, index, roles) -> engine; roles None: the engine builds its clients from the settings.
EngineFactory = Callable[[Settings, str, Callable[[str], Any] | None], Any]


def open_query_engine(settings: Settings, index: str, roles: Callable[[str], Any] | None = None) -> Any:
    """The default engine factory: the lazy query engine on a read-only snapshot of the index."""
    from lazygraph.query.engine import QueryEngine

    return QueryEngine.open(settings, index, console=None, roles=roles)


class QueryWorker:
    """Ray actor body (wrapped with ``ray.remote`` by the batch runner).

    With ``llm_handle`` the LLM runs in the shared LLM actor: the engine is given a builder of its
    roles per synthesis role (``RemoteRoles.roles``) whose clients forward there, so a *_Lite preset
    still gets the cheap model and a full preset the synthesis model, as without the actor.
    """

    def __init__(
        self, settings: Settings, index: str, engine_factory: EngineFactory, llm_handle: Any | None = None
    ) -> None:
        self.error: LazyGraphError | None = None
        self.engine: Any = None
        roles = None if llm_handle is None else RemoteRoles(settings, llm_handle).roles
        try:
            self.engine = engine_factory(settings, index, roles)
        except LazyGraphError as exc:
            self.error = exc
        except Exception as exc:  # anything else is wrapped so that it survives the trip to the driver
            self.error = LazyGraphError(
                f"the query engine could not open {index}: {type(exc).__name__}: {exc}"
            )

    def ready(self) -> LazyGraphError | None:
        return self.error

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
            answer = record.get("answer", getattr(result, "answer", None))
            return result_row(
                query_id,
                question,
                answer=answer,
                result_json=json.dumps(record, default=str),
                seconds=time.perf_counter() - start,
            )
        except Exception as exc:  # one bad query must not stop the batch
            return result_row(
                query_id, question, error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - start
            )
