"""An LLMClient whose model runs in another process: a Ray actor (``lazygraph.serve.llm_actor``).

Loading a vLLM engine per query actor would put one copy of the model on the GPU per actor, so one
actor holds the engine and each query actor talks to it through a ``RemoteRelevanceClient``. The
query engine sees an ordinary LLMClient; the accounting stays in the calling process, so a query's
cost record is its own. ``RemoteRoles`` builds the roles a query actor passes to its query engine.

Ray is imported only when a call is made, so this module imports where Ray is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from lazygraph.errors import LLMError
from lazygraph.llm.base import BatchingLLMClient, ChatResult, Conversations, LLMClient, Message, Scored
from lazygraph.llm.factory import LLMRoles, identify, make_client, make_roles
from lazygraph.llm.prompts import Prompt
from lazygraph.llm.resilience import call_timeout
from lazygraph.settings import Settings

Fetch = Callable[[Any], Any]  # what ray.get does: the value behind an object reference


def ray_get_within(ref: Any, timeout_s: float) -> Any:
    """ray.get of one call to the LLM actor, waiting at most ``timeout_s`` (less when the query's active
    time runs out first): a hung engine fails the call instead of stalling the query for ever."""
    import ray
    from ray.exceptions import GetTimeoutError

    limit = call_timeout(timeout_s)
    try:
        return ray.get(ref, timeout=limit)
    except GetTimeoutError as exc:
        with contextlib.suppress(Exception):  # a call Ray cannot cancel is abandoned; its result dropped
            ray.cancel(ref)
        raise LLMError(
            f"the shared LLM actor did not answer within {limit:.0f} s (llm.*.timeout_s, query.timeout_s); "
            "check its logs (`ray logs`) and the GPU, then run the batch again to retry the query"
        ) from exc


class RemoteRelevanceClient(BatchingLLMClient):
    """Forwards every call to an LLM actor handle; one round trip per call, whatever its size."""

    def __init__(self, role: str, handle: Any, get: Fetch | None = None, timeout_s: float = 120.0) -> None:
        super().__init__(role)
        self.handle = handle
        self._get = get or (lambda ref: ray_get_within(ref, timeout_s))

    def _question_relevance(
        self, question: str, passages: Sequence[str], prompt: Prompt | None
    ) -> list[Scored]:
        """Only the question and passages travel for the standard prompt; the actor renders it."""
        if prompt is not None:  # a custom prompt is rendered here and sent whole
            return super()._question_relevance(question, passages, prompt)
        return self._get(self.handle.relevance.remote(question, list(passages)))

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        return self._get(self.handle.score.remote([list(m) for m in messages_per_passage]))

    def _chat_batch(
        self, batch: Conversations, *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]:
        batch = [list(m) for m in batch]
        return self._get(self.handle.chat_batch.remote(batch, max_tokens, temperature, json_schema))


class RemoteRoles:
    """The roles of a process whose relevance model runs in an LLM actor, for the query engine.

    The relevance role, and the synthesis role when its settings name the same model, forward to the
    actor; a different synthesis model is built from the settings, as it would be without the actor.
    Each role's client is built once, on first use, and has its own name, so cost records keep the
    roles apart.
    """

    def __init__(self, settings: Settings, handle: Any, get: Fetch | None = None) -> None:
        self.settings = settings
        self.handle = handle
        self._get = get
        self._clients: dict[str, LLMClient] = {}

    def roles(self, synthesis_role: str) -> LLMRoles:
        """What ``make_roles`` gives for this synthesis role, with the actor's model where it serves."""
        return make_roles(self.settings, synthesis_role, client=self.client)

    def client(self, role: str) -> LLMClient:
        if role not in self._clients:
            self._clients[role] = self._build(role)
        return self._clients[role]

    def _build(self, role: str) -> LLMClient:
        cfg = getattr(self.settings.llm, role)
        if cfg == self.settings.llm.relevance:
            # The actor serves the relevance role's model: cache keys name that model and prompt.
            client = RemoteRelevanceClient(role, self.handle, self._get, timeout_s=cfg.timeout_s)
            return identify(client, cfg, self.settings)
        return make_client(role, cfg, self.settings)
