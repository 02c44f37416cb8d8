"""A batch of queries across an LLM server outage: what the outage costs in wall time, and what is lost.

`lazygraph batch` of N questions against the vLLM-shaped fake server (``tests/support/fake_llm_server.py``,
a real HTTP process, ``--latency-s`` per request as a GPU would take), twice per round, on the same index
and with the LLM cache off (so both runs make every call):

1. ``baseline``: the server answers everything;
2. ``outage``: the server answers 503 to every request for ``--outage-s`` seconds once it has answered a
   third of the baseline's requests (mid-batch).

Reported per round: both wall times, the time the outage added beyond its own length
(``outage - baseline - outage_s``; the goal: at most 5 % of ``baseline + outage_s``), the rows of the
outage run (how many are ``ok``, how many are errors, whether any query has two rows), and what the
circuit breaker did: how many requests still went out during the outage and how many health probes
(``GET /v1/models``) it sent instead (paused), and how long after the server came back the first request
was answered again (``resume_lag_s``: resumed). Rounds alternate baseline and outage so that load
on the machine affects both alike. The figures go to ``<work>/outage.json``.

    python benchmarks/bench_outage.py --work /tmp/bench-outage --queries 200 --outage-s 60 --rounds 3
    python benchmarks/bench_outage.py --work /tmp/bench-outage --method vector --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

TEMPLATES = (
    "What does the text say about {t}?",
    "Who is involved in {t}?",
    "What happened with {t}?",
    "Why does {t} matter to Port Ellery?",
    "When did {t} come up?",
    "How did people react to {t}?",
    "What changed about {t}?",
)


def questions(n: int) -> list[str]:
    from lazygraph.api import sample_corpus_path

    titles = [json.loads(line)["title"] for line in sample_corpus_path().read_text().splitlines()]
    return [TEMPLATES[i // len(titles) % len(TEMPLATES)].format(t=titles[i % len(titles)]) for i in range(n)]


def env_for(work: Path, url: str | None, actors: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYGRAPH_") or k == "LAZYGRAPH_HOME"}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_WAIT_POLICY="passive",
        LAZYGRAPH_SPARK__MASTER="local[2]",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
        LAZYGRAPH_SPARK__CHECKPOINT_DIR=str(work / "checkpoints"),
        LAZYGRAPH_RAY__QUERY_ACTORS=str(actors),
        LAZYGRAPH_RAY__ACTOR_NUM_CPUS="0.5",
        LAZYGRAPH_QUERY__LLM_CACHE__ENABLED="false",
    )
    if url is not None:
        for role in ("RELEVANCE", "SYNTHESIS"):
            prefix = f"LAZYGRAPH_LLM__{role}__"
            env.update(
                {
                    prefix + "BACKEND": "openai",
                    prefix + "BASE_URL": url,
                    prefix + "MODEL": "served-model",
                    prefix + "JSON_DIALECT": "json_schema",
                }
            )
    return env


def lazygraph(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lazygraph", *args], env=env, capture_output=True, text=True)


def run_batch(
    work: Path, name: str, queries: Path, search: list[str], actors: int, server_options: dict
) -> dict:
    from deltalake import DeltaTable
    from support.llm_server import fake_llm_server

    out = work / name
    shutil.rmtree(out, ignore_errors=True)  # a fresh table: every query answered by this run
    with fake_llm_server(work, **server_options) as server:
        started = time.perf_counter()
        done = lazygraph(
            ["batch", "--index", str(work / "index"), "--queries", str(queries), "--out", str(out), *search],
            env_for(work, server.url, actors),
        )  # fmt: skip
        seconds = time.perf_counter() - started
        requests, probes = server.requests(), server.probes()
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr[-3000:]}")
    rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    report = json.loads(done.stdout[done.stdout.index("{") :])
    result = {
        "seconds": round(seconds, 2),
        "requests": len(requests),
        "answered_requests": sum(r["status"] == 200 for r in requests),
        "rows": len(rows),
        "ok": sum(r["status"] == "ok" for r in rows),
        "error_rows": sum(r["status"] != "ok" for r in rows),
        "queries_with_two_rows": len(rows) - len({r["query_id"] for r in rows}),
        "report_errors": report.get("errors"),
    }
    refused = [r for r in requests if r["status"] == 503]
    if refused and server_options.get("outage_seconds"):
        # The outage starts with the first request refused (the server starts it on that request).
        start = refused[0]["t"]
        end = start + server_options["outage_seconds"]
        during = [r for r in requests if start <= r["t"] < end]
        answered_after = [r["t"] for r in requests if r["status"] == 200 and r["t"] >= end]
        result |= {
            # Paused: once the breaker opens, no request goes out until a probe finds the server back.
            "requests_during_outage": len(during),
            "last_request_refused_s": round(refused[-1]["t"] - start, 3),
            "probes_during_outage": sum(start <= p["t"] < end for p in probes),
            # Resumed: how long after the server came back the first request was answered again.
            "resume_lag_s": round(min(answered_after) - end, 3) if answered_after else None,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--outage-s", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-s", type=float, default=0.05, help="the fake server's time per request")
    parser.add_argument("--budget", type=int, default=4, help="the lazy search's relevance-test budget")
    parser.add_argument(
        "--method",
        choices=("lazy", "vector", "hybrid"),
        default="lazy",
        help="vector: one LLM call a query (the answer), for a batch of many queries on a small machine",
    )
    parser.add_argument("--actors", type=int, default=1)
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "index").exists():
        from lazygraph.api import sample_corpus_path

        built = lazygraph(["index", "--input", str(sample_corpus_path()), "--index", str(work / "index")],
                          env_for(work, None, args.actors))  # fmt: skip
        if built.returncode != 0:
            raise SystemExit(built.stderr[-3000:])
    queries = work / "queries.jsonl"
    queries.write_text("".join(json.dumps({"query_id": f"q{i}", "question": q}) + "\n"
                               for i, q in enumerate(questions(args.queries))))  # fmt: skip
    results: dict[str, Any] = {"settings": vars(args) | {"work": str(work)}, "rounds": []}
    search = ["--method", args.method, *(["--budget", str(args.budget)] if args.method == "lazy" else [])]
    for round_ in range(args.rounds):
        base = run_batch(
            work, f"baseline-{round_}", queries, search, args.actors, {"latency_s": args.latency_s}
        )
        outage = run_batch(
            work, f"outage-{round_}", queries, search, args.actors,
            {"latency_s": args.latency_s, "outage_after": base["answered_requests"] // 3,
             "outage_seconds": args.outage_s},
        )  # fmt: skip
        added = outage["seconds"] - base["seconds"] - args.outage_s
        results["rounds"].append(
            {
                "baseline": base,
                "outage": outage,
                "added_beyond_outage_s": round(added, 2),
                # The goal: the batch across the outage takes at most 5 % longer than the baseline plus the
                # outage itself.
                "added_share_of_baseline_plus_outage": round(added / (base["seconds"] + args.outage_s), 4),
            }
        )
        (work / "outage.json").write_text(json.dumps(results, indent=2))
        print(json.dumps(results["rounds"][-1]), flush=True)
    rounds = results["rounds"]
    results["summary"] = {
        "queries": args.queries,
        "outage_s": args.outage_s,
        "baseline_s": statistics.median(r["baseline"]["seconds"] for r in rounds),
        "outage_run_s": statistics.median(r["outage"]["seconds"] for r in rounds),
        "median_added_beyond_outage_s": statistics.median(r["added_beyond_outage_s"] for r in rounds),
        "median_added_share": statistics.median(r["added_share_of_baseline_plus_outage"] for r in rounds),
        "ok_rows": [r["outage"]["ok"] for r in rounds],
        "error_rows": [r["outage"]["error_rows"] for r in rounds],
        "queries_with_two_rows": [r["outage"]["queries_with_two_rows"] for r in rounds],
        "requests_during_outage": [r["outage"].get("requests_during_outage") for r in rounds],
        "probes_during_outage": [r["outage"].get("probes_during_outage") for r in rounds],
        "resume_lag_s": [r["outage"].get("resume_lag_s") for r in rounds],
    }
    (work / "outage.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results["summary"], indent=2))


if __name__ == "__main__":
    main()
