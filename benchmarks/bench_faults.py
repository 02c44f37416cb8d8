"""Every fault of the reliability tests, each run several times: the "Reliability" table of BENCHMARKS.md.

Each fault is injected by one test (real processes: Spark, Ray, a real HTTP server) that checks what must
survive; this script runs the chosen faults' tests ``--runs`` times, each round in one fresh pytest process,
and records for each fault how many rounds passed (every test of the fault) and how long its tests took, in
``<out>`` (JSON). ``--only`` picks faults by name; ``--slow`` adds the long ones (a Spark standalone cluster
losing a worker, four writers on one index, a batch answered again after an append).

    python benchmarks/bench_faults.py --runs 3 --out /tmp/faults.json
    python benchmarks/bench_faults.py --runs 3 --slow --only executor-lost --out /tmp/slow.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]

# name -> (how the fault is injected, what must survive, the test that does it, slow)
FAULTS: dict[str, tuple[str, str, str, bool]] = {
    "concurrent-writers": (
        "two `index --append` of different inputs, `--watch --once` and `--delete` started together; a fifth "
        "run with writer.wait_s 0",
        "every run completes in turn; the fifth exits 2 naming the holder; the index equals a fresh build of "
        "the union (tables, graph, communities up to labels)",
        "tests/e2e/test_concurrent_writers_e2e.py",
        True,
    ),
    "killed-append": (
        "SIGKILL of `index --append` right after its chunks commit, then `index --append` of another input",
        "no chunk, mention, embedding or term of the killed input, published or latest; every chunk's "
        "document in documents",
        "tests/e2e/test_killed_run_e2e.py",
        False,
    ),
    "failed-append": (
        "an exception after the chunk, mention and embedding writes, then an append of another input",
        "readers never see the failed writes; the next append does not publish them",
        "tests/e2e/test_index_versions_e2e.py",
        False,
    ),
    "lease-holder-dies": (
        "four processes contend for the lease; a holder SIGKILLed; a holder whose lease expired",
        "one holder at a time; a dead holder frees the index; an expired holder publishes nothing",
        "tests/tables/test_writer_lease.py",
        False,
    ),
    "executor-lost": (
        "SIGKILL of one of two standalone workers (and its executor) during the communities stage",
        "the run completes with a consistent index (reliable checkpoints)",
        "tests/e2e/test_spark_worker_loss_e2e.py",
        True,
    ),
    "llm-outage-batch": (
        "the LLM server answers 503 to everything for 6 s mid-batch (12 queries, `lazygraph batch`)",
        "every query ends ok, none has two rows",
        "tests/e2e/test_llm_server_batch_e2e.py::test_a_batch_across_a_server_outage_ends_with_every_query_ok_once",
        False,
    ),
    "llm-outage-client": (
        "503 for 3 s after the 6th answer, 24 relevance tests from 4 threads",
        "every test answered once; resumed within a probe interval",
        "tests/llm/test_llm_server_faults.py::test_calls_across_an_outage_all_succeed_each_answered_once",
        False,
    ),
    "llm-actor-hangs": (
        "the shared LLM actor's engine takes 300 s a batch; llm.*.timeout_s 2",
        "each query fails within the timeout (error rows, retried next run) instead of stalling the job",
        "tests/serve/test_serve_batch.py::test_a_hung_llm_actor_fails_each_call_within_its_timeout",
        False,
    ),
    "model-changed": (
        "the nightly batch runs against another model (and endpoint, and pinned prompt)",
        "no LLM cache hit across models",
        "tests/llm/test_llm_cache_identity.py",
        False,
    ),
    "index-changed": (
        "`index --append` between two runs of the same `lazygraph batch`",
        "every query answered again from the new version, one row each, cache reused",
        "tests/e2e/test_llm_server_batch_e2e.py::test_after_an_append_the_same_batch_answers_again_from_the_new_version",
        True,  # an append and three more batches: marked slow
    ),
    "key-leak": (
        "LLM API keys in the environment of `index` and `batch`",
        "the key is in no file they write, nor in their output",
        "tests/e2e/test_llm_server_batch_e2e.py::test_no_file_the_index_and_the_batch_write_holds_the_api_key",
        False,
    ),
    "table-file-missing-or-corrupt": (
        "a data file of chunks / edges / manifest deleted or overwritten",
        "one line naming table, version, file and what to run; exit 2",
        "tests/tables/test_unreadable_files.py",
        False,
    ),
    "faiss-file-tampered": (
        "the shared faiss file replaced by other bytes of the same size; links at the old temporary names",
        "the tampered file is never mapped; no link is followed",
        "tests/vectors/test_ann.py",
        False,
    ),
    "vacuum-under-readers": (
        "`lazygraph maintain` while a batch pins the previous run",
        "every file of a live run kept; a query on the pinned version works; unpublished files removed",
        "tests/tables/test_maintain.py",
        False,
    ),
}


def run_round(nodes: list[str], junit: Path) -> dict[str, tuple[bool, float]]:
    """Run the tests once, in one fresh pytest process; each test node's outcome and seconds."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "", f"--junitxml={junit}",
         *nodes],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    outcomes: dict[str, tuple[bool, float]] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        failed = any(child.tag in ("failure", "error") for child in case)
        outcomes[f"{path}::{case.get('name')}"] = (not failed, float(case.get("time", 0)))
    return outcomes


def fault_outcome(node: str, outcomes: dict[str, tuple[bool, float]]) -> tuple[bool, float, int]:
    """Whether every test of a fault's node passed in a round, their seconds, and how many ran."""
    mine = [
        (ok, seconds)
        for test, (ok, seconds) in outcomes.items()
        if test == node or (test.split("::")[0] == node and "::" not in node) or test.split("[")[0] == node
    ]
    return bool(mine) and all(ok for ok, _ in mine), round(sum(s for _, s in mine), 1), len(mine)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=None, help="fault names, comma-separated")
    parser.add_argument("--slow", action="store_true", help="include the long faults")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else [n for n, f in FAULTS.items() if args.slow or not f[3]]
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        raise SystemExit(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    # One pytest process a round runs every chosen fault's tests (tests that share a module fixture, such
    # as the batch against a server, share it within the round as they do in the test suite).
    nodes = list(dict.fromkeys(FAULTS[name][2] for name in chosen))
    rounds = []
    for i in range(args.runs):
        started = time.perf_counter()
        rounds.append(run_round(nodes, args.out.with_suffix(f".round{i}.xml")))
        print(f"round {i + 1}/{args.runs}: {time.perf_counter() - started:.0f} s", flush=True)
    for name in chosen:
        injected, survives, node, _ = FAULTS[name]
        per_round = [fault_outcome(node, outcomes) for outcomes in rounds]
        results[name] = {
            "injected": injected,
            "survives": survives,
            "test": node,
            "runs": len(per_round),
            "passed": sum(ok for ok, _, _ in per_round),
            "tests_per_run": max(n for _, _, n in per_round),
            "seconds": [s for _, s, _ in per_round],
        }
        print(f"{name}: {results[name]['passed']}/{len(per_round)} passed, {results[name]['seconds']} s")
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
