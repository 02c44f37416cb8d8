"""A nightly batch against a shared OpenAI-compatible server, end to end: a real index built by `lazygraph
index`, `lazygraph batch` as users run it (Ray, query actors, the lazy engine), and a real server process
shaped like vLLM's (``support/fake_llm_server.py``) that requires an API key.

- The server answers 503 to everything for several seconds mid-batch: every query still ends ``ok``,
  each written once, and each counts its own model calls, though the actor answers three at once.
- The API key the batch sends appears in no file the index and the batch write, nor in their output.
- After an append, the same command answers every query again (the index changed), one row per query,
  reusing the LLM cache for what the append did not change; run once more, it has nothing to do (slow).
- A batch with another model on the same endpoint shares no LLM cache entry with the first (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from support.llm_server import fake_llm_server

from lazygraph.demo_data import sample_corpus_path
from lazygraph.manifest import index_version, last_complete_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-lazygraph-test-0123456789abcdef"
QUESTIONS = [
    "Who leads the Halvard University Marine Station's review of the tidal array?",
    "What does the Saltmarsh Fishers' Cooperative fear about the exclusion zone?",
    "How did Storm Isolde damage the fishing fleet?",
    "What happened to the eelgrass meadows after the storm?",
    "Who is Councillor Amira Salt?",
    "What did Lucy Harrow's tagging study find about sea trout?",
    "Why was the second phase decision postponed?",
    "What is the Lantern Tide Festival?",
    "Who sponsors the Lantern Tide Festival?",
    "What did the turbine data show about the sediment model?",
    "What does the Avel Estuary Trust do?",
    "What did Tomasz Wren survey every summer?",
]


def _env(tmp_path: Path, url: str | None = None, model: str = "served-model") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYGRAPH_") or k == "LAZYGRAPH_HOME"}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_WAIT_POLICY="passive",
        LAZYGRAPH_SPARK__MASTER="local[2]",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
        LAZYGRAPH_SPARK__DRIVER_MEMORY="2g",
        LAZYGRAPH_SPARK__CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        LAZYGRAPH_RAY__QUERY_ACTORS="1",
        LAZYGRAPH_RAY__ACTOR_NUM_CPUS="0.5",
        LAZYGRAPH_RAY__FLUSH_EVERY="2",
        LAZYGRAPH_QUERY__RELEVANCE__RULE="p_yes",
        LAZYGRAPH_QUERY__RELEVANCE__CASCADE="false",
    )
    for role in ("RELEVANCE", "SYNTHESIS"):
        prefix = f"LAZYGRAPH_LLM__{role}__"
        env[prefix + "API_KEY"] = KEY  # set for the index run too: it must not be recorded
        if url is not None:
            env.update(
                {
                    prefix + "BACKEND": "openai",
                    prefix + "BASE_URL": url,
                    prefix + "MODEL": model,
                    prefix + "JSON_DIALECT": "json_schema",
                    prefix + "MAX_RETRIES": "2",
                    prefix + "RETRY_BASE_S": "0.2",
                    prefix + "BREAKER_PROBE_MAX_S": "0.5",
                    prefix + "TIMEOUT_S": "30",
                }
            )
    return env


def _lazygraph(args: list[str], env: dict[str, str], log: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "lazygraph", *args], env=env, capture_output=True, text=True, timeout=1200
    )
    log.write_text(f"$ lazygraph {' '.join(args)}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}\n")
    return done.returncode, done.stdout, done.stderr


def _report(stdout: str) -> dict[str, Any]:
    return json.loads(stdout[stdout.index("{") :])


def _docs(path: Path, lines: range) -> Path:
    source = sample_corpus_path().read_text().splitlines()
    path.write_text("".join(source[i] + "\n" for i in lines))
    return path


def _rows(out: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(out)).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("served")
    queries = tmp / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"query_id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS))
    )
    index = tmp / "index"
    code, out, err = _lazygraph(
        ["index", "--input", str(_docs(tmp / "docs.jsonl", range(0, 12))), "--index", str(index)],
        _env(tmp),
        tmp / "index.log",
    )
    assert code == 0, err[-3000:]
    return {"tmp": tmp, "index": index, "queries": queries, "logs": [tmp / "index.log"]}


@pytest.fixture(scope="module")
def outage_batch(work: dict[str, Any]) -> dict[str, Any]:
    """The batch across a 6 s outage that starts after the server's 40th answer."""
    tmp = work["tmp"]
    out = tmp / "answers"
    with fake_llm_server(tmp, api_key=KEY, outage_after=40, outage_seconds=6, latency_s=0.02) as server:
        started = time.time()
        # Three queries at once in the one query actor, as a deployment on a served model runs them.
        code, stdout, stderr = _lazygraph(
            ["batch", "--index", str(work["index"]), "--queries", str(work["queries"]), "--out", str(out),
             "--budget", "4"],
            _env(tmp, server.url) | {"LAZYGRAPH_RAY__QUERIES_PER_ACTOR": "3"},
            tmp / "batch.log",
        )  # fmt: skip
        requests = server.requests()
    work["logs"].append(tmp / "batch.log")
    return {
        "port": server.port,
        "code": code,
        "stdout": stdout,
        "stderr": stderr,
        "out": out,
        "requests": requests,
        "started": started,
    }


def test_a_batch_across_a_server_outage_ends_with_every_query_ok_once(outage_batch: dict[str, Any]) -> None:
    assert outage_batch["code"] == 0, outage_batch["stderr"][-3000:]
    refused = [r for r in outage_batch["requests"] if r["status"] == 503]
    assert len(refused) >= 3, "the outage happened while the batch ran"
    answered_after = [r for r in outage_batch["requests"] if r["status"] == 200 and r["t"] > refused[-1]["t"]]
    assert answered_after, "the batch went on after the outage"
    rows = _rows(outage_batch["out"])
    assert sorted(row["query_id"] for row in rows) == sorted(f"q{i}" for i in range(len(QUESTIONS))), (
        "none twice"
    )
    assert all(row["status"] == "ok" for row in rows), [row["error"] for row in rows if row["error"]]
    report = _report(outage_batch["stdout"])
    assert report["answered"] == len(QUESTIONS) and report["errors"] == 0 and report["retried_queries"] == 0
    # Each query's cost counts its own model calls, though three shared the actor's clients at once:
    # every relevance test of a query is one relevance call of that query (no cascade, a fresh cache).
    costs = [json.loads(row["result_json"])["cost"] for row in rows]
    assert all(c["relevance_llm_calls"] == c["relevance_tests"] > 0 for c in costs), costs


def test_no_file_the_index_and_the_batch_write_holds_the_api_key(
    work: dict[str, Any], outage_batch: dict[str, Any]
) -> None:
    assert any(r["status"] == 200 for r in outage_batch["requests"]), (
        "the server (which checks the key) answered"
    )
    written = [p for p in work["index"].rglob("*") if p.is_file()]
    written += [p for p in outage_batch["out"].rglob("*") if p.is_file()]
    written += [p for p in (work["tmp"] / "checkpoints").rglob("*") if p.is_file()]
    ray_logs = Path("/tmp/ray/session_latest/logs")
    if ray_logs.is_dir():
        written += [
            p for p in ray_logs.rglob("*") if p.is_file() and p.stat().st_mtime >= outage_batch["started"]
        ]
    assert any(p.name.endswith(".parquet") for p in written) and any("_delta_log" in str(p) for p in written)
    leaks = [str(p) for p in written if KEY.encode() in p.read_bytes()]
    leaks += [str(log) for log in work["logs"] if KEY in log.read_text()]
    assert not leaks, f"the key is written in {leaks}"
    settings_json = last_complete_run(str(work["index"]))["settings_json"]
    assert '"api_key":"**********"' in settings_json.replace(" ", "")


@pytest.mark.slow  # an append and three more batches: minutes
def test_after_an_append_the_same_batch_answers_again_from_the_new_version(
    work: dict[str, Any], outage_batch: dict[str, Any]
) -> None:
    tmp, index, out = work["tmp"], work["index"], outage_batch["out"]
    before = {row["query_id"]: row["index_version"] for row in _rows(out)}
    code, _, err = _lazygraph(
        [
            "index",
            "--append",
            "--input",
            str(_docs(tmp / "more.jsonl", range(12, 16))),
            "--index",
            str(index),
        ],
        _env(tmp),
        tmp / "append.log",
    )
    assert code == 0, err[-3000:]
    new_version = index_version(last_complete_run(str(index)))
    assert set(before.values()) != {new_version}
    args = [
        "batch",
        "--index",
        str(index),
        "--queries",
        str(work["queries"]),
        "--out",
        str(out),
        "--budget",
        "4",
    ]
    # The same server as before, restarted (a server elsewhere would be another model to the cache).
    with fake_llm_server(tmp, port=outage_batch["port"], api_key=KEY) as server:
        code, stdout, stderr = _lazygraph(args, _env(tmp, server.url), tmp / "rerun.log")
        assert code == 0, stderr[-3000:]
        report = _report(stdout)
        assert report["stale_reanswered"] == len(QUESTIONS) and report["answered"] == len(QUESTIONS)
        assert report["llm_cache_hits"] > 0, "what the append did not change came from the LLM cache"
        rows = _rows(out)
        assert len(rows) == len(QUESTIONS) == len({row["query_id"] for row in rows}), "one row per query"
        assert {row["index_version"] for row in rows} == {new_version}
        code, stdout, _ = _lazygraph(args, _env(tmp, server.url), tmp / "again.log")
        assert code == 0 and _report(stdout)["answered"] == 0, "nothing changed: nothing to do"
        code, stdout, _ = _lazygraph([*args, "--no-rerun-stale"], _env(tmp, server.url), tmp / "keep.log")
        assert code == 0 and _report(stdout)["answered"] == 0


@pytest.mark.slow  # one more batch; tests/llm/test_llm_cache_identity.py checks the keys in the fast run
def test_a_batch_with_another_model_shares_no_cache_hit(
    work: dict[str, Any], outage_batch: dict[str, Any]
) -> None:
    tmp = work["tmp"]
    assert outage_batch["code"] == 0
    # The same endpoint as the first batch's: only the model differs.
    with fake_llm_server(tmp, port=outage_batch["port"], api_key=KEY, model="other-model") as server:
        code, stdout, stderr = _lazygraph(
            ["batch", "--index", str(work["index"]), "--queries", str(work["queries"]),
             "--out", str(tmp / "other-answers"), "--budget", "4"],
            _env(tmp, server.url, model="other-model"),
            tmp / "other.log",
        )  # fmt: skip
    assert code == 0, stderr[-3000:]
    report = _report(stdout)
    assert report["answered"] == len(QUESTIONS) and report["llm_cache_hits"] == 0
