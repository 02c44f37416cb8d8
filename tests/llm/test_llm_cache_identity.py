"""Every client that may be handed the LLM cache names its model, endpoint and pinned prompt in its keys,
whichever process runs the model: a batch against another model must never reuse a verdict."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lazygraph.llm.cache import LLMCache
from lazygraph.llm.factory import model_id
from lazygraph.llm.remote import RemoteRelevanceClient, RemoteRoles
from lazygraph.settings import LLMBackendSettings, Settings

PASSAGES = ["the tide turns at noon", "a bread recipe"]


class StandInLLMActor:
    """The LLM actor's relevance method behind `.remote`; results come back directly (no Ray)."""

    def __init__(self) -> None:
        self.tests = 0
        self.relevance = SimpleNamespace(remote=self._relevance)
        self.score = SimpleNamespace(remote=self._score)

    def _relevance(self, question: str, passages: list[str]) -> list[tuple[float, int, float]]:
        self.tests += len(passages)
        return [(0.8 if "tide" in p else 0.1, 20, 0.0) for p in passages]

    def _score(self, messages: list) -> list[tuple[float, int, float]]:
        self.tests += len(messages)
        return [(0.5, 20, 0.0) for _ in messages]


def _served(model: str, base_url: str = "http://vllm:8000/v1", relevance_prompt: int = 3) -> Settings:
    cfg = LLMBackendSettings(backend="openai", model=model, base_url=base_url)
    return Settings(
        llm={"relevance": cfg, "synthesis": cfg}, query={"prompts": {"relevance": relevance_prompt}}
    )


def _remote_relevance(settings: Settings, actor: StandInLLMActor, cache: LLMCache) -> Any:
    client = RemoteRoles(settings, actor, get=lambda value: value).client("relevance")
    assert isinstance(client, RemoteRelevanceClient)
    client.cache = cache  # as the query engine hands its cache to every role
    return client


def test_a_model_served_by_the_llm_actor_is_named_in_its_cache_keys() -> None:
    settings = _served("Qwen/Qwen2.5-7B-Instruct", relevance_prompt=2)
    client = RemoteRoles(settings, StandInLLMActor(), get=lambda value: value).client("relevance")
    assert client.model_id == model_id(settings.llm.relevance) != ""
    assert client.relevance_prompt_version == 2  # the pinned prompt, not the newest


def test_two_batches_with_different_models_share_no_cache_hit(tmp_path: Path) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    first, second = StandInLLMActor(), StandInLLMActor()
    cache = LLMCache.open(uri)
    _remote_relevance(_served("model-a"), first, cache).relevance("When is high tide?", PASSAGES)
    cache.flush()

    # The next night: another model behind the shared actor, the same index and its cache.
    later = LLMCache.open(uri)
    _remote_relevance(_served("model-b"), second, later).relevance("When is high tide?", PASSAGES)
    assert later.stats()["verdict"]["hits"] == 0 and second.tests == 2

    # The first model again: every verdict is a hit (the cache does work).
    again = LLMCache.open(uri)
    third = StandInLLMActor()
    _remote_relevance(_served("model-a"), third, again).relevance("When is high tide?", PASSAGES)
    assert again.stats()["verdict"]["hits"] == 2 and third.tests == 0


def test_the_same_model_name_on_another_endpoint_or_prompt_is_another_model() -> None:
    cache = LLMCache()
    _remote_relevance(_served("m", "http://a:8000/v1"), StandInLLMActor(), cache).relevance("q", PASSAGES)
    other_server = StandInLLMActor()
    _remote_relevance(_served("m", "http://b:8000/v1"), other_server, cache).relevance("q", PASSAGES)
    other_prompt = StandInLLMActor()
    _remote_relevance(_served("m", "http://a:8000/v1", 2), other_prompt, cache).relevance("q", PASSAGES)
    assert other_server.tests == 2 and other_prompt.tests == 2
    assert cache.stats()["verdict"]["hits"] == 0


def test_model_ids_name_backend_model_and_endpoint() -> None:
    a = LLMBackendSettings(backend="openai", model="m", base_url="http://a:8000/v1")
    assert model_id(a) != model_id(a.model_copy(update={"base_url": "http://b:8000/v1"}))
    assert model_id(a) == model_id(a.model_copy(update={"base_url": "http://a:8000/v1/"}))
    assert model_id(a) != model_id(a.model_copy(update={"model": "n"}))
    vllm = LLMBackendSettings(backend="vllm", model="m")
    assert model_id(vllm) != model_id(vllm.model_copy(update={"model_path": Path("/models/other")}))
