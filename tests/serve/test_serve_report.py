"""The batch report and its pieces, without Ray: totals from result rows, the summary, the progress line,
the engine factory named in the settings, and the job entry point's choice of cluster."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lazygraph.errors import ConfigError
from lazygraph.serve.progress import BatchProgress, BatchStats, cost_record, llm_tokens, summary_table
from lazygraph.serve.results import result_row
from lazygraph.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def ok_row(query_id: str, cost: dict[str, Any] | None) -> dict[str, Any]:
    record = {"answer": "a"} if cost is None else {"answer": "a", "cost": cost}
    return result_row(query_id, "q", answer="a", result_json=json.dumps(record))


def test_stats_add_up_tokens_and_cache_hits_of_answers_only() -> None:
    stats = BatchStats(total=5)
    fresh = {"prompt_tokens": 100, "completion_tokens": 20, "llm_calls": 3, "relevance_tests": 2}
    stats.record(ok_row("1", fresh), "node-a")
    cached = {"prompt_tokens": 0, "completion_tokens": 0, "llm_cached_tokens": 120, "llm_cache_hits": 3}
    stats.record(ok_row("2", cached | {"llm_calls": 0}), "node-b")
    stats.record(ok_row("3", None), "node-b")  # an engine whose record has no cost
    stats.record(result_row("4", "q", error="RuntimeError: boom"), "node-a")
    stats.record(result_row("5", "q", error="the query actor answering it died 3 times"), None)
    stats.retried.update(["5", "5"])  # a query retried twice counts once
    stats.actor_restarts = 2

    report = stats.to_report()
    assert (stats.answered, stats.failed, stats.remaining) == (3, 2, 0)
    assert report["llm_tokens"] == 240 and report["llm_tokens_per_answer"] == 120.0
    assert report["llm_calls"] == 3 and report["llm_cache_hits"] == 3
    assert report["llm_cache_hit_rate"] == 0.5, "hits / (hits + calls)"
    assert report["nodes"] == {"node-a": 2, "node-b": 2}, "a row no actor returned counts on no node"
    assert (report["retried_queries"], report["actor_restarts"]) == (1, 2)
    assert report["relevance_tests"] == 2 and report["relevance_tests_per_second"] > 0
    line = stats.status_line()
    assert line.startswith("3 done, 2 failed, 1 retried, 0 remaining, ")
    assert " queries/min, " in line and " relevance tests/s, " in line and line.endswith("cache hits 50%")


def test_a_run_without_llm_work_has_no_rates() -> None:
    report = BatchStats(total=1).to_report()
    assert report["llm_tokens_per_answer"] is None and report["llm_cache_hit_rate"] is None
    assert report["queries_per_minute"] == 0.0


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", '{"cost": 3}'])
def test_an_unreadable_cost_record_is_skipped(text: str | None) -> None:
    assert cost_record(text) is None


def test_tokens_of_an_answer_include_those_its_cache_hits_once_cost() -> None:
    assert llm_tokens({"prompt_tokens": 7, "completion_tokens": 2, "llm_cached_tokens": 5}) == 14
    assert llm_tokens({"prompt_tokens": 7}) == 7


def test_the_summary_names_every_figure() -> None:
    stats = BatchStats(total=2)
    stats.record(ok_row("1", {"prompt_tokens": 30, "completion_tokens": 10, "llm_calls": 1}), "n")
    report = {
        "out": "file:///tmp/answers",
        "queries": 3,
        "skipped_already_ok": 1,
        "answered": 1,
        "errors": 0,
        "not_attempted": 1,
        "actors": 2,
        "seconds": 12.5,
    } | stats.to_report()
    console = Console(file=io.StringIO(), width=100)
    console.print(summary_table(report))
    text = console.file.getvalue()
    for expected in ("file:///tmp/answers", "already answered before this run", "not attempted"):
        assert expected in text
    assert "LLM tokens per answer" in text and "40" in text
    assert "LLM cache hit rate" in text and "0.0%" in text
    assert "query actors / nodes" in text and "2 / 1" in text


def test_progress_off_a_terminal_prints_plain_lines() -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    stats = BatchStats(total=2)
    with BatchProgress(console, stats) as progress:
        stats.record(ok_row("1", None), None)
        progress.update()  # not yet due: nothing printed mid-run
    [line] = console.file.getvalue().splitlines()
    assert line.startswith("batch: 1 done, 0 failed, 0 retried, 1 remaining, ")


def test_progress_on_a_terminal_draws_the_live_line() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    stats = BatchStats(total=3)
    with BatchProgress(console, stats) as progress:
        stats.record(ok_row("1", None), None)
        stats.record(result_row("2", "q", error="boom"), None)
        stats.retried.add("3")
        progress.update()
    text = console.file.getvalue()
    assert "2/3" in text and "1 done, 1 failed, 1 retried, 1 remaining" in text and "queries/min" in text


def test_the_engine_factory_is_loaded_from_the_settings() -> None:
    from lazygraph.serve.batch import configured_engine_factory
    from lazygraph.serve.worker import open_query_engine

    assert configured_engine_factory(load_settings()) is open_query_engine
    named = load_settings(ray={"engine_factory": "lazygraph.serve.worker:open_query_engine"})
    assert configured_engine_factory(named) is open_query_engine
    for path, message in [
        ("no_such_module:make", "cannot be loaded"),
        ("lazygraph.serve.worker:missing", "cannot be loaded"),
        ("lazygraph.serve.worker:CONTROL_GROUP", "not callable"),
    ]:
        with pytest.raises(ConfigError, match=message):
            configured_engine_factory(load_settings(ray={"engine_factory": path}))


def test_a_cluster_that_refuses_the_token_gets_a_token_hint() -> None:
    from lazygraph.serve.ray_runtime import _connection_hint

    try:
        try:
            raise RuntimeError("Failed to connect to GCS: RPC error: InvalidAuthToken: token is missing")
        except RuntimeError as cause:
            raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379") from cause
    except ConnectionError as exc:
        assert "RAY_AUTH_MODE=token" in _connection_hint(exc)
    assert "ray start --head" in _connection_hint(ConnectionError("connection refused"))


def load_batch_job() -> Any:
    spec = importlib.util.spec_from_file_location("batch_job", ROOT / "jobs" / "batch_job.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_job_joins_the_cluster_ray_names_and_otherwise_what_the_settings_say(monkeypatch) -> None:
    job = load_batch_job()
    monkeypatch.delenv("LAZYGRAPH_RAY__ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert job.job_settings(None).ray.address is None, "no cluster named: a local Ray"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert job.job_settings(None).ray.address == "auto", "under `ray job submit`"
    monkeypatch.setenv("LAZYGRAPH_RAY__ADDRESS", "ray://head:10001")
    assert job.job_settings(None).ray.address == "ray://head:10001", "the settings win"


def test_the_job_reports_bad_input_in_one_line(tmp_path: Path, capsys) -> None:
    job = load_batch_job()
    status = job.main(
        ["--index", str(tmp_path), "--queries", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]
    )
    assert status == 2
    assert "queries file" in capsys.readouterr().err
