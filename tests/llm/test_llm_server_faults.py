"""The openai backend against a real HTTP server process shaped like vLLM's OpenAI server (the fake in
``support/fake_llm_server.py``): its json_schema dialect and top_logprobs shape, the requests it refuses,
and an outage in the middle of a stream of calls that every call survives, each answered once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.llm_server import fake_llm_server

from lazygraph.errors import LLMError
from lazygraph.llm.base import ChatResult
from lazygraph.llm.openai_backend import OpenAICompatibleClient
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.search.lazy.claims import claims_schema
from lazygraph.settings import LLMBackendSettings

QUESTION = "Which harbour counted fishing boats in 2004?"
RELEVANT = "The harbour authority of Kesteven Bay counted 52 fishing boats in 2004."
IRRELEVANT = "Sourdough bread needs a starter culture of wild yeast."


def _client(url: str, **cfg: Any) -> OpenAICompatibleClient:
    """A client with the server's breaker, as the backend builds it (each test's server has its own URL)."""
    settings = LLMBackendSettings(
        backend="openai", base_url=url, model="served-model", json_dialect="json_schema", **cfg
    )
    return OpenAICompatibleClient("relevance", settings)


def test_json_schema_replies_and_top_logprobs_relevance_over_http(tmp_path: Path) -> None:
    with fake_llm_server(tmp_path) as server:
        client = _client(server.url)
        schema = claims_schema(2)
        passages = f'<passage id="1">\nFleet\n{RELEVANT}\n</passage>'
        messages = load_prompt("map_claims").messages(
            question=QUESTION, concepts="fishing boat", passages=passages, max_claims="2"
        )
        reply: ChatResult = client.chat(messages, max_tokens=200, json_schema=schema)
        import jsonschema

        jsonschema.validate(reply.json(), schema)
        assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
        p_relevant, p_other = client.relevance(QUESTION, [RELEVANT, IRRELEVANT])
        requests = server.requests()
    assert p_relevant == pytest.approx(0.8) and p_other == pytest.approx(0.1)
    relevance = [r for r in requests if r.get("kind") == "relevance"]
    assert len(relevance) == 2 and all(r["status"] == 200 for r in requests)


def test_requests_vllm_refuses_are_not_retried(tmp_path: Path) -> None:
    with fake_llm_server(tmp_path, api_key="sk-right") as server:
        wrong_key = _client(server.url, api_key="sk-wrong", max_retries=3)
        with pytest.raises(LLMError, match=r"refused the request \(1 request, not retried\).*Unauthorized"):
            wrong_key.chat([{"role": "user", "content": "hi"}], max_tokens=4)
        right = _client(server.url, api_key="sk-right")
        with pytest.raises(LLMError, match="top_logprobs must be between 0 and 20"):
            right._create(
                messages=[{"role": "user", "content": "hi"}], max_tokens=1, logprobs=True, top_logprobs=25
            )
        with pytest.raises(LLMError, match="`logprobs` must be set to true"):
            right._create(messages=[{"role": "user", "content": "hi"}], max_tokens=1, top_logprobs=5)
        other_model = right.cfg.model_copy(update={"model": "not-served"})
        with pytest.raises(LLMError, match="does not exist"):
            OpenAICompatibleClient("relevance", other_model, breaker=right.breaker).chat(
                [{"role": "user", "content": "hi"}], max_tokens=4
            )
        assert [r["status"] for r in server.requests()] == [401, 400, 400, 404]


def test_calls_across_an_outage_all_succeed_each_answered_once(tmp_path: Path) -> None:
    """503 for 3 s after the 6th answer: longer than the openai package's own retries would wait."""
    with fake_llm_server(tmp_path, outage_after=6, outage_seconds=3, latency_s=0.05) as server:
        client = _client(
            server.url, max_concurrency=4, max_retries=2, retry_base_s=0.2, breaker_probe_max_s=0.5
        )
        questions = [f"{QUESTION} ({i})" for i in range(12)]
        results = [client.relevance(q, [RELEVANT, IRRELEVANT]) for q in questions]
        requests, probes = server.requests(), server.probes()
    assert all(r == [pytest.approx(0.8), pytest.approx(0.1)] for r in results)
    answered = [r for r in requests if r["status"] == 200]
    assert len(answered) == 24, "every test answered once"
    assert {r["question"] for r in answered} == set(questions)
    refused = [r for r in requests if r["status"] == 503]
    assert refused, "the outage happened"
    assert client.breaker.stats()["opened"] == 1
    start = refused[0]["t"]  # the server's outage starts with the first request it refuses
    end = start + 3
    sent_during = [r for r in requests if start <= r["t"] < end]
    assert len(sent_during) <= 8, "paused: requests stopped going out once the breaker opened"
    assert any(start <= probe["t"] < end for probe in probes), "the server was probed while it was down"
    resumed = min(r["t"] for r in answered if r["t"] >= end) - end
    assert resumed < 0.5 + 1.5, "resumed within a probe interval (0.5 s) of the server's return"
