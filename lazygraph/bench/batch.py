"""Bulk query jobs against answering one question after another, and what the LLM cache saves.

One run, side by side on the same machine and the same index, with the embedded defaults:

1. ``sequential``: every question through ``lazygraph query --json`` in its own process (what a team
   scripts without Ray), with an empty LLM cache of its own;
2. ``batch-cold``: the same questions as one ``lazygraph batch`` job, with another empty cache;
3. ``batch-rerun``: the same job again on the unchanged index (a new results table, the cache of 2);
4. ``batch-append``: the same job after ``lazygraph index --append`` of the documents held back from the
   first build (``--hold-back``, 10 % by default), with the cache of 2 and 3.

By default the index is built from the corpus without the held-back documents (every k-th
document), so the append brings documents some questions need: on hotpotqa100, whose paragraphs were
chosen as near distractors of its questions, that is the hardest case for the cache. With
``--append-from FILE`` the index holds the whole corpus and the append is the first
``--append-docs`` documents of FILE instead (new documents about other things, as a nightly load
mostly is). Each phase is recorded in ``<work>/phases.json`` as it ends, and a phase already there is
not run again: a stopped run resumes; ``--phases`` runs a subset.

    lazygraph bench batch --corpus ../shared/datasets/hotpotqa100/corpus.jsonl \\
        --questions ../shared/datasets/hotpotqa100/questions.jsonl --n 20 --work /tmp/bench-batch
    lazygraph bench batch --corpus ../shared/datasets/hotpotqa100/corpus.jsonl \\
        --questions ../shared/datasets/hotpotqa100/questions.jsonl --n 20 --work /tmp/bench-batch-wiki \\
        --append-from ../shared/datasets/wiki2mh_corpus/corpus.jsonl --append-docs 100 \\
        --phases batch-cold,batch-rerun,batch-append
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from lazygraph.settings import Settings

PHASES = ("sequential", "batch-cold", "batch-rerun", "batch-append")


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(
        prog="lazygraph bench batch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--n", type=int, default=20, help="questions (the first N)")
    parser.add_argument("--hold-back", type=float, default=0.1, help="share of documents appended later")
    parser.add_argument("--work", type=Path, required=True, help="working directory (resumable)")
    parser.add_argument("--budget", type=int, default=None, help="relevance-test budget (default: preset's)")
    parser.add_argument("--append-from", type=Path, default=None, help="append documents of this file")
    parser.add_argument("--append-docs", type=int, default=100, help="with --append-from: documents appended")
    parser.add_argument("--phases", default=",".join(PHASES), help="phases to run, comma-separated")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.append_from is None:
        base, extra = split_corpus(args.corpus, args.hold_back, work)
    else:
        base, extra = args.corpus.resolve(), first_documents(args.append_from, args.append_docs, work)
    wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PHASES))
    if unknown:
        parser.error(f"unknown phases {unknown}; choose from {', '.join(PHASES)}")
    queries = write_queries(args.questions, args.n, work / "queries.jsonl")
    index = work / "index"
    if not (index / "manifest").exists():
        run(["lazygraph", "index", "--input", str(base), "--index", str(index)], console, "index (base)")
    phases = load_phases(work)
    budget = [] if args.budget is None else ["--budget", str(args.budget)]
    for phase in PHASES:
        if phase in phases or phase not in wanted:
            continue
        if phase == "batch-append":
            append = ["lazygraph", "index", "--append", "--input", str(extra), "--index", str(index)]
            run(append, console, "append")
        cache = work / ("cache-sequential" if phase == "sequential" else "cache-batch")
        if phase in ("sequential", "batch-cold"):
            shutil.rmtree(cache, ignore_errors=True)  # a cold phase starts from an empty cache
        env = {"LAZYGRAPH_QUERY__LLM_CACHE__LOCATION": str(cache)}
        started = time.perf_counter()
        if phase == "sequential":
            rows = sequential(queries, index, budget, env, console)
        else:
            rows = batch(queries, index, work / f"results-{phase}", budget, env, console)
        phases[phase] = {"seconds": round(time.perf_counter() - started, 1), "rows": rows}
        save_phases(work, phases)
    console.print(report_table(phases))
    print(json.dumps(summary(phases), indent=2))
    return 0


def split_corpus(corpus: Path, hold_back: float, work: Path) -> tuple[Path, Path]:
    """The corpus without every k-th document, and those documents (k = 1 / hold_back)."""
    base, extra = work / "base.jsonl", work / "extra.jsonl"
    if not base.exists():
        every = max(2, round(1 / hold_back))
        lines = [line for line in corpus.read_text().splitlines() if line.strip()]
        extra.write_text("".join(f"{ln}\n" for i, ln in enumerate(lines) if i % every == every - 1))
        base.write_text("".join(f"{ln}\n" for i, ln in enumerate(lines) if i % every != every - 1))
    return base, extra


def first_documents(source: Path, n: int, work: Path) -> Path:
    """The first ``n`` documents of ``source``, as the file to append."""
    extra = work / "extra.jsonl"
    if not extra.exists():
        with source.open() as f:
            lines = [line for line in (next(f, "") for _ in range(n)) if line.strip()]
        extra.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return extra


def write_queries(questions: Path, n: int, out: Path) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()][:n]
    queries = [{"query_id": r["question_id"], "question": r["question"]} for r in rows]
    out.write_text("".join(json.dumps(q) + "\n" for q in queries))
    return queries


def run(command: list[str], console: Console, what: str, env: dict[str, str] | None = None) -> str:
    console.print(f"[bold]{what}[/]: {' '.join(command[:6])} …")
    done = subprocess.run(command, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def sequential(
    queries: list[dict[str, str]], index: Path, budget: list[str], env: dict[str, str], console: Console
) -> list[dict[str, Any]]:
    rows = []
    for number, query in enumerate(queries, 1):
        command = ["lazygraph", "query", "--index", str(index), "--json", *budget, query["question"]]
        started = time.perf_counter()
        record = json.loads(run(command, console, f"query {number}/{len(queries)}", env))
        rows.append(cost_row(query["query_id"], record, time.perf_counter() - started))
    return rows


def batch(
    queries: list[dict[str, str]],
    index: Path,
    out: Path,
    budget: list[str],
    env: dict[str, str],
    console: Console,
) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    shutil.rmtree(out, ignore_errors=True)  # a new job, not the resumption of an earlier one
    queries_file = out.parent / "queries.jsonl"
    command = ["lazygraph", "batch", "--index", str(index), "--queries", str(queries_file), "--out", str(out)]
    run([*command, *budget], console, f"batch -> {out.name}", env)
    table = DeltaTable(str(out)).to_pyarrow_table(columns=["query_id", "result_json", "seconds", "status"])
    rows = []
    columns = (table.column(c).to_pylist() for c in table.column_names)
    for query_id, result, seconds, status in zip(*columns, strict=True):
        if status != "ok":
            sys.exit(f"query {query_id} failed in the batch job; see {out}")
        rows.append(cost_row(query_id, json.loads(result), seconds))
    return sorted(rows, key=lambda r: r["query_id"])


def cost_row(query_id: str, record: dict[str, Any], seconds: float) -> dict[str, Any]:
    """What a phase keeps of one answer: its text, its relevance tests, and the model calls they made."""
    cost = record.get("cost", {})
    return {
        "query_id": query_id,
        "answer": record.get("answer"),
        "relevance_tests": cost.get("relevance_tests", 0),
        "relevance_llm_calls": cost.get("relevance_llm_calls", 0),
        "llm_calls": cost.get("llm_calls", 0),
        "cache_hits": cost.get("llm_cache_hits", 0),
        "seconds": round(float(seconds), 2),
    }


def load_phases(work: Path) -> dict[str, Any]:
    path = work / "phases.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save_phases(work: Path, phases: dict[str, Any]) -> None:
    (work / "phases.json").write_text(json.dumps(phases, indent=1))


def summary(phases: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase, data in phases.items():
        rows = data["rows"]
        out[phase] = {
            "queries": len(rows),
            "seconds": data["seconds"],
            "queries_per_hour": round(3600 * len(rows) / data["seconds"], 1) if data["seconds"] else None,
            "relevance_tests": sum(r["relevance_tests"] for r in rows),
            "relevance_llm_calls": sum(r["relevance_llm_calls"] for r in rows),
            "llm_calls": sum(r["llm_calls"] for r in rows),
            "cache_hits": sum(r["cache_hits"] for r in rows),
        }
    if {"sequential", "batch-cold"} <= out.keys():
        out["batch_over_sequential_throughput"] = round(
            out["batch-cold"]["queries_per_hour"] / out["sequential"]["queries_per_hour"], 2
        )
    if {"batch-cold", "batch-rerun"} <= out.keys():
        out["rerun_speedup"] = round(phases["batch-cold"]["seconds"] / phases["batch-rerun"]["seconds"], 1)
        cold = {r["query_id"]: r["answer"] for r in phases["batch-cold"]["rows"]}
        again = {r["query_id"]: r["answer"] for r in phases["batch-rerun"]["rows"]}
        out["rerun_identical_answers"] = sum(cold[q] == again.get(q) for q in cold)
    if {"batch-cold", "batch-append"} <= out.keys():
        cold_calls = out["batch-cold"]["relevance_llm_calls"] or 1
        appended = out["batch-append"]["relevance_llm_calls"]
        out["append_relevance_calls_share"] = round(appended / cold_calls, 3)
    return out


def report_table(phases: dict[str, Any]) -> Table:
    table = Table(title="bulk queries: one process per question vs one batch job, and the LLM cache")
    for name in ("phase", "queries", "seconds", "queries/hour", "relevance tests", "relevance LLM calls"):
        table.add_column(name, justify="right")
    for phase, row in summary(phases).items():
        if isinstance(row, dict):
            table.add_row(
                phase,
                str(row["queries"]),
                f"{row['seconds']:.0f}",
                f"{row['queries_per_hour']:.0f}",
                str(row["relevance_tests"]),
                str(row["relevance_llm_calls"]),
            )
    return table
