"""What the commands print: answers with their sources, reports as JSON, summaries as tables.

Progress and messages go to stderr (``console``) so that stdout (``out``) carries only answers, JSON
and tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lazygraph.api import Answer, Source

console = Console(stderr=True)
out = Console(soft_wrap=True)


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str))


def print_text(text: str, to: Console = out) -> None:
    to.print(text, markup=False, highlight=False)


def print_sources(sources: list[Source], to: Console = out) -> None:
    """Each cited chunk under the answer: its id, document title and the excerpt it was cited for."""
    if not sources:
        return
    print_text("\nSources:", to)
    for s in sources:
        print_text(f'  {s.chunk_id}  {s.title} (document {s.doc_id})\n      "{s.excerpt}"', to)


def cost_line(answer: Answer) -> str:
    cost = answer.cost
    return (
        f"cost: {cost.relevance_tests} relevance tests, {cost.llm_calls} LLM calls, "
        f"{cost.prompt_tokens} prompt + {cost.completion_tokens} completion tokens, {cost.seconds:.1f} s"
    )


def print_answer(answer: Answer) -> None:
    """The answer's text with its citations, the sources, and (on stderr) its cost."""
    print_text(answer.text)
    print_sources(answer.sources)
    print_text(cost_line(answer), console)


def print_demo_answer(question: str, answer: Answer) -> None:
    """One demo answer, as plain text (it must survive redirection to a file intact)."""
    print_text(f"Q: {question}")
    print_text(f"A: {answer.text}")
    print_sources(answer.sources)
    print_text("cost: " + json.dumps(answer.cost.record, default=str))
    out.print()


def print_error(message: str) -> None:
    # soft_wrap: one line whatever the terminal's width, as scripts and the README expect
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def sibling(path: Path, suffix: str) -> Path:
    """``work/answers.jsonl`` + ``summary.json`` -> ``work/answers.summary.json``."""
    return path.with_name(f"{path.stem}.{suffix}")


def print_files(**files: Any) -> None:
    """Where a command wrote its files: ``rows: a.jsonl; summary: a.summary.json``."""
    console.print("; ".join(f"{name}: {escape(str(path))}" for name, path in files.items()))


def answers_table(summary: dict[str, Any]) -> Table:
    """`eval answers`' summary: scores and cost per method, budget and context limit (80 columns)."""
    title = f"answers to {summary['n_questions']} questions (short = best sentence, lenient; span = reduced)"
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=0, show_edge=False)
    scored = {"EM": "em", "F1": "f1", "short F1": "short_f1", "span EM": "span_em", "span F1": "span_f1"}
    for column in ("method", "budget", "limit", "n", *scored):
        table.add_column(column, justify="left" if column == "method" else "right")
    table.add_column("tokens/ans", justify="right")
    table.add_column("s/answer", justify="right")
    for r in summary["results"]:
        budget = "-" if r["budget"] is None else str(r["budget"])
        if r.get("equal_cost"):
            budget = f"=lazy {budget}"  # at the cost of the lazy search at that budget
        scores = [f"{r[key]:.3f}" if key in r else "-" for key in scored.values()]
        cost = [f"{r['mean_llm_tokens']:.0f}", f"{r['mean_seconds']:.1f}"]
        table.add_row(r["method"], budget, str(r["context_tokens"]), str(r["n"]), *scores, *cost)
    return table


def relevance_summary(report: dict[str, Any]) -> dict[str, Any]:
    """`eval relevance`'s report without the per-passage scores: per prompt, per signal, per fit."""
    prompts = {
        v: {"roc_auc": p["roc_auc"], "suggested_threshold": p["suggested_threshold"]}
        for v, p in report["prompts"].items()
    }
    shown = ("roc_auc_out_of_fold", "coefficients", "intercept", "suggested_threshold")
    combined = {name: fit and {k: fit[k] for k in shown} for name, fit in report["combinations"].items()}
    head = {k: report[k] for k in ("n_questions", "n_passages")}
    return {**head, "prompts": prompts, "signals": report["signals"], "combinations": combined}


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _paired_row(entry: dict[str, Any], result: dict[str, Any], by_type: str) -> list[str]:
    low, high = result["interval"]
    return [
        str(entry["budget"]),
        str(entry["context_tokens"]),
        entry["against"],
        str(result["questions"]),
        f"{result['lazy']:.3f}",
        f"{result['other']:.3f}",
        _points(result["difference"]),
        f"[{_points(low)}, {_points(high)}]",
        f"{result['ahead']} / {result['behind']}",
        by_type,
    ]


def print_paired(report: dict[str, Any]) -> None:
    """`eval paired`'s comparisons: one row per score (answers) or per method (recall), then for answers
    the LLM tokens an answer of each side."""
    answers = report["kind"] == "answers"
    what = "answers" if answers else "recall"
    if "against" in report:  # one run against another, cell by cell
        mine, theirs = Path(report["rows"]).stem, Path(report["against"]).stem
        title = f"{mine} against {theirs}, each method's answers paired by question (points)"
    else:
        mine, theirs = "lazy", "other"
        title = f"lazy search's {what} against each other method, paired by question (points)"
    table = Table(title=title)
    columns = ("budget", "context", "against", "questions", *(("score",) if answers else ()))
    for column in (*columns, mine, theirs, f"{mine} − {theirs}", "95 % interval", "ahead / behind"):
        table.add_column(column, justify="right")
    table.add_column("by type", justify="left")
    for entry in report["comparisons"]:
        for score in report["scores"] if answers else (None,):
            result = entry[score] if score else entry
            if not result["questions"]:
                continue
            typed = {kind: (t[score] if score else t) for kind, t in entry["by_type"].items()}
            by_type = ", ".join(
                f"{kind} {_points(t['difference'])} (n={t['questions']})"
                for kind, t in typed.items()
                if t["questions"]
            )
            cells = _paired_row(entry, result, by_type)
            table.add_row(*cells[:4], *((score,) if score else ()), *cells[4:])
    Console(width=220).print(table)
    for entry in report["comparisons"] if answers else []:
        tokens = entry["tokens"]
        ratio = f"{tokens['ratio']:.1f} ×" if tokens["ratio"] else "n/a"
        out.print(
            f"budget {entry['budget']}, {entry['context_tokens']} tokens: LLM tokens an answer, "
            f"{entry.get('method', 'lazy')} {tokens['lazy']:,.0f} against {entry['against']} "
            f"{tokens['other']:,.0f} ({ratio})"
        )
