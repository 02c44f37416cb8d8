"""The evaluations that need no index: judging two answer sets against each other, pairing the rows of
two methods by question, and converting benchmark-qed questions. (The ones that read an index are
methods of ``Index``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.settings import Settings, load_settings


def eval_compare(
    a: str,
    b: str,
    out: Path,
    *,
    settings: Settings | None = None,
    console: Console | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Pairwise LLM-judge comparison of two answer sets (rows files, FILE#method:budget:limit, JSON
    Lines of answers or benchmark-qed answers): win rates with 95 % intervals, sign tests, position
    bias and agreement; judgements appended to ``out`` (resumable), the summary beside it. ``options``:
    name_a, name_b, judge_role, trials, temperature, max_tokens, common_only, prompt_version, qed_dir,
    qed_question_set."""
    from lazygraph.eval.compare import evaluate_compare

    settings = settings if settings is not None else load_settings()
    return evaluate_compare(settings, a, b, out, console or Console(stderr=True), **options)


def convert_qed_questions(qed_file: Path, out: Path) -> dict[str, Any]:
    """benchmark-qed (AutoQ) questions as a lazygraph questions file; no index or model is needed."""
    from lazygraph.eval.questions import convert_qed_questions as convert

    return convert(qed_file, out)


def eval_paired(
    rows: Path, *, baselines: Path | None = None, out: Path | None = None, console: Console | None = None
) -> dict[str, Any]:
    """Lazy search against every other method, paired by question at equal context limits: the rows of
    `eval answers`/`eval sweep` (answer scores), or of `bench query --rows` (recall) with those of
    `bench baselines --rows` as ``baselines``; means, differences with 95 % paired-bootstrap intervals,
    questions ahead and behind, overall and per question type (written to ``out`` too)."""
    from lazygraph.eval.paired import run_paired

    return run_paired(rows, console or Console(stderr=True), baselines, out)
