"""The evaluations that need no index: judging two answer sets against each other, pairing the rows of
two methods by question, and converting benchmark-qed questions. (The ones that read an index are
methods of ``Index``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.errors import InputError
from lazygraph.settings import Settings, load_settings


def eval_compare(
    a: str,
    b: str,
    out: Path,
    *,
    name_a: str | None = None,
    name_b: str | None = None,
    judge_role: str = "synthesis",
    trials: int = 2,
    temperature: float = 0.0,
    max_tokens: int = 400,
    common_only: bool = False,
    prompt_version: int = 1,
    qed_dir: Path | None = None,
    qed_question_set: str = "questions",
    settings: Settings | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """Pairwise LLM-judge comparison of two answer sets (rows files, FILE#method:budget:limit, JSON
    Lines of answers or benchmark-qed answers), ``trials`` judgements per question in both orders by
    the LLM ``judge_role``: win rates with 95 % intervals, sign tests, position bias and agreement;
    judgements appended to ``out`` (resumable), the summary beside it (``common_only``: only the
    questions both answer; ``qed_dir``: also both sets as benchmark-qed AutoE input)."""
    from lazygraph.eval.compare import evaluate_compare

    return evaluate_compare(
        settings if settings is not None else load_settings(),
        a,
        b,
        out,
        console or Console(stderr=True),
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


def convert_qed_questions(qed_file: Path, out: Path) -> dict[str, Any]:
    """benchmark-qed (AutoQ) questions as a lazygraph questions file; no index or model is needed."""
    from lazygraph.eval.questions import convert_qed_questions as convert

    return convert(qed_file, out)


def eval_paired(
    rows: Path,
    *,
    baselines: Path | None = None,
    out: Path | None = None,
    console: Console | None = None,
    against: Path | None = None,
    questions: Path | None = None,
    skip: int = 0,
    limit: int | None = None,
) -> dict[str, Any]:
    """Lazy search against every other method, paired by question at equal context limits: the rows of
    `eval answers`/`eval sweep` (answer scores), or of `bench query --rows` (recall) with those of
    `bench baselines --rows` as ``baselines``; means, differences with 95 % paired-bootstrap intervals,
    questions ahead and behind, overall and per question type (written to ``out`` too). With
    ``against`` (answer rows of another run of the same methods: an index built with other settings),
    each method, budget and limit of ``rows`` against the same of ``against``, recall included. With
    ``questions``, only the questions ``skip`` and ``limit`` choose from that file (in its order), e.g.
    a data set's calibration questions apart from its evaluation ones."""
    from lazygraph.eval.paired import run_paired

    chosen = None
    if questions is not None:
        from lazygraph.eval.answers import load_answer_questions

        chosen = {q["question_id"] for q in load_answer_questions(questions, skip, limit)}
    elif skip or limit is not None:
        raise InputError("--skip and --limit choose among the questions of --questions; give that file too")
    return run_paired(rows, console or Console(stderr=True), baselines, out, against, chosen)
