"""`lazygraph eval`: retrieval recall, answer quality, relevance calibration, judged comparisons,
generated questions and cost-quality sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli import options as opt
from lazygraph.cli import render

app = typer.Typer(help="Measure retrieval and answer quality.", no_args_is_help=True)


@app.command("retrieval")
def retrieval(
    questions: opt.QuestionsOption,
    budget: Annotated[int, typer.Option(help="Relevance-test budget for lazy search.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the JSON report.")],
    index: opt.IndexOption = None,
    context_tokens: Annotated[
        int, typer.Option(help="Context-token limit, the same for every method.")
    ] = 1000,
    limit: opt.LimitOption = None,
) -> None:
    """Gold-document recall of lazy search and the baselines at the same context limit."""
    report = opt.opened(index).eval_retrieval(
        questions, out_file, budget=budget, context_tokens=context_tokens, limit=limit
    )
    render.print_json({k: v for k, v in report.items() if k != "questions"})


@app.command("relevance")
def relevance(
    questions: opt.QuestionsOption,
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the JSON report.")],
    index: opt.IndexOption = None,
    skip: opt.SkipOption = 0,
    limit: opt.LimitOption = None,
    top: Annotated[int, typer.Option(help="Score each question's top N passages by similarity.")] = 10,
    prompt_version: Annotated[
        list[int] | None, typer.Option(help="Relevance prompt version to score (repeatable; default newest).")
    ] = None,
    target_recall: Annotated[
        float, typer.Option(help="Suggest the highest threshold keeping this share of gold passages.")
    ] = 0.9,
) -> None:
    """Calibrate relevance: how P(yes), similarity and BM25 separate gold passages, alone and combined."""
    report = opt.opened(index).eval_relevance(
        questions,
        out_file,
        skip=skip,
        limit=limit,
        top=top,
        prompt_versions=prompt_version or (),
        target_recall=target_recall,
    )
    render.print_json(render.relevance_summary(report))


@app.command("answers")
def answers(
    questions: opt.QuestionsOption,
    out_file: opt.OutOption,
    index: opt.IndexOption = None,
    methods: opt.MethodsOption = None,
    budgets: opt.BudgetsOption = "50",
    limits: opt.LimitsOption = "1000",
    skip: opt.SkipOption = 0,
    limit: opt.LimitOption = None,
    span: Annotated[
        bool, typer.Option(help="Also score the span one more LLM call reduces each answer to.")
    ] = True,
    equal_cost: opt.EqualCostOption = True,
) -> None:
    """Answer quality against gold answers: HotpotQA EM and F1 per method, budget and context limit."""
    summary = opt.opened(index).eval_answers(
        questions,
        out_file,
        methods=opt.parse_methods(methods),
        budgets=opt.parse_int_list(budgets, "--budgets"),
        limits=opt.parse_int_list(limits, "--limits"),
        skip=skip,
        limit=limit,
        span=span,
        equal_cost=equal_cost,
    )
    render.out.print(render.answers_table(summary))
    render.print_files(rows=out_file, summary=render.sibling(out_file, "summary.json"))


@app.command("compare")
def compare(
    a: opt.AnswersAOption,
    b: opt.AnswersBOption,
    out_file: opt.OutOption,
    name_a: Annotated[
        str | None, typer.Option(help="Name of A in the report (default: from the file).")
    ] = None,
    name_b: Annotated[
        str | None, typer.Option(help="Name of B in the report (default: from the file).")
    ] = None,
    judge_role: opt.JudgeRoleOption = "synthesis",
    trials: opt.TrialsOption = 2,
    temperature: opt.TemperatureOption = 0.0,
    max_tokens: Annotated[int, typer.Option(help="Longest judge reply, in tokens.")] = 400,
    common_only: Annotated[
        bool, typer.Option("--common-only", help="Judge the questions both files answer; ignore the rest.")
    ] = False,
    prompt_version: Annotated[int, typer.Option(help="Version of the judge_pairwise prompt.")] = 1,
    qed_dir: opt.QedDirOption = None,
    qed_question_set: opt.QedSetOption = "questions",
) -> None:
    """Pairwise LLM-judge comparison of two answer sets: win rates with 95% intervals, sign tests,
    position bias and agreement, on comprehensiveness, diversity, empowerment, relevance and directness."""
    summary = api.eval_compare(
        a,
        b,
        out_file,
        settings=opt.settings(),
        console=render.console,
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
    render.out.print(api.compare_table(summary))
    if summary["failed_judgements"]:
        render.console.print(
            f"[yellow]{summary['failed_judgements']} judgements could not be read;[/] "
            "run the command again to retry them"
        )
    render.print_files(rows=out_file, summary=render.sibling(out_file, "summary.json"))


@app.command("questions")
def questions(
    out_file: Annotated[
        Path,
        typer.Option("--out", help="JSON Lines of questions; .local/.global files and summary next to it."),
    ],
    index: opt.IndexOption = None,
    local: Annotated[int, typer.Option("--local", help="Local questions (one passage answers each).")] = 10,
    global_: Annotated[
        int, typer.Option("--global", help="Global questions (themes across many passages).")
    ] = 10,
    oversample: Annotated[float, typer.Option(help="Candidates written per question kept.")] = 1.5,
    seed: Annotated[int, typer.Option(help="Seed of the sampling of chunks and communities.")] = 42,
    role: Annotated[str, typer.Option(help="LLM role that writes the questions.")] = "synthesis",
    passages: Annotated[int, typer.Option(help="Passages shown per global question.")] = 5,
    passage_tokens: Annotated[int, typer.Option(help="Tokens kept of each global passage.")] = 250,
    qed_dir: opt.QedDirOption = None,
    from_qed: Annotated[
        Path | None,
        typer.Option(help="Convert benchmark-qed questions (selected_questions.json) instead; no index."),
    ] = None,
) -> None:
    """Generate local and global questions from an index (AutoQ-style), or convert benchmark-qed's."""
    if from_qed is not None:
        render.print_json(api.convert_qed_questions(from_qed, out_file))
        return
    summary = opt.opened(index).eval_questions(
        out_file,
        n_local=local,
        n_global=global_,
        oversample=oversample,
        seed=seed,
        role=role,
        passages=passages,
        passage_tokens=passage_tokens,
        qed_dir=qed_dir,
    )
    render.print_json(summary)


@app.command("sweep")
def sweep(
    questions: opt.QuestionsOption,
    out_file: opt.OutOption,
    index: opt.IndexOption = None,
    methods: opt.MethodsOption = None,
    budgets: opt.BudgetsOption = "20,50,100",
    limits: opt.LimitsOption = "1000",
    quality: Annotated[str, typer.Option(help="auto, f1, recall, judge or breadth.")] = "auto",
    reference: Annotated[
        str, typer.Option(help="Method the judge compares the others with (METHOD or lazy:BUDGET).")
    ] = "vector",
    judge_role: opt.JudgeRoleOption = "synthesis",
    trials: opt.TrialsOption = 2,
    temperature: opt.TemperatureOption = 0.0,
    skip: opt.SkipOption = 0,
    limit: opt.LimitOption = None,
    qed_dir: opt.QedDirOption = None,
    qed_question_set: opt.QedSetOption = "questions",
    equal_cost: opt.EqualCostOption = True,
) -> None:
    """Quality against LLM tokens and seconds per answer, across methods and budgets: table and plot."""
    summary = opt.opened(index).eval_sweep(
        questions,
        out_file,
        methods=opt.parse_methods(methods),
        budgets=opt.parse_int_list(budgets, "--budgets"),
        limits=opt.parse_int_list(limits, "--limits"),
        equal_cost=equal_cost,
        quality=quality,
        reference=reference,
        judge_role=judge_role,
        trials=trials,
        temperature=temperature,
        skip=skip,
        limit=limit,
        qed_dir=qed_dir,
        qed_question_set=qed_question_set,
    )
    render.out.print(api.sweep_table(summary))
    plot = summary["plot"] or "(not drawn)"
    render.print_files(rows=out_file, table=render.sibling(out_file, "summary.json"), plot=plot)


@app.command("paired")
def paired(
    rows: Annotated[
        Path, typer.Argument(help="Rows of `eval answers`/`eval sweep`, or of `bench query --rows`.")
    ],
    baselines: Annotated[
        Path | None, typer.Option(help="With retrieval rows: the rows of `bench baselines --rows` too.")
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Also write the comparisons as JSON.")
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option(
            help="Answer rows of another run of the same methods (another index or settings): pair each "
            "method, budget and limit of ROWS with the same of this file instead."
        ),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            help="Pair only the questions --skip and --limit choose from this file (e.g. a data set's "
            "calibration questions apart from its evaluation ones).",
        ),
    ] = None,
    skip: opt.SkipOption = 0,
    limit: opt.LimitOption = None,
) -> None:
    """Lazy search against every other method, paired by question at equal context limits (and each
    budget against the lowest): differences with 95 % bootstrap intervals, questions ahead and behind,
    overall and per question type. With --against, one run against another, method by method."""
    report = api.eval_paired(
        rows,
        baselines=baselines,
        out=out_file,
        console=render.console,
        against=against,
        questions=questions,
        skip=skip,
        limit=limit,
    )
    render.print_paired(report)
