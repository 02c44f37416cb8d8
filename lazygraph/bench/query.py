"""Retrieval quality and query time split: lazy search against the vector and hybrid baselines on hotpotqa100.

For every budget of the grid, each question is searched once (refine, relevance tests, claim
extraction); the claims are then cut at every context limit of the grid, so one search serves all
limits. The vector baseline ranks the same questions at the same limits.

    lazygraph bench query --index /tmp/idx-hotpot --budgets 20,50,100 --contexts 1000,2000,8000
    lazygraph bench query --index /tmp/idx-hotpot --budgets 8 --contexts 1000,2000 --limit 2
    lazygraph bench query --synthetic-chunks 1000000 --ann --nprobes 8,16,32 --out ann-1m.json

Prints the recall table (overall and per question type) and the per-query time split (LLM vs
everything else); ``--out`` also writes every report as JSON.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lazygraph.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEFAULT_QUESTIONS = REPO.parent / "shared" / "datasets" / "hotpotqa100" / "questions.jsonl"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench query", description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="/tmp/idx-hotpot")
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--budgets", type=_ints, default=[20, 50, 100])
    parser.add_argument("--contexts", type=_ints, default=[1000, 2000, 8000])
    parser.add_argument("--limit", type=int, default=None, help="only the first K questions")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N questions")
    parser.add_argument(
        "--rows",
        type=Path,
        default=None,
        help="JSON Lines file of per-question rows: appended as measured, and a rerun resumes from it",
    )
    parser.add_argument("--out", type=Path, default=None, help="write all reports as JSON")
    parser.add_argument(
        "--synthetic-chunks",
        type=int,
        default=0,
        help="instead: time the non-LLM search work on a random index of N chunks (instant relevance)",
    )
    parser.add_argument(
        "--ann",
        action="store_true",
        help="with --synthetic-chunks: the approximate index on clustered vectors (recall@50 against "
        "exact search, search and ranking ms per subquery, memory); see lazygraph.bench.ann",
    )
    parser.add_argument("--nprobes", type=_ints, default=[8, 16, 32, 64], help="with --ann: lists probed")
    parser.add_argument("--queries", type=int, default=100, help="with --ann: subqueries measured")
    args = parser.parse_args(argv)

    console = Console(stderr=True)
    out = Console(width=160)  # tables stay readable when stdout is a file
    if args.synthetic_chunks and args.ann:
        from lazygraph.bench.ann import run

        report = run(
            args.synthetic_chunks, args.nprobes, settings.vectors, n_queries=args.queries, log=console.print
        )
        out.print(json.dumps(report, indent=2))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2))
        return 0
    if args.synthetic_chunks:
        out.print(synthetic_overhead(args.synthetic_chunks, args.budgets))
        return 0
    if not args.questions.is_file():
        console.print(f"no questions at {args.questions}; nothing to benchmark")
        return 0

    from lazygraph.eval.retrieval import load_questions, run_retrieval_grid
    from lazygraph.query.engine import QueryEngine

    engine = QueryEngine.open(settings, args.index, console=console)
    questions = load_questions(args.questions, None if args.limit is None else args.skip + args.limit)
    grid = run_retrieval_grid(engine, questions[args.skip :], args.budgets, args.contexts, console, args.rows)

    out.print(recall_table(grid, args.budgets, args.contexts))
    out.print(type_table(grid, args.budgets, args.contexts))
    out.print(outcome_table(grid, args.budgets, args.contexts))
    out.print(time_table(grid, args.budgets, args.contexts[0]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {f"budget={b},context={t}": report for (b, t), report in sorted(grid.items())}
        args.out.write_text(json.dumps(payload, indent=2, default=str))
        console.print(f"reports written to {args.out}")
    return 0


def recall_table(grid: dict, budgets: list[int], contexts: list[int]) -> Table:
    table = Table(
        title="mean gold-document recall (lazy vs the vector and hybrid baselines, same context limit)"
    )
    table.add_column("budget", justify="right")
    for t in contexts:
        for method in ("lazy", "lazy claims only", "vector", "hybrid"):
            table.add_column(f"{method} @{t}", justify="right")
    table.add_column("tests/query", justify="right")
    for b in budgets:
        cells = []
        for t in contexts:
            report = grid[(b, t)]
            claims_only = report["lazy"].get("mean_recall_claims_only", report["lazy"]["mean_recall"])
            cells += [f"{report['lazy']['mean_recall']:.3f}", f"{claims_only:.3f}"]
            cells += [f"{report[m]['mean_recall']:.3f}" for m in ("vector", "hybrid")]
        table.add_row(str(b), *cells, f"{grid[(b, contexts[0])]['lazy']['mean_relevance_tests']:.1f}")
    return table


def type_table(grid: dict, budgets: list[int], contexts: list[int]) -> Table:
    table = Table(title="recall per question type (lazy / vector)")
    table.add_column("budget", justify="right")
    table.add_column("context", justify="right")
    types = sorted({t for report in grid.values() for t in report["lazy"]["recall_by_type"]})
    for kind in types:
        table.add_column(kind, justify="right")
    for b in budgets:
        for t in contexts:
            report = grid[(b, t)]
            lazy, vector = report["lazy"]["recall_by_type"], report["vector"]["recall_by_type"]
            row = [f"{lazy.get(k, 0):.3f} / {vector.get(k, 0):.3f}" for k in types]
            table.add_row(str(b), str(t), *row)
    return table


def outcome_table(grid: dict, budgets: list[int], contexts: list[int]) -> Table:
    """Where lazy search kept or lost the gold documents (see eval.retrieval.gold_outcomes)."""
    table = Table(title="gold documents in lazy search: kept, or where they were lost")
    outcomes = ("kept", "cut", "no_claim", "judged_irrelevant", "untested")
    table.add_column("budget", justify="right")
    table.add_column("context", justify="right")
    for name in outcomes:
        table.add_column(name, justify="right")
    table.add_column("of the lost: in a fill passage", justify="right")
    for b in budgets:
        for t in contexts:
            counts = grid[(b, t)]["lazy"].get("gold_outcomes", {})
            # an outcome "judged_irrelevant, filled" is a lost gold document a fill passage brought back
            cells = [str(sum(n for k, n in counts.items() if k.split(",")[0] == name)) for name in outcomes]
            filled = sum(n for k, n in counts.items() if k.endswith(", filled"))
            table.add_row(str(b), str(t), *cells, str(filled))
    return table


def time_table(grid: dict, budgets: list[int], context: int) -> Table:
    """Seconds per lazy query (search up to claims), split into LLM time and everything else."""
    table = Table(title="time per lazy query (refine + relevance tests + map; reduce not run)")
    for name in ("budget", "seconds", "LLM s", "non-LLM s", "non-LLM share", "stages (mean s)"):
        table.add_column(name, justify="right" if name != "stages (mean s)" else "left")
    for b in budgets:
        report = grid[(b, context)]
        lazy = report["lazy"]
        stages: dict[str, float] = defaultdict(float)
        for row in report["questions"]:
            for stage, seconds in row["lazy_stages"].items():
                stages[stage] += seconds / max(1, len(report["questions"]))
        table.add_row(
            str(b),
            f"{lazy['mean_seconds']:.1f}",
            f"{lazy['mean_llm_seconds']:.1f}",
            f"{lazy['mean_non_llm_seconds']:.2f}",
            f"{lazy['non_llm_share']:.1%}",
            ", ".join(f"{k} {v:.2f}" for k, v in sorted(stages.items())),
        )
    return table


def synthetic_overhead(n_chunks: int, budgets: list[int], dim: int = 384, seed: int = 0) -> Table:
    """Wall time of ranking and searching one subquery on a random index, with a relevance assessor
    that answers instantly: what the search costs besides the LLM, at corpus scale."""
    import time

    import numpy as np

    from lazygraph.llm.base import ChatResult, LLMClient
    from lazygraph.query.cost import CostRecorder
    from lazygraph.query.ranking import CommunityRanking, chunk_similarities
    from lazygraph.query.search.lazy.match import search_subquery
    from lazygraph.query.snapshot import build_snapshot
    from lazygraph.settings import QuerySettings

    class InstantRelevance(LLMClient):
        def __init__(self) -> None:
            super().__init__("relevance")
            self.rng = np.random.default_rng(seed)

        def _chat(self, messages, *, max_tokens, temperature, json_schema):  # pragma: no cover - unused
            return ChatResult("", 0, 0, 0.0)

        def _relevance(self, prompts):
            return [(float(self.rng.random() < 0.3), 0, 0.0) for _ in prompts]

    rng = np.random.default_rng(seed)
    arrow = synthetic_arrow(n_chunks, dim, seed)
    start = time.perf_counter()
    snapshot = build_snapshot("memory://synthetic", (), arrow)
    load_seconds = time.perf_counter() - start
    table = Table(
        title=f"non-LLM search time per subquery, {n_chunks:,} chunks (snapshot: {load_seconds:.1f} s)"
    )
    for name in ("budget", "rank chunks+communities ms", "search ms (excl. LLM)", "tests"):
        table.add_column(name, justify="right")
    qs = QuerySettings()
    client = InstantRelevance()
    for budget in budgets:
        query = rng.standard_normal(dim).astype(np.float32)
        query /= np.linalg.norm(query)
        t0 = time.perf_counter()
        ranking = CommunityRanking(
            snapshot, chunk_similarities(snapshot, query, [], 0.0), qs.community_rank_k
        )
        t1 = time.perf_counter()
        result = search_subquery(snapshot, ranking, "q", budget, client, qs, CostRecorder())
        t2 = time.perf_counter()
        table.add_row(str(budget), f"{(t1 - t0) * 1000:.1f}", f"{(t2 - t1) * 1000:.1f}", str(result.tests))
    return table


def synthetic_arrow(n_chunks: int, dim: int = 384, seed: int = 0, text_bytes: int = 9) -> dict:
    """The tables of a random index: chunks with random unit vectors in a three-level hierarchy of
    2,220 communities (20 roots, 10 children each, 10 grandchildren each; a chunk in 1-2 leaves)."""
    import numpy as np
    import pyarrow as pa

    from lazygraph import tables

    rng = np.random.default_rng(seed)
    ids = [f"c{i}" for i in range(n_chunks)]
    vectors = rng.standard_normal((n_chunks, dim)).astype(np.float16)
    # three levels: 20 roots, 10 children each, 10 grandchildren each; every chunk in 1-2 leaves
    leaves = rng.integers(0, 2000, size=(n_chunks, 2))
    comm_ids = (
        [f"L0-{i}" for i in range(20)] + [f"L1-{i}" for i in range(200)] + [f"L2-{i}" for i in range(2000)]
    )
    levels = [0] * 20 + [1] * 200 + [2] * 2000
    parents = [None] * 20 + [f"L0-{i // 10}" for i in range(200)] + [f"L1-{i // 10}" for i in range(2000)]
    rows_chunk, rows_level, rows_comm = [], [], []
    for level, divisor in ((2, 1), (1, 10), (0, 100)):
        for col in range(2):
            rows_chunk.append(np.arange(n_chunks))
            rows_level.append(np.full(n_chunks, level))
            rows_comm.append(leaves[:, col] // divisor)
    chunk_col = np.concatenate(rows_chunk)
    level_col = np.concatenate(rows_level)
    comm_col = np.concatenate(rows_comm)
    text = ("Some words of a chunk. " * (text_bytes // 23 + 1))[:text_bytes]
    return {
        tables.CHUNKS: pa.table(
            {
                "chunk_id": ids,
                "doc_id": ids,
                "title": ids,
                "text": [text] * n_chunks,
                "n_tokens": pa.array(np.full(n_chunks, 200), pa.int32()),
            }
        ),
        tables.CHUNK_EMBEDDINGS: pa.table(
            {
                "chunk_id": ids,
                "embedding": pa.array([v.tobytes() for v in vectors], pa.binary()),
                "dtype": ["float16"] * n_chunks,
                "dim": pa.array(np.full(n_chunks, dim), pa.int32()),
                "model": ["random"] * n_chunks,
            }
        ),
        tables.COMMUNITIES: pa.table(
            {
                "community_id": comm_ids,
                "level": pa.array(levels, pa.int32()),
                "parent_id": pa.array(parents, pa.string()),
                "top_concepts": pa.array([[]] * len(comm_ids), pa.list_(pa.string())),
            }
        ),
        tables.CHUNK_COMMUNITIES: pa.table(
            {
                "chunk_id": pa.array(np.asarray(ids, dtype=object)[chunk_col]),
                "level": pa.array(level_col, pa.int32()),
                "community_id": pa.array(
                    [f"L{lv}-{c}" for lv, c in zip(level_col.tolist(), comm_col.tolist(), strict=True)]
                ),
                "weight": pa.array(np.full(len(chunk_col), 0.5)),
            }
        ),
    }
