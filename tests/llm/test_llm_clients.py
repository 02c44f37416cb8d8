"""Logic of the LLM layer that needs no model: JSON parsing, log-prob scoring, accounting, prompts."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from lazygraph.errors import ConfigError, LLMError
from lazygraph.llm.base import (
    BatchingLLMClient,
    ChatResult,
    LLMClient,
    Message,
    Scored,
    p_yes_from_logprobs,
    parse_json_text,
)
from lazygraph.llm.prompts import load_prompt


class CountingClient(LLMClient):
    def _chat(self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema):
        return ChatResult(text="ok", prompt_tokens=10, completion_tokens=2, seconds=0.01)

    def _relevance(self, messages_per_passage):
        return [(0.9 if "tide" in m[-1]["content"] else 0.1, 20, 0.01) for m in messages_per_passage]


def test_parse_json_tolerates_fences_and_prose() -> None:
    assert parse_json_text('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_text('Here it is: {"a": [1, 2]} done') == {"a": [1, 2]}
    assert parse_json_text("[1, 2]") == [1, 2]
    with pytest.raises(LLMError, match="valid JSON"):
        parse_json_text("no json here")


def test_p_yes_reads_probabilities_not_the_word() -> None:
    top = {"Yes": math.log(0.3), "No": math.log(0.6), " yes": math.log(0.05), "maybe": math.log(0.05)}
    assert p_yes_from_logprobs(top) == pytest.approx(0.35 / 0.95)
    assert p_yes_from_logprobs({"perhaps": -0.1}) == 0.0


def test_per_query_ledger_sees_only_its_calls() -> None:
    client = CountingClient("relevance")
    client.chat([{"role": "user", "content": "before"}])
    with client.ledger() as ledger:
        client.chat([{"role": "user", "content": "x"}])
        scores = client.relevance("q", ["tide tables", "recipes"])
    assert scores == [0.9, 0.1]
    assert ledger.totals()["llm_calls"] == 3
    assert ledger.summary()["relevance"]["prompt_tokens"] == 50
    assert client.usage.totals()["llm_calls"] == 4  # the lifetime ledger saw everything


def test_queries_sharing_a_client_in_threads_each_count_their_own_calls() -> None:
    """Two queries on one client at once (a query actor answering several at a time): their calls
    interleave, and each query's ledger holds its own calls only."""

    class SizedClient(CountingClient):
        def _chat(self, messages, *, max_tokens: int, temperature: float, json_schema):  # noqa: ANN001
            return ChatResult("ok", len(messages[-1]["content"]), 1, 0.0)

    client = SizedClient("synthesis")
    turns = threading.Barrier(2, timeout=30)

    def query(prompt: str) -> dict[str, float]:
        with client.ledger() as ledger:
            for _ in range(4):
                turns.wait()  # each call of one query between two calls of the other
                client.chat([{"role": "user", "content": prompt}])
            turns.wait()
            return ledger.totals()

    with ThreadPoolExecutor(2) as pool:
        short, long = pool.submit(query, "abc"), pool.submit(query, "abcdefg")
        short_totals, long_totals = short.result(timeout=60), long.result(timeout=60)
    assert short_totals["llm_calls"] == long_totals["llm_calls"] == 4
    assert (short_totals["prompt_tokens"], long_totals["prompt_tokens"]) == (12, 28)
    assert client.usage.totals()["prompt_tokens"] == 40  # the lifetime ledger saw both


class BatchOnlyClient(BatchingLLMClient):
    """A backend that implements only the batch hooks, as the GPU and remote backends do."""

    def __init__(self) -> None:
        super().__init__("synthesis")
        self.batch_sizes: list[int] = []

    def _chat_batch(self, batch, *, max_tokens: int, temperature: float, json_schema):
        self.batch_sizes.append(len(batch))
        return [ChatResult(text="ok", prompt_tokens=10, completion_tokens=2, seconds=0.01) for _ in batch]

    def _relevance(self, messages_per_passage):
        return [Scored(0.5, 7, 0.1) for _ in messages_per_passage]


def test_usage_is_recorded_once_per_result_around_the_backend_hooks() -> None:
    client = BatchOnlyClient()
    with client.ledger() as ledger:
        client.chat([{"role": "user", "content": "one"}])
        client.chat_batch([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
        scored = client.score([[{"role": "user", "content": "p1"}], [{"role": "user", "content": "p2"}]])
    assert client.batch_sizes == [1, 2], "a single chat is a batch of one"
    assert scored == [(0.5, 7, 0.1), (0.5, 7, 0.1)] and scored[0].p_yes == 0.5
    summary = ledger.summary()["synthesis"]
    assert summary["calls"] == 5 and summary["prompt_tokens"] == 44 and summary["completion_tokens"] == 8
    assert client.usage.totals() == ledger.totals()


def test_relevance_prompt_puts_the_question_first_for_prefix_caching() -> None:
    prompt = load_prompt("relevance")
    a = prompt.messages(question="Q?", passage="first")[-1]["content"]
    b = prompt.messages(question="Q?", passage="second")[-1]["content"]
    assert a.index("Q?") < a.index("first")
    shared = len(a) - len(a.split("first")[1]) - len("first")
    assert a[:shared] == b[:shared]


def test_missing_prompt_version_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no version 99"):
        load_prompt("relevance", 99)
    with pytest.raises(ConfigError, match="no prompt file"):
        load_prompt("no_such_task")
