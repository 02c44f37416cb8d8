"""Quality against cost across methods: one question set answered by lazy search at several budgets and
by the vector and hybrid baselines, each at several context limits, as a table and a plot.

Quality is what the question set allows (``--quality auto`` picks the first that every question
supports):

- ``f1``: HotpotQA token F1 against the gold ``answer`` of the span one more LLM call reduces the
  answer to (``eval answers``' span score; the F1 of the whole answer is in the table beside it);
- ``recall``: the share of the gold ``supporting_doc_ids`` among the documents of the answer's context;
- ``judge``: the win rate of each method's answers against a reference method's answers at the same
  context limit (``--reference vector``), as ``eval compare`` judges them: the mean over the four
  criteria, both orders, ``--trials`` trials; the reference itself scores 0.5;
- ``breadth`` (asked for, never picked by ``auto``): the distinct documents an answer's sentences cite,
  for global questions without gold and without a capable judge. The table also has the level-1
  communities (themes of the corpus) cited and the themes a report is organised by, for every quality.

Cost is LLM tokens per answer (fresh and cached calls, the cost of the method) and seconds per answer.
One JSON line per (question, method, budget, limit) is appended as soon as it is answered, and every
judgement likewise, so a stopped run resumes where it was. Next to ``--out``: ``.summary.json`` (the
table), ``.png`` (the plot) and ``.judgements.jsonl``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from lazygraph.errors import ConfigError
from lazygraph.eval import qed
from lazygraph.eval.answers import (
    RowKey,
    answer_grid,
    check_grid,
    method_budgets,
    read_rows,
    row_key,
)
from lazygraph.eval.compare import (
    JUDGE_PROMPT_VERSION,
    JudgeSetup,
    Pair,
    cell_name,
    check_options,
    check_role,
    comparison_tasks,
    run_judgements,
    summarise_judgements,
)
from lazygraph.eval.questions import load_question_set
from lazygraph.eval.retrieval import write_report
from lazygraph.eval.rows import sibling
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.engine import QueryEngine
from lazygraph.query.search import SEARCHES
from lazygraph.query.source import with_index_source
from lazygraph.settings import Settings

QUALITIES = ("auto", "f1", "recall", "judge", "breadth")
QUALITY_LABELS = {
    "f1": "F1 of the answers' spans against the gold answers",
    "recall": "recall of the gold supporting documents in the context",
    "judge": "LLM-judge win rate against the reference",
    "breadth": "distinct documents cited per answer",
}
Cell = tuple[str, int | None, int]  # method, budget (None without relevance tests), context limit
JUDGE_MAX_TOKENS = 400  # the reply: five short reasons and verdicts


# ---- options ---------------------------------------------------------------------------------------------
def resolve_quality(quality: str, questions: Sequence[dict[str, Any]]) -> str:
    """The quality measure: the one asked for, checked against the questions, or the first they allow."""
    if quality not in QUALITIES:
        raise ConfigError(f"unknown quality {quality!r}; use --quality {' or '.join(QUALITIES)}")
    lacking = {
        "f1": [q["question_id"] for q in questions if not _has_answer(q)],
        "recall": [q["question_id"] for q in questions if not q.get("supporting_doc_ids")],
    }
    if quality == "auto":
        return next((m for m in ("f1", "recall") if not lacking[m]), "judge")
    if quality in lacking and lacking[quality]:
        field = "a gold answer" if quality == "f1" else "gold supporting_doc_ids"
        raise ConfigError(
            f"--quality {quality} needs {field} for every question; {len(lacking[quality])} have none "
            f"(e.g. {lacking[quality][0]}); use --quality judge or auto"
        )
    return quality


def _has_answer(question: dict[str, Any]) -> bool:
    return isinstance(question.get("answer"), str) and bool(question["answer"].strip())


def parse_reference(text: str, methods: Sequence[str], budgets: Sequence[int]) -> tuple[str, int | None]:
    """``vector`` or ``lazy:50``: the method the others are judged against, which must be in the grid."""
    method, _, budget_text = text.partition(":")
    if method not in methods:
        raise ConfigError(
            f"the reference method {method!r} is not among --methods {','.join(methods)}; add it, or "
            "name another with --reference"
        )
    if not SEARCHES[method].calls_models:
        return method, None
    try:
        budget = int(budget_text) if budget_text else max(budgets)
    except ValueError:
        raise ConfigError(f"--reference takes METHOD or METHOD:BUDGET, e.g. lazy:50; got {text!r}") from None
    if budget not in budgets:
        raise ConfigError(
            f"the reference budget {budget} is not among --budgets {','.join(map(str, budgets))}"
        )
    return method, budget


def grid_cells(
    methods: Sequence[str], budgets: Sequence[int], limits: Sequence[int], equal_cost: bool = False
) -> list[Cell]:
    """The grid's cells; with ``equal_cost``, every method without relevance tests once more per lazy
    budget (its context matched to the lazy search's tokens; the cell's budget names that lazy budget)."""
    cells = [(m, b, t) for m in methods for b in method_budgets(m, budgets) for t in limits]
    if equal_cost:
        cells += [(m, b, t) for m in methods if not SEARCHES[m].calls_models for b in budgets for t in limits]
    return cells


# ---- judging against the reference ----------------------------------------------------------------------
def judge_cells(
    setup: JudgeSetup,
    rows: dict[RowKey, dict[str, Any]],
    questions: Sequence[dict[str, Any]],
    cells: Sequence[Cell],
    reference: tuple[str, int | None],
    trials: int,
    judgements_path: Path,
    console: Console,
) -> dict[Cell, dict[str, Any]]:
    """Each cell's answers judged against the reference's at the same context limit."""
    judged: dict[Cell, dict[str, Any]] = {}
    for cell in cells:
        ref_cell = (reference[0], reference[1], cell[2])
        if cell == ref_cell:
            continue
        names = (cell_name(*cell), cell_name(*ref_cell))
        pairs = [
            Pair(q["question_id"], q["question"], _answer(rows, q, cell), _answer(rows, q, ref_cell))
            for q in questions
        ]
        label = f"{names[0]} vs {names[1]}"
        found = run_judgements(setup, comparison_tasks(pairs, names, trials), judgements_path, console, label)
        judged[cell] = summarise_judgements(found, names, len(pairs), trials)
    return judged


def _answer(rows: dict[RowKey, dict[str, Any]], question: dict[str, Any], cell: Cell) -> str:
    return rows[(question["question_id"], *cell)]["answer"]


# ---- the table and the plot -----------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise_cell(cell: Cell, rows: Sequence[dict[str, Any]], quality: str, judged: dict | None) -> dict:
    """One line of the table: quality, every score the rows carry, and the cost per answer."""
    method, budget, limit = cell
    f1 = _mean([r["f1"] for r in rows if "f1" in r])
    span_f1 = _mean([r["span_f1"] for r in rows if "span_f1" in r])
    found = _mean([r["recall"] for r in rows if "recall" in r])
    win_rate = judged["overall"]["win_rate_a"] if judged else (0.5 if quality == "judge" else None)
    result = {
        "method": method,
        "budget": budget,
        "context_tokens": limit,
        "name": cell_name(*cell),
        "n": len(rows),
        "quality": {
            "f1": span_f1 if span_f1 is not None else f1,
            "recall": found,
            "judge": win_rate,
            "breadth": _mean([len(r.get("cited_doc_ids", [])) for r in rows]),
        }[quality],
        "f1": f1,
        "span_f1": span_f1,
        "short_f1": _mean([r["short_f1"] for r in rows if "short_f1" in r]),
        "recall": found,
        "win_rate": win_rate,
        "mean_llm_tokens": _mean([r["llm_tokens"] for r in rows]),
        "mean_seconds": _mean([r["seconds"] for r in rows]),
        "mean_llm_calls": _mean([r["llm_calls"] for r in rows]),
        "mean_relevance_tests": _mean([r["relevance_tests"] for r in rows]),
        # breadth: documents and level-1 communities the answer's sentences cite (global questions)
        "mean_cited_docs": _mean([len(r.get("cited_doc_ids", [])) for r in rows]),
        "mean_cited_communities": _mean([r.get("cited_communities", 0) for r in rows]),
        "mean_themes": _mean([len(r.get("themes", [])) for r in rows]),
    }
    if judged:
        result["judge"] = {c: judged["criteria"][c] for c in judged["criteria"]} | {
            "overall": judged["overall"]
        }
    return result


def plot_sweep(results: Sequence[dict[str, Any]], quality: str, path: Path) -> Path:
    """Quality against tokens per answer and against seconds per answer, one line per method and limit
    (the lazy method's points labelled with their budget)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the figure only goes to a file
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    series: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        if r["quality"] is not None:
            series[(r["method"], r["context_tokens"])].append(r)
    for axis, cost, label in zip(
        axes,
        ("mean_llm_tokens", "mean_seconds"),
        ("LLM tokens per answer", "seconds per answer"),
        strict=True,
    ):
        for (method, limit), points in series.items():
            points = sorted(points, key=lambda r: r[cost] or 0)
            xs, ys = [p[cost] or 0 for p in points], [p["quality"] for p in points]
            axis.plot(xs, ys, marker="o", label=f"{method} (limit {limit})")
            for p, x, y in zip(points, xs, ys, strict=True):
                if p["budget"] is not None:
                    axis.annotate(
                        f"b{p['budget']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8
                    )
        axis.set_xlabel(label)
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel(QUALITY_LABELS[quality])
    axes[0].legend(fontsize=8)
    figure.suptitle(f"quality ({quality}) against cost")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=110)
    plt.close(figure)
    return path


def sweep_table(summary: dict[str, Any]) -> Table:
    title = f"{summary['n_questions']} questions; quality = {QUALITY_LABELS[summary['quality']]}"
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=0, show_edge=False)  # fits in 80 columns
    for column in (
        "method",
        "budget",
        "limit",
        "n",
        "quality",
        "F1",
        "recall",
        "win rate",
        "docs",
        "comms",
        "tokens/answer",
        "s/answer",
    ):
        table.add_column(column, justify="left" if column == "method" else "right", no_wrap=True)
    for r in summary["results"]:
        budget = "-" if r["budget"] is None else str(r["budget"])
        if r["budget"] is not None and not SEARCHES[r["method"]].calls_models:
            budget = f"=lazy {budget}"  # at the cost of the lazy search at that budget
        scores = [_fmt(r[k], 3) for k in ("quality", "f1", "recall", "win_rate")]
        scores += [_fmt(r["mean_cited_docs"], 1), _fmt(r["mean_cited_communities"], 1)]
        cost = [_fmt(r["mean_llm_tokens"], 0), _fmt(r["mean_seconds"], 1)]
        table.add_row(r["method"], budget, str(r["context_tokens"]), str(r["n"]), *scores, *cost)
    return table


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ---- benchmark-qed files ---------------------------------------------------------------------------------
def export_qed(
    engine: QueryEngine,
    rows: dict[RowKey, dict[str, Any]],
    cells: Sequence[Cell],
    qed_dir: Path,
    question_set: str,
) -> list[Path]:
    """Per cell, its answers and contexts (the chunks of the answer's context, as prompts quote them)."""
    snapshot = engine.snapshot
    index = snapshot.chunk_index()
    written = []
    for cell in cells:
        cell_rows = [
            {
                **r,
                "context": [
                    {"chunk_id": c, "text": snapshot.passage(index[c])}
                    for c in r.get("context_chunk_ids", [])
                    if c in index
                ],
            }
            for key, r in rows.items()
            if key[1:] == cell
        ]
        written.append(qed.write_answers(qed_dir, cell_name(*cell), question_set, cell_rows))
        written.append(qed.write_contexts(qed_dir, cell_name(*cell), question_set, cell_rows))
    return written


# ---- the command -----------------------------------------------------------------------------------------
def run_sweep(
    engine: QueryEngine,
    questions: Sequence[dict[str, Any]],
    grid: tuple[Sequence[str], Sequence[int], Sequence[int]],
    out_path: Path,
    console: Console,
    *,
    quality: str,
    reference: tuple[str, int | None] | None = None,
    judge: JudgeSetup | None = None,
    trials: int = 2,
    equal_cost: bool = False,
) -> dict[str, Any]:
    """Answer the grid, judge it when the quality is the judge's, and write the table and the plot."""
    out_path = Path(out_path)
    cells = grid_cells(*grid, equal_cost=equal_cost)
    span = all(_has_answer(q) for q in questions)
    rows = answer_grid(engine, questions, grid, out_path, console, equal_cost, span)
    judged: dict[Cell, dict[str, Any]] = {}
    if quality == "judge":
        if judge is None or reference is None:
            raise ConfigError("judge quality needs a judge and a reference method")
        path = sibling(out_path, "judgements.jsonl")
        judged = judge_cells(judge, rows, questions, cells, reference, trials, path, console)
        engine.flush_llm_cache()  # judgements made at temperature 0 survive for the next run
    by_cell: dict[Cell, list[dict[str, Any]]] = defaultdict(list)
    for key, row in rows.items():
        by_cell[key[1:]].append(row)
    results = [summarise_cell(c, by_cell[c], quality, judged.get(c)) for c in cells]
    summary: dict[str, Any] = {
        "n_questions": len(questions),
        "quality": quality,
        "quality_label": QUALITY_LABELS[quality],
        "reference": cell_name(reference[0], reference[1], None)
        if quality == "judge" and reference
        else None,
        "trials": trials if quality == "judge" else None,
        "results": results,
        "rows_file": str(out_path),
        "plot": _plot_or_warn(results, quality, sibling(out_path, "png"), console),
    }
    write_report(sibling(out_path, "summary.json"), summary)
    return summary


def _plot_or_warn(
    results: Sequence[dict[str, Any]], quality: str, path: Path, console: Console
) -> str | None:
    try:
        return str(plot_sweep(results, quality, path))
    except ImportError:
        console.print(
            "[yellow]warning:[/] matplotlib is not installed, so no plot was drawn; install the pinned "
            "version from requirements.txt (pip install -r requirements.txt) and run the command again"
        )
        return None


def evaluate_sweep(
    settings: Settings,
    index: str,
    questions_file: Path,
    out_path: Path,
    console: Console,
    *,
    methods: Sequence[str],
    budgets: Sequence[int],
    limits: Sequence[int],
    quality: str = "auto",
    reference: str = "vector",
    judge_role: str = "synthesis",
    trials: int = 2,
    temperature: float = 0.0,
    skip: int = 0,
    limit: int | None = None,
    qed_dir: Path | None = None,
    qed_question_set: str = "questions",
    engine: QueryEngine | None = None,
    judge: LLMClient | None = None,
    equal_cost: bool = False,
) -> dict[str, Any]:
    """The `lazygraph eval sweep` command: everything cheap is checked before the index opens."""
    if skip < 0 or (limit is not None and limit < 1):
        raise ConfigError("--skip takes 0 or more and --limit 1 or more questions")
    check_grid(methods, budgets, limits)
    questions = load_question_set(Path(questions_file), skip, limit)
    chosen = resolve_quality(quality, questions)
    ref = parse_reference(reference, methods, budgets) if chosen == "judge" else None
    if chosen == "judge":
        check_options(trials, temperature, JUDGE_MAX_TOKENS)
        check_role(judge_role)
        prompt = load_prompt("judge_pairwise", JUDGE_PROMPT_VERSION)
    # Evaluation reads per-chunk data (ranks, breadth, the focus) that only the snapshot holds.
    engine = engine or QueryEngine.open(with_index_source(settings, "snapshot"), index, console=console)
    setup = None
    if chosen == "judge":
        # The engine's own client of that role: the model is loaded once, and its LLM cache answers
        # judgements already made at temperature 0.
        client = judge or getattr(engine.roles("synthesis"), judge_role)
        setup = JudgeSetup(client, prompt, temperature, JUDGE_MAX_TOKENS)
    grid = (methods, budgets, limits)
    out_path = Path(out_path)
    if equal_cost and "lazy" not in methods:
        raise ConfigError("--equal-cost matches the lazy search's cost: add lazy to --methods")
    summary = run_sweep(
        engine,
        questions,
        grid,
        out_path,
        console,
        quality=chosen,
        reference=ref,
        judge=setup,
        trials=trials,
        equal_cost=equal_cost,
    )
    if qed_dir is not None:
        rows = {row_key(r): r for r in read_rows(out_path, console)}
        cells = grid_cells(*grid, equal_cost=equal_cost)
        summary["qed_files"] = [
            str(p) for p in export_qed(engine, rows, cells, Path(qed_dir), qed_question_set)
        ]
        write_report(sibling(out_path, "summary.json"), summary)
    return summary
