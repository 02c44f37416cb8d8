"""The batch runner on a real local Ray (2 CPUs) with a stand-in query engine: resumability, error rows,
and the shared LLM actor answering relevance tests for the query actors."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import standins
from standins import RelevanceTestingEngine, stand_in_vllm_client

from lazygraph.errors import IndexNotFoundError
from lazygraph.serve.batch import run_batch
from lazygraph.settings import Settings, load_settings

pytestmark = pytest.mark.e2e


class StandInEngine:
    """Answers by echoing; a question containing FAIL raises, like a query whose LLM call failed."""

    def __init__(self, settings: Settings, index: str, roles: Any = None) -> None:
        if not Path(index).exists():
            raise IndexNotFoundError(f"no lazygraph index at {index}; build one with `lazygraph index`")
        self.index = index

    def answer(
        self,
        question: str,
        *,
        method: str,
        preset: str | None,
        budget: int | None,
        context_tokens: int | None,
        trace: bool,
    ) -> Any:
        if "FAIL" in question:
            raise RuntimeError("the synthesis model returned nothing")
        record = {
            "answer": f"echo: {question}",
            "method": method,
            "budget": budget,
            "cost": {"relevance_tests": 0, "llm_calls": 0},
        }
        return SimpleNamespace(answer=record["answer"], to_json=lambda: record)


class HealedEngine(StandInEngine):
    def answer(self, question: str, **kwargs: Any) -> Any:
        return super().answer(question.replace("FAIL", "fixed"), **kwargs)


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    from ray import cloudpickle

    # The stand-ins live in this test module, which Ray workers cannot import: ship them by value.
    cloudpickle.register_pickle_by_value(standins)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=128 * 1024 * 1024)
    yield ray
    ray.shutdown()


@pytest.fixture()
def serve_settings() -> Settings:
    return load_settings(ray={"query_actors": 2, "actor_num_cpus": 0.5, "flush_every": 2})


def rows(out: Path) -> dict[str, dict[str, Any]]:
    from deltalake import DeltaTable

    return {r["query_id"]: r for r in DeltaTable(str(out)).to_pyarrow_table().to_pylist()}


def test_batch_records_errors_and_resumes(ray_local, serve_settings: Settings, tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    queries = tmp_path / "queries.jsonl"
    questions = {f"q{i}": f"question {i}" for i in range(6)} | {"bad": "please FAIL"}
    queries.write_text(
        "".join(json.dumps({"query_id": k, "question": v}) + "\n" for k, v in questions.items())
    )
    out = tmp_path / "answers"

    first = run_batch(serve_settings, str(index), queries, str(out), budget=20, engine_factory=StandInEngine)
    assert (first["answered"], first["errors"], first["skipped_already_ok"]) == (6, 1, 0)
    assert first["actors"] == 2 and first["commits"] >= 4, "results are appended in small commits"
    table = rows(out)
    assert set(table) == set(questions)
    assert table["q3"]["status"] == "ok" and table["q3"]["answer"] == "echo: question 3"
    assert json.loads(table["q3"]["result_json"])["budget"] == 20
    assert table["bad"]["status"] == "error" and "RuntimeError: the synthesis model" in table["bad"]["error"]

    second = run_batch(serve_settings, str(index), queries, str(out), budget=20, engine_factory=StandInEngine)
    assert (second["answered"], second["errors"], second["skipped_already_ok"]) == (0, 1, 6)
    assert second["retried_errors"] == 1 and len(rows(out)) == 7, "one row per query, not one per attempt"

    third = run_batch(serve_settings, str(index), queries, str(out), budget=20, engine_factory=HealedEngine)
    assert (third["answered"], third["errors"]) == (1, 0)
    assert all(r["status"] == "ok" for r in rows(out).values()) and len(rows(out)) == 7

    fourth = run_batch(serve_settings, str(index), queries, str(out), budget=20, engine_factory=StandInEngine)
    assert fourth["answered"] == 0 and fourth["actors"] == 0, "nothing left: no actor is even started"


class OverlapCountingEngine(StandInEngine):
    """Holds each query a moment and records how many of this actor's queries were inside at once."""

    def __init__(self, settings: Settings, index: str, roles: Any = None) -> None:
        super().__init__(settings, index, roles)
        self.inside, self.lock = 0, threading.Lock()

    def answer(self, question: str, **kwargs: Any) -> Any:
        with self.lock:
            self.inside += 1
        time.sleep(0.4)
        with self.lock:
            overlap = self.inside
            self.inside -= 1
        result = super().answer(question, **kwargs)
        record = result.to_json() | {"overlap": overlap, "pid": os.getpid()}
        return SimpleNamespace(answer=result.answer, to_json=lambda: record)


@pytest.mark.parametrize("queries_per_actor", [1, 3])
def test_an_actor_answers_queries_per_actor_at_once(
    ray_local, tmp_path: Path, queries_per_actor: int
) -> None:
    ray_settings = {"query_actors": 1, "queries_per_actor": queries_per_actor, "flush_every": 3}
    settings = load_settings(ray=ray_settings)
    index = tmp_path / "index"
    index.mkdir()
    queries = tmp_path / "queries.txt"
    queries.write_text("".join(f"question {i}\n" for i in range(9)))
    out = tmp_path / "answers"
    report = run_batch(settings, str(index), queries, str(out), engine_factory=OverlapCountingEngine)
    assert report["answered"] == 9 and report["actors"] == 1
    records = [json.loads(r["result_json"]) for r in rows(out).values()]
    assert len({r["pid"] for r in records}) == 1, "one process answered them all"
    # The driver keeps the actor fed, so its threads are all busy at some point, and never more.
    assert max(r["overlap"] for r in records) == queries_per_actor
    assert all(r["answer"].startswith("echo: question") for r in records)


def test_a_missing_index_stops_the_batch_with_the_engines_message(
    ray_local, serve_settings: Settings, tmp_path: Path
) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("one question\n")
    with pytest.raises(IndexNotFoundError, match="no lazygraph index"):
        run_batch(
            serve_settings,
            str(tmp_path / "missing"),
            queries,
            str(tmp_path / "out"),
            engine_factory=StandInEngine,
        )


def test_query_actors_send_relevance_tests_to_the_shared_llm_actor(
    ray_local, serve_settings: Settings, tmp_path: Path
) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("When does the tide turn?\nWhat is for lunch?\n")
    out = tmp_path / "out"
    report = run_batch(
        serve_settings,
        str(tmp_path),
        queries,
        str(out),
        engine_factory=RelevanceTestingEngine,
        llm_client_factory=stand_in_vllm_client,
    )
    assert report["shared_llm_actor"] is True and report["answered"] == 2
    for row in rows(out).values():
        record = json.loads(row["result_json"])
        assert record["client"] == "RemoteRelevanceClient"
        assert record["scores"] == [pytest.approx(0.8), pytest.approx(0.1)]
        assert record["cost"]["llm_calls"] == 2 and record["cost"]["prompt_tokens"] == 20


def no_gpu_client() -> Any:
    from lazygraph.errors import SetupError

    raise SetupError("the vllm backend needs the vllm package on a GPU host")


def test_an_llm_actor_that_cannot_load_its_model_stops_the_batch(
    ray_local, serve_settings: Settings, tmp_path: Path
) -> None:
    from lazygraph.errors import SetupError

    queries = tmp_path / "queries.txt"
    queries.write_text("one question\n")
    with pytest.raises(SetupError, match="needs the vllm package"):
        run_batch(
            serve_settings,
            str(tmp_path),
            queries,
            str(tmp_path / "out"),
            engine_factory=RelevanceTestingEngine,
            llm_client_factory=no_gpu_client,
        )
    deadline = time.monotonic() + 15  # Ray frees a killed actor's CPUs asynchronously
    while ray_local.available_resources().get("CPU") != 2.0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray_local.available_resources().get("CPU") == 2.0, "no actor is left behind"


def hung_engine_client() -> Any:
    """The LLM actor's client over an engine that takes five minutes a batch: a hung GPU."""
    return stand_in_vllm_client(seconds=300)


def test_a_hung_llm_actor_fails_each_call_within_its_timeout(ray_local, tmp_path: Path) -> None:
    """Before, `ray.get` on the LLM actor waited for ever: the batch stalled until the job's deadline."""
    settings = load_settings(
        ray={"query_actors": 1, "actor_num_cpus": 0.5, "flush_every": 1},
        llm={"relevance": {"timeout_s": 2}, "synthesis": {"timeout_s": 2}},
    )
    queries = tmp_path / "queries.txt"
    queries.write_text("When does the tide turn?\nWhat is for lunch?\n")
    out = tmp_path / "out"
    started = time.monotonic()
    report = run_batch(
        settings,
        str(tmp_path),
        queries,
        str(out),
        engine_factory=RelevanceTestingEngine,
        llm_client_factory=hung_engine_client,
    )
    assert time.monotonic() - started < 120, "the batch ended long before the engine would have answered"
    assert report["errors"] == 2 and report["answered"] == 0
    for row in rows(out).values():
        assert "did not answer within 2 s" in row["error"] and "llm.*.timeout_s" in row["error"]
