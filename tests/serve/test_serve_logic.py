"""Serving logic without Ray: queries files, the results table, request merging, the remote LLM adapter,
and the roles a query actor hands its query engine."""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lazygraph.errors import InputError
from lazygraph.llm.base import ChatResult
from lazygraph.llm.coalesce import BatchCoalescer
from lazygraph.llm.remote import RemoteRelevanceClient, RemoteRoles
from lazygraph.serve.queries import BatchQuery, read_queries
from lazygraph.serve.worker import QueryWorker
from lazygraph.settings import LLMBackendSettings, Settings


# ---- queries files ------------------------------------------------------------------------------
def test_json_lines_queries_keep_their_ids(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"query_id": "a1", "question": " Who leads the cooperative? "}\n\n{"id": 7, "question": "Why?"}\n'
    )
    assert read_queries(path) == [BatchQuery("a1", "Who leads the cooperative?"), BatchQuery("7", "Why?")]


def test_text_queries_are_numbered_by_line(tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("first question\n\nthird line question\n")
    assert read_queries(path) == [BatchQuery("1", "first question"), BatchQuery("3", "third line question")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"query_id": "a", "question": "x"}\n{"query_id": "a", "question": "y"}\n', "more than once"),
        ('{"query_id": "a", "question": "x"}\n{not json\n', r"q.jsonl:2 is not valid JSON"),
        ('{"query_id": "a"}\n', r"q.jsonl:1 needs a query_id and a non-empty question"),
        ("\n  \n", "holds no questions"),
    ],
)
def test_bad_queries_files_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        read_queries(path)


def test_missing_queries_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_queries(tmp_path / "nope.jsonl")


# ---- merging concurrent relevance requests ------------------------------------------------------
def test_coalescer_merges_waiting_requests_into_one_batch() -> None:
    batches: list[list[str]] = []
    first_batch_running = threading.Event()
    release = threading.Event()

    def run(items: list[str]) -> list[str]:
        batches.append(list(items))
        if len(batches) == 1:  # hold the engine while the other callers queue up
            first_batch_running.set()
            release.wait(5)
        return [item.upper() for item in items]

    coalescer = BatchCoalescer(run)
    results: dict[str, list[str]] = {}

    def call(name: str, items: list[str]) -> None:
        results[name] = coalescer.submit(items)

    first = threading.Thread(target=call, args=("first", ["a"]))
    first.start()
    first_batch_running.wait(5)
    others = [threading.Thread(target=call, args=(f"t{i}", [f"x{i}", f"y{i}"])) for i in range(3)]
    for t in others:
        t.start()
    time.sleep(0.2)  # all three are queued behind the running batch
    release.set()
    for t in [first, *others]:
        t.join(5)
    assert results["first"] == ["A"]
    assert all(results[f"t{i}"] == [f"X{i}", f"Y{i}"] for i in range(3))
    assert len(batches) == 2 and sorted(batches[1]) == sorted(["x0", "y0", "x1", "y1", "x2", "y2"])
    assert coalescer.batch_sizes == [1, 6]


def test_coalescer_hands_an_engine_error_to_every_caller_of_the_batch() -> None:
    def run(items: list[str]) -> list[str]:
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        BatchCoalescer(run).submit(["a", "b"])


def test_coalescer_respects_the_batch_limit() -> None:
    coalescer = BatchCoalescer(lambda items: [len(i) for i in items], max_batch_items=2)
    assert coalescer.submit(["aa", "b", "ccc"]) == [2, 1, 3], "a request larger than the limit still runs"


# ---- the adapter that query actors use --------------------------------------------------------------
class StandInActor:
    """Has the LLMActor's methods behind `.remote`, like a Ray actor handle; results come back directly."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.relevance = SimpleNamespace(remote=self._relevance)
        self.score = SimpleNamespace(remote=self._score)
        self.chat_batch = SimpleNamespace(remote=self._chat_batch)

    def _relevance(self, question: str, passages: list[str]) -> list[tuple[float, int, float]]:
        self.calls.append(("relevance", (question, passages)))
        return [(0.9 if "tide" in p else 0.1, 30 + i, 0.5) for i, p in enumerate(passages)]

    def _score(self, messages: list[list[dict[str, str]]]) -> list[tuple[float, int, float]]:
        self.calls.append(("score", messages))
        return [(0.7, 12, 0.25) for _ in messages]

    def _chat_batch(self, batch: list, max_tokens: int, temperature: float, json_schema: dict | None) -> list:
        self.calls.append(("chat_batch", (batch, max_tokens, temperature, json_schema)))
        return [
            ChatResult(text=f"answer {i}", prompt_tokens=100, completion_tokens=20, seconds=1.0)
            for i in range(len(batch))
        ]


def remote_client(actor: StandInActor, role: str = "relevance") -> RemoteRelevanceClient:
    gets: list[Any] = []

    def get(value: Any) -> Any:  # stands in for ray.get
        gets.append(value)
        return value

    client = RemoteRelevanceClient(role, actor, get=get)
    client.gets = gets  # type: ignore[attr-defined]
    return client


def test_remote_relevance_sends_question_and_passages_once_and_accounts_locally() -> None:
    actor = StandInActor()
    client = remote_client(actor)
    with client.ledger() as ledger:
        scores = client.relevance("When is high tide?", ["tide tables", "bakery hours"])
    assert scores == [0.9, 0.1]
    assert actor.calls == [("relevance", ("When is high tide?", ["tide tables", "bakery hours"]))]
    assert len(client.gets) == 1
    assert ledger.summary()["relevance"] == {
        "calls": 2,
        "prompt_tokens": 61,
        "completion_tokens": 2,
        "seconds": 1.0,
        "cache_hits": 0,
        "cached_tokens": 0,
        "relevance_calls": 2,
    }
    assert client.relevance("q", []) == [] and len(actor.calls) == 1


def test_remote_relevance_with_a_custom_prompt_sends_rendered_messages() -> None:
    from lazygraph.llm.prompts import Prompt

    actor = StandInActor()
    client = remote_client(actor)
    prompt = Prompt("custom", 1, "Judge strictly.", "Q: {question}\nP: {passage}")
    assert client.relevance("q?", ["p1", "p2"], prompt=prompt) == [0.7, 0.7]
    kind, messages = actor.calls[0]
    assert kind == "score" and messages[1][-1]["content"] == "Q: q?\nP: p2"
    assert client.usage.totals()["prompt_tokens"] == 24


def test_remote_chat_and_chat_batch_are_single_round_trips() -> None:
    actor = StandInActor()
    client = remote_client(actor, role="synthesis")
    schema = {"type": "object"}
    one = client.chat([{"role": "user", "content": "hi"}], max_tokens=50, json_schema=schema)
    many = client.chat_batch([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
    assert one.text == "answer 0" and [r.text for r in many] == ["answer 0", "answer 1"]
    assert actor.calls[0] == ("chat_batch", ([[{"role": "user", "content": "hi"}]], 50, 0.0, schema))
    assert len(actor.calls) == 2
    summary = client.usage.summary()["synthesis"]
    assert summary["calls"] == 3 and summary["completion_tokens"] == 60


def test_remote_roles_forward_the_relevance_model_and_build_a_different_synthesis_model() -> None:
    vllm = LLMBackendSettings(backend="vllm")
    same = Settings(llm={"relevance": vllm, "synthesis": vllm})
    different = Settings(
        llm={"relevance": vllm, "synthesis": LLMBackendSettings(backend="openai", base_url="http://x")}
    )
    actor = StandInActor()
    roles = RemoteRoles(same, actor).roles("synthesis")
    relevance, synthesis = roles.relevance, roles.synthesis
    assert isinstance(relevance, RemoteRelevanceClient) and relevance.role == "relevance"
    assert isinstance(synthesis, RemoteRelevanceClient) and synthesis.role == "synthesis"
    assert relevance.handle is actor and synthesis.handle is actor
    roles = RemoteRoles(different, actor).roles("synthesis")
    assert isinstance(roles.relevance, RemoteRelevanceClient)
    assert not isinstance(roles.synthesis, RemoteRelevanceClient)
    lite = RemoteRoles(different, actor).roles("relevance")
    assert lite.synthesis is lite.relevance and isinstance(lite.relevance, RemoteRelevanceClient)


def test_there_is_no_process_wide_client_registry() -> None:
    """Clients are passed in: building one never returns a client some other code installed."""
    from lazygraph.llm import factory

    assert not hasattr(factory, "install_client") and not hasattr(factory, "_installed_clients")
    registries = [n for n, v in vars(factory).items() if isinstance(v, dict) and not n.startswith("__")]
    assert registries == []
    settings = Settings(llm={"relevance": LLMBackendSettings(backend="openai", base_url="http://x")})
    first = factory.make_client("relevance", settings.llm.relevance, settings)
    assert factory.make_client("relevance", settings.llm.relevance, settings) is not first


class RolesEngine:
    """Stands in for the query engine: keeps the roles source it was opened with, plans as it does, and
    takes the roles of each query's synthesis role from that source, as the engine does."""

    def __init__(self, opened: list[RolesEngine], settings: Settings, index: str, roles: Any) -> None:
        self.settings, self.index, self.roles = settings, index, roles
        opened.append(self)

    def plan(self, method: str, preset: str | None, budget: int | None) -> Any:
        from lazygraph.query.engine import plan_query

        return plan_query(self.settings, method, preset, budget)

    def answer(
        self, question: str, method: str = "lazy", preset: Any = None, budget: Any = None, **_: Any
    ) -> Any:
        roles = self.roles and self.roles(self.plan(method, preset, budget).synthesis_role)
        record = {"answer": question, "synthesis": roles and roles.synthesis.role}
        return SimpleNamespace(answer=question, to_json=lambda: record)


def test_a_query_actor_passes_its_engine_the_roles_of_the_llm_actor(tmp_path: Path) -> None:
    vllm = LLMBackendSettings(backend="vllm")
    settings = Settings(llm={"relevance": vllm, "synthesis": vllm})
    actor = StandInActor()
    opened: list[RolesEngine] = []
    worker = QueryWorker(settings, str(tmp_path), partial(RolesEngine, opened), llm_handle=actor)
    assert worker.ready() is None and len(opened) == 1
    [engine] = opened
    lite_roles = engine.roles("relevance")
    assert isinstance(lite_roles.relevance, RemoteRelevanceClient) and lite_roles.relevance.handle is actor
    assert actor.calls == [], "opening the engine calls no model"

    lite = worker.answer("1", "q?", "lazy", "Z100_Lite", None)
    assert json.loads(lite["result_json"])["synthesis"] == "relevance", "a *_Lite preset: the cheap model"
    strong = worker.answer("2", "q?", "lazy", "Z500", None)
    assert json.loads(strong["result_json"])["synthesis"] == "synthesis"
    default = worker.answer("3", "q?", "lazy", None, 10)
    assert (
        json.loads(default["result_json"])["synthesis"]
        == settings.preset(settings.query.preset).synthesis_role
    )
    vector = worker.answer("4", "q?", "vector", None, None)
    assert json.loads(vector["result_json"])["synthesis"] == "synthesis", "the vector baseline's preset"
    assert len(opened) == 1, "one engine, whatever the presets"
    strong_roles = engine.roles("synthesis")
    assert strong_roles.relevance is lite_roles.relevance, "each role's client is built once"
    assert isinstance(strong_roles.synthesis, RemoteRelevanceClient)
    bad = worker.answer("5", "q?", "lazy", "Z9", None)
    assert bad["status"] == "error" and "unknown preset" in bad["error"]


def test_without_an_llm_actor_the_engine_builds_its_own_roles(tmp_path: Path) -> None:
    opened: list[RolesEngine] = []
    worker = QueryWorker(Settings(), str(tmp_path), partial(RolesEngine, opened))
    assert worker.ready() is None
    assert worker.answer("1", "q?", "lazy", "Z100_Lite", None)["status"] == "ok"
    assert [engine.roles for engine in opened] == [None]


def test_the_llm_actor_scores_through_the_public_interface() -> None:
    """The actor's client records its own usage and returns each test's cost for the caller's ledger."""
    from lazygraph.serve.llm_actor import LLMActor

    client = remote_client(StandInActor())  # any LLMClient will do: its relevance runs in a stand-in
    actor = LLMActor(Settings(), client_factory=lambda: client)
    assert actor.ready() is None
    assert actor.relevance("When is high tide?", ["a", "b"]) == [(0.7, 12, 0.25), (0.7, 12, 0.25)]
    assert actor.batch_sizes() == [2]
    assert client.usage.totals()["llm_calls"] == 2


# ---- the results table ----------------------------------------------------------------------------------
def test_results_are_appended_in_small_commits_and_read_back(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from lazygraph.serve.results import ResultWriter, result_row
    from lazygraph.tables.results import delete_error_rows, read_statuses, results_uri

    uri = results_uri(str(tmp_path / "out"))
    assert read_statuses(uri) == {}
    writer = ResultWriter(uri, flush_every=2, flush_interval_s=3600)
    writer.add(result_row("1", "q1", answer="a1", result_json="{}", seconds=1.5))
    assert writer.commits == 0, "below flush_every nothing is written yet"
    writer.add(result_row("2", "q2", error="LLMError: server down"))
    writer.add(result_row("3", "q3", answer="a3"))
    writer.flush()
    assert (writer.commits, writer.rows_written) == (2, 3)
    assert read_statuses(uri) == {"1": "ok", "2": "error", "3": "ok"}
    rows = {r["query_id"]: r for r in DeltaTable(uri).to_pyarrow_table().to_pylist()}
    assert (
        rows["2"]["status"] == "error" and rows["2"]["answer"] is None and "server down" in rows["2"]["error"]
    )
    assert rows["1"]["seconds"] == 1.5 and rows["1"]["finished_at"].tzinfo is not None
    assert delete_error_rows(uri, ["2", "3"]) == 1, "only error rows are deleted"
    assert read_statuses(uri) == {"1": "ok", "3": "ok"}


def test_an_existing_directory_that_is_not_a_delta_table_is_refused(tmp_path: Path) -> None:
    from lazygraph.tables.results import read_statuses, results_uri

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a Delta table"):
        read_statuses(results_uri(str(tmp_path / "out")))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "graph"}, "unknown method"),
        ({"preset": "Z9"}, "unknown preset"),
        ({"budget": -1}, "budget"),
    ],
)
def test_bad_batch_options_are_refused_before_ray_starts(tmp_path: Path, options: dict, message: str) -> None:
    from lazygraph.errors import ConfigError
    from lazygraph.serve.batch import run_batch

    queries = tmp_path / "q.txt"
    queries.write_text("a question\n")
    with pytest.raises(ConfigError, match=message):
        run_batch(Settings(), str(tmp_path), queries, str(tmp_path / "out"), **options)
