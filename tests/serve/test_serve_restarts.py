"""Query actors that die mid-batch, on a real local Ray (2 CPUs) with stand-in engines: the dead actor is
replaced, its queries in flight are answered by another, and the results table holds one row per query."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import standins
from rich.console import Console
from standins import CrashingEngine, RelevanceTestingEngine, SlowEngine, stand_in_vllm_client

from lazygraph.errors import LazyGraphError
from lazygraph.serve.batch import run_batch
from lazygraph.settings import Settings, load_settings

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    from ray import cloudpickle

    # Ray workers get the stand-ins by value: they need not import this folder.
    cloudpickle.register_pickle_by_value(standins)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=128 * 1024 * 1024)
    yield ray
    ray.shutdown()


def restart_settings(**ray: Any) -> Settings:
    return load_settings(ray={"query_actors": 2, "actor_num_cpus": 0.5, "flush_every": 1} | ray)


def write_queries(path: Path, questions: list[str]) -> Path:
    path.write_text("".join(f"{q}\n" for q in questions))
    return path


def table_rows(out: Path) -> list[dict[str, Any]]:
    """Every row of the results table (a list: a duplicate row would show)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(out)):
        return []
    return DeltaTable(str(out)).to_pyarrow_table().to_pylist()


def run_in_thread(**kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["report"] = run_batch(console=Console(quiet=True), **kwargs)
        except BaseException as exc:  # handed to the test, which fails with it
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def kill_a_query_actor(ray: Any, out: Path, after_rows: int, outcome: dict[str, Any]) -> dict[str, Any]:
    """Once ``after_rows`` answers are committed, SIGKILL the process of the batch's first query actor."""
    deadline = time.monotonic() + 120
    while len(table_rows(out)) < after_rows:
        assert "error" not in outcome, outcome.get("error")
        assert time.monotonic() < deadline, "the batch committed no answers"
        time.sleep(0.1)
    named = ray.util.list_named_actors(all_namespaces=True)
    first = sorted(
        a for a in named if a["name"].startswith("lazygraph-query-") and a["name"].endswith("-0.1")
    )
    assert len(first) == 1, named
    actor = ray.get_actor(first[0]["name"], namespace=first[0]["namespace"])
    where = ray.get(actor.where.remote(), timeout=30)  # answered at once, though the actor is busy
    os.kill(where["pid"], signal.SIGKILL)
    return where


def test_a_killed_query_actor_is_replaced_and_every_query_answered_once(ray_local, tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    questions = [f"question {i}" for i in range(20)]
    out = tmp_path / "answers"
    thread, outcome = run_in_thread(
        settings=restart_settings(),
        index=str(index),
        queries_file=write_queries(tmp_path / "q.txt", questions),
        out=str(out),
        engine_factory=SlowEngine,
    )
    killed = kill_a_query_actor(ray_local, out, after_rows=4, outcome=outcome)
    rows_at_kill = len(table_rows(out))
    thread.join(timeout=180)
    assert not thread.is_alive(), "the batch did not finish after the kill"
    assert "error" not in outcome, outcome.get("error")
    report = outcome["report"]

    assert rows_at_kill < len(questions), "the actor was killed mid-batch"
    assert (report["answered"], report["errors"], report["not_attempted"]) == (20, 0, 0)
    assert report["actor_restarts"] == 1 and report["retried_queries"] >= 1
    rows = table_rows(out)
    ids = Counter(r["query_id"] for r in rows)
    assert len(rows) == 20 and set(ids) == {str(i + 1) for i in range(20)} and max(ids.values()) == 1
    assert all(r["status"] == "ok" and r["answer"].startswith("echo: question") for r in rows)

    placements = report["actor_placements"]
    assert {(p["actor"], p["generation"]) for p in placements} == {(0, 1), (1, 1), (0, 2)}
    assert [p["pid"] for p in placements if (p["actor"], p["generation"]) == (0, 1)] == [killed["pid"]]
    replacement = next(p for p in placements if p["generation"] == 2)
    assert replacement["pid"] != killed["pid"]
    # Each row names the process that answered it: only the three actors did.
    answered_by = {json.loads(r["result_json"])["serving"]["pid"] for r in rows}
    assert answered_by <= {p["pid"] for p in placements}
    assert sum(report["nodes"].values()) == 20

    # Every answer's cost counted: 10 + 5 + 3 tokens each, one cache hit per two LLM calls.
    assert report["llm_tokens_per_answer"] == 18.0 and report["llm_tokens"] == 20 * 18
    assert report["llm_cache_hit_rate"] == pytest.approx(1 / 3, abs=1e-3)


def test_a_query_that_kills_every_actor_it_reaches_becomes_one_error_row(ray_local, tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    questions = [f"question {i}" for i in range(6)] + ["please CRASH"]
    out = tmp_path / "answers"
    report = run_batch(
        restart_settings(query_retries=1, query_actor_restarts=3),
        str(index),
        write_queries(tmp_path / "q.txt", questions),
        str(out),
        console=Console(quiet=True),
        engine_factory=CrashingEngine,
    )
    assert (report["answered"], report["errors"], report["not_attempted"]) == (6, 1, 0)
    assert report["actor_restarts"] == 2, "sent twice (one retry), it killed two actors"
    rows = table_rows(out)
    assert len(rows) == 7 and len({r["query_id"] for r in rows}) == 7
    [crashed] = [r for r in rows if r["status"] == "error"]
    assert crashed["question"] == "please CRASH"
    assert "died 2 times" in crashed["error"] and "ray.query_retries" in crashed["error"]


def test_when_no_actor_can_be_restarted_the_batch_stops_and_keeps_its_answers(
    ray_local, tmp_path: Path
) -> None:
    index = tmp_path / "index"
    index.mkdir()
    out = tmp_path / "answers"
    queries = write_queries(tmp_path / "q.txt", ["first", "please CRASH", "third", "fourth"])
    with pytest.raises(LazyGraphError, match=r"3 queries were not attempted.*run the same command again"):
        run_batch(
            restart_settings(query_actors=1, query_actor_restarts=0),
            str(index),
            queries,
            str(out),
            console=Console(quiet=True),
            engine_factory=CrashingEngine,
        )
    rows = table_rows(out)
    assert [(r["query_id"], r["status"]) for r in rows] == [("1", "ok")]


def test_a_killed_llm_actor_is_restarted_and_its_calls_sent_again(ray_local, tmp_path: Path) -> None:
    out = tmp_path / "answers"
    questions = [f"When does the tide turn, {i}?" for i in range(12)]
    thread, outcome = run_in_thread(
        settings=restart_settings(),
        index=str(tmp_path),
        queries_file=write_queries(tmp_path / "q.txt", questions),
        out=str(out),
        engine_factory=RelevanceTestingEngine,
        llm_client_factory=functools.partial(stand_in_vllm_client, seconds=0.4),
    )
    deadline = time.monotonic() + 120
    while len(table_rows(out)) < 3:
        assert "error" not in outcome, outcome.get("error")
        assert time.monotonic() < deadline, "the batch committed no answers"
        time.sleep(0.1)
    [llm] = [
        a
        for a in ray_local.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("lazygraph-llm-")
    ]
    actor = ray_local.get_actor(llm["name"], namespace=llm["namespace"])
    killed = ray_local.get(actor.where.remote(), timeout=30)
    os.kill(killed["pid"], signal.SIGKILL)
    rows_at_kill = len(table_rows(out))
    thread.join(timeout=180)
    assert not thread.is_alive(), "the batch did not finish after the kill"
    assert "error" not in outcome, outcome.get("error")
    report = outcome["report"]

    assert rows_at_kill < len(questions), "the LLM actor was killed mid-batch"
    assert (report["answered"], report["errors"], report["not_attempted"]) == (12, 0, 0)
    assert report["llm_actor_restarts"] == 1 and report["actor_restarts"] == 0
    rows = table_rows(out)
    assert sorted(r["query_id"] for r in rows) == sorted(str(i + 1) for i in range(12))
    for row in rows:  # every answer has both verdicts, from the first actor or the restarted one
        record = json.loads(row["result_json"])
        assert row["status"] == "ok" and record["scores"] == [pytest.approx(0.8), pytest.approx(0.1)]
