"""Lazy search's answers against vector and hybrid RAG's, question by question, at equal context limits
and at equal cost.

Reads the rows of ``lazygraph eval answers --out`` and pairs each lazy cell (budget, context limit)
with the vector and hybrid cells at the same limit, and with their equal-cost cells (the context grown
to the lazy search's LLM tokens on each question):

    python benchmarks/compare_answers.py --answers benchmarks/results/hotpotqa100/answers.jsonl

For each score (F1 and EM of the whole answer, F1 and EM of its span, and whether the answer holds
the gold answer word for word) it gives the mean of both, the
difference with a 95 % paired-bootstrap interval over questions (one whose interval spans 0 is not
established on these questions) and on how many questions lazy search is ahead or behind; then the
LLM tokens an answer of each and their ratio, which the answer goal bounds. Only questions answered by
both methods are compared, so a run that is still going can be read as it stands.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from compare_recall import paired, read_rows
from rich.console import Console
from rich.table import Table

SCORES = ("f1", "em", "span_f1", "span_em", "gold_in_answer")
BASELINES = ("vector", "hybrid")


def cells(rows: list[dict]) -> dict[tuple[str, int | None, int], dict[str, dict]]:
    """(method, budget, limit) -> question_id -> row."""
    out: dict = defaultdict(dict)
    for row in rows:
        out[(row["method"], row["budget"], row["context_tokens"])][row["question_id"]] = row
    return out


def compare_cell(lazy: dict[str, dict], other: dict[str, dict]) -> dict:
    """Every score paired over the common questions, and the LLM tokens an answer of both."""
    common = sorted(set(lazy) & set(other))
    result: dict = {"questions": len(common)}
    for score in SCORES:
        # gold_in_answer is true, false or None (a yes/no gold): the questions where it is a fact
        result[score] = paired(
            {q: float(lazy[q][score]) for q in common if lazy[q].get(score) is not None},
            {q: float(other[q][score]) for q in common if other[q].get(score) is not None},
        )
    lazy_tokens = sum(lazy[q]["llm_tokens"] for q in common) / max(len(common), 1)
    other_tokens = sum(other[q]["llm_tokens"] for q in common) / max(len(common), 1)
    result["tokens"] = {
        "lazy": lazy_tokens,
        "other": other_tokens,
        "ratio": lazy_tokens / other_tokens if other_tokens else None,
    }
    return result


def compare_answers(rows: list[dict]) -> list[dict]:
    """Each lazy cell against each baseline at the same context limit, overall and per question type."""
    by_cell = cells(rows)
    report = []
    for (method, budget, limit), lazy in sorted(by_cell.items(), key=lambda item: str(item[0])):
        if method != "lazy":
            continue
        # each baseline at the same context limit, and at lazy's cost (its equal-cost cell, keyed by
        # the lazy budget it is matched to)
        for against, other in [
            *((name, by_cell.get((name, None, limit))) for name in BASELINES),
            *((f"{name} at equal cost", by_cell.get((name, budget, limit))) for name in BASELINES),
        ]:
            if not other:
                continue
            types = sorted({row.get("type") or "unknown" for row in lazy.values()})
            per_type = {
                kind: compare_cell(
                    {q: r for q, r in lazy.items() if (r.get("type") or "unknown") == kind}, other
                )
                for kind in types
            }
            report.append(
                {
                    "budget": budget,
                    "context_tokens": limit,
                    "against": against,
                    **compare_cell(lazy, other),
                    "by_type": per_type,
                }
            )
    return report


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def print_report(report: list[dict], console: Console) -> None:
    table = Table(title="lazy search's answers against each baseline, paired by question (points)")
    for column in ("budget", "context", "against", "questions", "score", "lazy", "other", "lazy − other"):
        table.add_column(column, justify="right")
    table.add_column("95 % interval", justify="right")
    table.add_column("ahead / behind", justify="right")
    table.add_column("by type", justify="left")
    for entry in report:
        for score in SCORES:
            result = entry[score]
            if not result["questions"]:
                continue
            low, high = result["interval"]
            table.add_row(
                str(entry["budget"]),
                str(entry["context_tokens"]),
                entry["against"],
                str(result["questions"]),
                score,
                f"{result['lazy']:.3f}",
                f"{result['other']:.3f}",
                _points(result["difference"]),
                f"[{_points(low)}, {_points(high)}]",
                f"{result['ahead']} / {result['behind']}",
                ", ".join(
                    f"{kind} {_points(typed[score]['difference'])} (n={typed[score]['questions']})"
                    for kind, typed in entry["by_type"].items()
                    if typed[score]["questions"]
                ),
            )
    console.print(table)
    for entry in report:
        tokens = entry["tokens"]
        ratio = f"{tokens['ratio']:.1f} ×" if tokens["ratio"] else "n/a"
        console.print(
            f"budget {entry['budget']}, {entry['context_tokens']} tokens: LLM tokens an answer, "
            f"lazy {tokens['lazy']:,.0f} against {entry['against']} {tokens['other']:,.0f} ({ratio})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=Path, required=True, help="rows of lazygraph eval answers --out")
    parser.add_argument("--out", type=Path, default=None, help="also write the comparisons as JSON")
    args = parser.parse_args(argv)
    if not args.answers.is_file():
        parser.error(f"{args.answers} does not exist; run lazygraph eval answers --out {args.answers} first")
    report = compare_answers(read_rows(args.answers))
    if not report:
        parser.error(f"{args.answers} has no lazy rows with a vector or hybrid row at the same context limit")
    print_report(report, Console(width=220))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
