"""Lazy search against each method without an LLM, question by question, at equal context limits.

Reads the rows of ``bench_query.py --rows`` (lazy search, with the vector and hybrid recall of the same
questions) and, optionally, of ``bench_baselines.py --rows`` (vector, hybrid and the two no-LLM
focused-passage ablations), and pairs them by question:

    python benchmarks/compare_recall.py --grid /tmp/hp/grid/rows.jsonl --baselines /tmp/hp/baseline-rows.jsonl

For every budget, context limit and method: the mean recall of both, the difference, a 95 % interval
of that difference from a paired bootstrap over questions (a difference whose interval spans 0 is not
established on these questions), and on how many questions lazy search is ahead or behind; then the
same difference per question type. Only questions present in both files are compared.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

BOOTSTRAP_SAMPLES = 10_000


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def recalls(grid: list[dict], baselines: list[dict]) -> dict:
    """(budget, limit) -> method -> question_id -> recall; "lazy" is the lazy search itself."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    others: dict = defaultdict(dict)  # (method, limit) -> question -> recall
    for row in baselines:
        others[(row["method"], row["context_tokens"])][row["question_id"]] = row["recall"]
    for row in grid:
        key, question = (row["budget"], row["context_tokens"]), row["question_id"]
        out[key]["lazy"][question] = row["lazy_recall"]
        out[key]["lazy, claims only"][question] = row.get("lazy_claims_only_recall", row["lazy_recall"])
        for method in ("vector", "hybrid"):
            out[key][method][question] = row[f"{method}_recall"]
        for (method, limit), by_question in others.items():
            same_limit = limit == row["context_tokens"] and method not in ("vector", "hybrid")
            if same_limit and question in by_question:
                out[key][method][question] = by_question[question]
    return out


def paired(lazy: dict[str, float], other: dict[str, float], seed: int = 0) -> dict:
    """Mean recall of both on their common questions, the difference and its bootstrap interval."""
    common = sorted(set(lazy) & set(other))
    if not common:
        none = {"questions": 0, "lazy": 0.0, "other": 0.0, "difference": 0.0, "ahead": 0, "behind": 0}
        return {**none, "interval": (0.0, 0.0)}
    a = np.array([lazy[q] for q in common])
    b = np.array([other[q] for q in common])
    diff = a - b
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(BOOTSTRAP_SAMPLES, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "questions": len(common),
        "lazy": float(a.mean()),
        "other": float(b.mean()),
        "difference": float(diff.mean()),
        "interval": (float(low), float(high)),
        "ahead": int((diff > 0).sum()),
        "behind": int((diff < 0).sum()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, required=True, help="rows of bench_query.py --rows")
    parser.add_argument("--baselines", type=Path, default=None, help="rows of bench_baselines.py --rows")
    parser.add_argument("--out", type=Path, default=None, help="also write the comparisons as JSON")
    args = parser.parse_args(argv)
    grid = read_rows(args.grid)
    types = {row["question_id"]: row.get("type") or "unknown" for row in grid}
    table = Table(title="lazy search against each method, paired by question (difference in recall points)")
    columns = ("budget", "context", "against", "questions", "lazy", "other", "lazy − other", "95 % interval")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_column("ahead / behind", justify="right")
    table.add_column("by type", justify="left")
    report = []
    by_key = recalls(grid, read_rows(args.baselines) if args.baselines else [])
    for (budget, limit), methods in sorted(by_key.items()):
        for method, other in methods.items():
            if method == "lazy":
                continue
            result = paired(methods["lazy"], other)
            per_type = {
                kind: paired(
                    {q: r for q, r in methods["lazy"].items() if types[q] == kind},
                    {q: r for q, r in other.items() if types.get(q) == kind},
                )
                for kind in sorted(set(types.values()))
            }
            low, high = result["interval"]
            table.add_row(
                str(budget),
                str(limit),
                method,
                str(result["questions"]),
                f"{result['lazy']:.3f}",
                f"{result['other']:.3f}",
                f"{100 * result['difference']:+.1f}",
                f"[{100 * low:+.1f}, {100 * high:+.1f}]",
                f"{result['ahead']} / {result['behind']}",
                ", ".join(f"{k} {100 * v['difference']:+.1f}" for k, v in per_type.items() if v["questions"]),
            )
            report.append({"budget": budget, "context_tokens": limit, "against": method, **result})
    Console(width=200).print(table)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
