"""Pairwise LLM-judge comparison of two answer sets, for a corpus without gold answers.

An LLM judge reads a question and two answers and says, on each criterion of the GraphRAG and
LazyGraphRAG evaluations (comprehensiveness, diversity, empowerment, relevance) and on directness,
which answer is better or that they tie. Directness is the control: it favours short, literal
answers, so a method that wins the other four by being long should lose it.

A small judge is biased and noisy, so each pair is judged in both orders (answer A shown first, then
answer B shown first) and over several trials (each with its own judgement id in the prompt, so the
trials are distinct prompts even at temperature 0), and the report says how far it can be trusted:

- per criterion, the win rate of A: each question's mean score over its judgements (A's win 1, tie
  0.5, loss 0), averaged over questions, with a 95 % Wilson interval over questions;
- a two-sided sign test over questions (A better, B better; tied questions left out);
- position bias: among decided judgements, the share won by the answer shown first (0.5 unbiased),
  with its own sign test;
- agreement between the two orders (same winner whichever answer came first) and across trials.

One JSON line per judgement (question, trial, order) is appended as soon as it is made, so a stopped
run resumes where it was; a judgement whose reply could not be read is tried again on the next run.
Rows are keyed by a hash of the question, both answers, the judge model, prompt version and
temperature, so changed answers are judged afresh.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lazygraph.errors import ConfigError, InputError, LLMError
from lazygraph.eval import qed
from lazygraph.eval.retrieval import progress_bar, write_report
from lazygraph.eval.rows import append_rows, read_row_file, sibling
from lazygraph.eval.stats import agreement, rounded, sign_test, wilson_interval
from lazygraph.jsonlines import iter_json_objects
from lazygraph.llm.base import LLMClient, parse_json_text
from lazygraph.llm.factory import make_client
from lazygraph.llm.prompts import Prompt, load_prompt, quote_passage
from lazygraph.settings import Settings

CRITERIA = ("comprehensiveness", "diversity", "empowerment", "relevance")
CONTROL = "directness"
ALL_CRITERIA = (*CRITERIA, CONTROL)
ORDERS = ("ab", "ba")  # "ab": answer A is shown first
JUDGE_PROMPT_VERSION = 1  # pinned, so a report stays tied to the prompt it was judged with
JUDGE_ROLES = ("synthesis", "relevance")
_SCORE = {"a": 1.0, "tie": 0.5, "b": 0.0}
_CITATION = re.compile(r"\s*\[Data: Sources \([^)]*\)\]")
# Tokens kept free in the judge's window beyond the rendered prompt and the reply (template markers).
_WINDOW_MARGIN = 64


@dataclass(frozen=True)
class AnswerSet:
    """One condition's answers: question id -> row with question and answer (and context, if any)."""

    name: str
    source: str
    answers: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Pair:
    question_id: str
    question: str
    answer_a: str
    answer_b: str


# ---- reading answer sets ------------------------------------------------------------------------------
def cell_name(method: str, budget: int | None, limit: int | None) -> str:
    """``lazy-b50-t1000``: how a method, budget and context limit are named in reports and folders."""
    parts = [method] + ([f"b{budget}"] if budget is not None else []) + ([f"t{limit}"] if limit else [])
    return "-".join(parts)


def _cell(row: dict[str, Any]) -> tuple[str, int | None, int | None]:
    return (str(row["method"]), row.get("budget"), row.get("context_tokens"))


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE#method[:budget[:limit]]`` (a cell of an ``eval answers``/``eval sweep`` file;
    ``method:limit`` for the methods without a budget, vector and hybrid)."""
    path, _, selector = spec.partition("#")
    return Path(path), (selector or None)


def _matches(cell: tuple[str, int | None, int | None], selector: str) -> bool:
    parts = selector.split(":")
    if len(parts) == 2 and cell[1] is None:  # "vector:1000": a method without a budget takes a limit
        parts = [parts[0], "-", parts[1]]
    wanted = [parts[0], *(None if p in ("", "-") else p for p in parts[1:3])]
    if cell[0] != wanted[0]:
        return False
    return all(w is None or str(c) == w for c, w in zip(cell[1:], wanted[1:], strict=False))


def _read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of a JSON Lines file or a benchmark-qed answers file (``.json``)."""
    if not path.is_file():
        raise InputError(
            f"answers file {path} does not exist or is not a file; pass the --out file of "
            "`lazygraph eval answers`, a JSON Lines file of {question_id, question, answer}, "
            "or a benchmark-qed answers .json file"
        )
    if path.suffix.lower() == ".json":
        return [(f"{path} item {i}", row) for i, row in enumerate(qed.read_answers(path), start=1)]
    found = []
    for number, row in iter_json_objects(path):
        row.setdefault("question_id", f"q{number}")
        found.append((f"{path}:{number}", row))
    return found


def _select_cell(rows: list[tuple[str, dict[str, Any]]], selector: str | None, path: Path) -> list:
    """The rows of one method/budget/limit when the file holds rows of several."""
    if not any("method" in row for _, row in rows):
        if selector:
            raise InputError(f"{path} holds plain answers, not rows per method; drop '#{selector}'")
        return rows
    cells = list(dict.fromkeys(_cell(row) for _, row in rows))
    chosen = [c for c in cells if selector is None or _matches(c, selector)]
    listed = ", ".join(f"{path}#{c[0]}:{'-' if c[1] is None else c[1]}:{c[2]}" for c in cells)
    if not chosen:
        raise InputError(f"{path} has no answers of {selector!r}; it holds {listed}")
    if len(chosen) > 1:
        raise InputError(f"{path} holds answers of several methods; pick one, e.g. one of {listed}")
    return [(where, row) for where, row in rows if _cell(row) == chosen[0]]


def load_answer_set(spec: str, name: str | None = None) -> AnswerSet:
    """The answers of ``FILE`` or ``FILE#method[:budget[:limit]]``, each checked, ids unique."""
    path, selector = split_spec(spec)
    rows = _select_cell(_read_rows(path), selector, path)
    answers: dict[str, dict[str, Any]] = {}
    for where, row in rows:
        _check_answer_row(row, where)
        question_id = str(row["question_id"])
        if question_id in answers:
            raise InputError(
                f"{where}: question id {question_id} appears twice; keep one answer per question"
            )
        answers[question_id] = row
    if not answers:
        raise InputError(f"{path} holds no answers; answer some questions first (lazygraph eval answers)")
    default = cell_name(*_cell(rows[0][1])) if "method" in rows[0][1] else path.stem
    return AnswerSet(name or default, spec, answers)


def _check_answer_row(row: dict[str, Any], where: str) -> None:
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        raise InputError(f"{where} needs the question text (question, or question_text in a .json file)")
    if not isinstance(row.get("answer"), str) or not row["answer"].strip():
        raise InputError(f"{where} has no answer; answer the question again or remove the line")


def pair_answers(a: AnswerSet, b: AnswerSet, common_only: bool = False) -> list[Pair]:
    """The questions both sets answer, in A's order; different question sets are refused."""
    only_a = [q for q in a.answers if q not in b.answers]
    only_b = [q for q in b.answers if q not in a.answers]
    shared = [q for q in a.answers if q in b.answers]
    if not shared:
        raise InputError(
            f"no question id is in both {a.source} and {b.source}: they answer different question sets; "
            "answer the same questions file with both methods"
        )
    if (only_a or only_b) and not common_only:
        raise InputError(
            f"the question ids differ: {len(only_a)} only in {a.source} ({_some(only_a)}), {len(only_b)} "
            f"only in {b.source} ({_some(only_b)}); answer the same questions with both, or pass "
            f"--common-only to judge the {len(shared)} they share"
        )
    pairs = []
    for question_id in shared:
        row_a, row_b = a.answers[question_id], b.answers[question_id]
        if " ".join(row_a["question"].split()) != " ".join(row_b["question"].split()):
            raise InputError(
                f"question {question_id} reads differently in {a.source} and {b.source}; the files "
                "answer different question sets under the same ids"
            )
        pairs.append(Pair(question_id, row_a["question"], row_a["answer"], row_b["answer"]))
    return pairs


def _some(ids: Sequence[str], n: int = 3) -> str:
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "") if ids else "none"


# ---- one judgement ------------------------------------------------------------------------------------
def judge_schema() -> dict[str, Any]:
    """Every criterion, in the prompt's order: a short reason, then the shown answer that wins."""
    verdict = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 240},
            "winner": {"type": "string", "enum": ["1", "2", "tie"]},
        },
        "required": ["reason", "winner"],
    }
    return {
        "type": "object",
        "properties": {criterion: verdict for criterion in ALL_CRITERIA},
        "required": list(ALL_CRITERIA),
    }


def clean_answer(text: str) -> str:
    """The answer without citation markers (chunk ids are noise to a judge), quoted for the prompt."""
    return quote_passage(_CITATION.sub("", text).strip())


def judge_messages(prompt: Prompt, pair: Pair, order: str, judgement_id: str) -> list[dict[str, str]]:
    first, second = (pair.answer_a, pair.answer_b) if order == "ab" else (pair.answer_b, pair.answer_a)
    return prompt.messages(
        question=pair.question,
        answer_1=clean_answer(first),
        answer_2=clean_answer(second),
        judgement_id=judgement_id,
    )


def _shown_winner(value: Any) -> str | None:
    """ "1", "2" or "tie" from what a judge wrote ({"winner": ...}, or the winner alone)."""
    if isinstance(value, dict):
        value = value.get("winner")
    text = str(value).strip().lower() if value is not None else ""
    text = text.removeprefix("answer").strip()
    if text in ("1", "2"):
        return text
    if text in ("tie", "0", "neither", "equal", "both", "draw"):
        return "tie"
    return None


def parse_verdicts(text: str) -> tuple[dict[str, str | None], dict[str, str]]:
    """Shown winners and reasons per criterion; LLMError when the reply holds no verdict at all."""
    data = parse_json_text(text)
    if not isinstance(data, dict):
        raise LLMError(f"the judge did not reply with a JSON object: {text[:200]!r}")
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    shown = {c: _shown_winner(lowered.get(c)) for c in ALL_CRITERIA}
    if all(v is None for v in shown.values()):
        raise LLMError(f"the judge's reply names no winner for any criterion: {text[:200]!r}")
    reasons = {c: str(lowered[c].get("reason", "")) for c in ALL_CRITERIA if isinstance(lowered.get(c), dict)}
    return shown, reasons


def to_condition(shown: str | None, order: str) -> str | None:
    """The shown winner as the condition that won: "a", "b" or "tie"."""
    if shown in (None, "tie"):
        return shown
    first_won = shown == "1"
    return "a" if first_won == (order == "ab") else "b"


@dataclass(frozen=True)
class JudgeSetup:
    """What a judgement depends on besides the answers: it is part of every row's key."""

    client: LLMClient
    prompt: Prompt
    temperature: float
    max_tokens: int

    def pair_key(self, pair: Pair) -> str:
        material = [self.client.model_id, self.prompt.version, self.temperature, *_pair_text(pair)]
        return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:16]


def _pair_text(pair: Pair) -> tuple[str, str, str]:
    return (pair.question, pair.answer_a, pair.answer_b)


def judge_once(setup: JudgeSetup, pair: Pair, names: tuple[str, str], trial: int, order: str) -> dict:
    """One judgement as a row; an unreadable reply becomes the row's error (tried again next run)."""
    key = setup.pair_key(pair)
    judgement_id = hashlib.sha256(f"{key}/{trial}/{order}".encode()).hexdigest()[:8]
    first, second = names if order == "ab" else names[::-1]
    row: dict[str, Any] = {
        "pair_key": key,
        "question_id": pair.question_id,
        "trial": trial,
        "order": order,
        "name_a": names[0],
        "name_b": names[1],
        "first": first,
        "second": second,
        "judge": setup.client.model_id,
        "prompt_version": setup.prompt.version,
        "temperature": setup.temperature,
    }
    messages = judge_messages(setup.prompt, pair, order, judgement_id)
    try:
        result = setup.client.chat(
            messages, max_tokens=setup.max_tokens, temperature=setup.temperature, json_schema=judge_schema()
        )
        shown, reasons = parse_verdicts(result.text)
    except LLMError as exc:
        return {**row, "error": str(exc), "verdicts": {}, "shown": {}, "reasons": {}}
    return {
        **row,
        "verdicts": {c: to_condition(shown[c], order) for c in ALL_CRITERIA},
        "shown": shown,
        "reasons": reasons,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
        "error": None,
    }


# ---- many judgements, resumable ----------------------------------------------------------------------
Task = tuple[Pair, tuple[str, str], int, str]  # pair, (name A, name B), trial, order


def run_judgements(
    setup: JudgeSetup, tasks: Sequence[Task], out_path: Path, console: Console, label: str = "judgements"
) -> list[dict[str, Any]]:
    """Judge every task not yet judged in ``out_path``; return the rows of ``tasks``, in their order."""
    out_path = Path(out_path)
    latest = {_row_key(r): r for r in read_row_file(out_path, ("pair_key", "trial", "order"), console)}
    keys = [(setup.pair_key(pair), trial, order) for pair, _, trial, order in tasks]
    todo = [t for t, k in zip(tasks, keys, strict=True) if latest.get(k, {}).get("error", True) is not None]
    if len(todo) < len(tasks):
        console.print(
            f"resuming: {len(tasks) - len(todo)} of {len(tasks)} {label} already in {escape(str(out_path))}"
        )
    start = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task(label, total=len(tasks), completed=len(tasks) - len(todo))
        for done, (pair, names, trial, order) in enumerate(todo, start=1):
            row = judge_once(setup, pair, names, trial, order)
            append_rows(out_path, [row])
            latest[_row_key(row)] = row
            per = (time.perf_counter() - start) / done
            progress.update(bar, advance=1, description=f"{label} ({per:.1f} s/judgement)")
    return [latest[k] for k in keys if k in latest]


def _row_key(row: dict[str, Any]) -> tuple[str, int, str]:
    return (str(row["pair_key"]), int(row["trial"]), str(row["order"]))


def comparison_tasks(pairs: Sequence[Pair], names: tuple[str, str], trials: int) -> list[Task]:
    """Question by question, each trial in both orders (a stopped run leaves whole questions done)."""
    return [(pair, names, trial, order) for pair in pairs for trial in range(trials) for order in ORDERS]


# ---- the summary ----------------------------------------------------------------------------------------
def summarise_criterion(rows: Sequence[dict[str, Any]], criterion: str, names: tuple[str, str]) -> dict:
    """Win rate of A with its interval and sign test, position bias and agreement, for one criterion."""
    judged = [r for r in rows if not r.get("error") and r["verdicts"].get(criterion) is not None]
    by_question: dict[str, list[float]] = defaultdict(list)
    for r in judged:
        by_question[r["question_id"]].append(_SCORE[r["verdicts"][criterion]])
    means = [sum(s) / len(s) for s in by_question.values()]
    wins, losses = sum(m > 0.5 for m in means), sum(m < 0.5 for m in means)
    n = len(means)
    win_rate = sum(means) / n if n else None
    low, high = wilson_interval(sum(means), n)
    p_value = sign_test(wins, losses)
    significant = p_value < 0.05
    shown = [r["shown"][criterion] for r in judged]
    first, second = shown.count("1"), shown.count("2")
    order_groups, trial_groups = _agreement_groups(judged, criterion)
    order_rate, order_pairs = agreement(order_groups)
    trial_rate, trial_pairs = agreement(trial_groups)
    return {
        "n_questions": n,
        "wins_a": wins,
        "wins_b": losses,
        "ties": n - wins - losses,
        "win_rate_a": rounded(win_rate),
        "ci95": [round(low, 4), round(high, 4)],
        "p_value": p_value,
        "significant": significant,
        "better": (names[0] if wins > losses else names[1]) if significant else None,
        "judgements": len(judged),
        "tie_rate": rounded(shown.count("tie") / len(shown)) if shown else None,
        "first_shown_wins": rounded(first / (first + second)) if first + second else None,
        "position_p_value": sign_test(first, second),
        "order_agreement": rounded(order_rate),
        "order_pairs": order_pairs,
        "trial_agreement": rounded(trial_rate),
        "trial_pairs": trial_pairs,
    }


def _agreement_groups(judged: Sequence[dict[str, Any]], criterion: str) -> tuple[list, list]:
    """Verdicts grouped per (question, trial) across the two orders, and per (question, order) across
    trials; verdicts name the winning condition, so a judge that follows the answer agrees."""
    by_trial: dict[tuple[str, int], list[str]] = defaultdict(list)
    by_order: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in judged:
        verdict = r["verdicts"][criterion]
        by_trial[(r["question_id"], r["trial"])].append(verdict)
        by_order[(r["question_id"], r["order"])].append(verdict)
    return list(by_trial.values()), list(by_order.values())


def summarise_judgements(
    rows: Sequence[dict[str, Any]], names: tuple[str, str], n_questions: int, trials: int
) -> dict[str, Any]:
    """Per criterion and overall: the four criteria's mean win rate, position bias and agreement pooled
    over every criterion (they describe the judge, not the answers)."""
    criteria = {c: summarise_criterion(rows, c, names) for c in ALL_CRITERIA}
    rates = [criteria[c]["win_rate_a"] for c in CRITERIA if criteria[c]["win_rate_a"] is not None]
    pooled = _pooled_judge_figures(rows)
    failed = [r for r in rows if r.get("error")]
    return {
        "a": names[0],
        "b": names[1],
        "n_questions": n_questions,
        "trials": trials,
        "expected_judgements": n_questions * trials * len(ORDERS),
        "judgements": len(rows) - len(failed),
        "failed_judgements": len(failed),
        "criteria": criteria,
        "overall": {"win_rate_a": rounded(sum(rates) / len(rates)) if rates else None, **pooled},
        "reading": {
            "win_rate_a": "mean over questions of A's mean score over its judgements (win 1, tie 0.5, "
            "loss 0); ci95: Wilson interval over questions; p_value: two-sided sign test over questions, "
            "ties left out; overall.win_rate_a averages the four criteria without directness",
            "directness": "control criterion: it favours short, literal answers",
            "first_shown_wins": "share of decided judgements won by the answer shown first (0.5 = no "
            "position bias)",
            "order_agreement": "share of (question, trial) whose two orders name the same winner",
            "trial_agreement": "share of agreeing trial pairs per (question, order)",
        },
    }


def _pooled_judge_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if not r.get("error")]
    shown = [r["shown"].get(c) for r in judged for c in ALL_CRITERIA]
    first, second = shown.count("1"), shown.count("2")
    order_groups: list = []
    trial_groups: list = []
    for criterion in ALL_CRITERIA:
        with_verdict = [r for r in judged if r["verdicts"].get(criterion) is not None]
        groups = _agreement_groups(with_verdict, criterion)
        order_groups += groups[0]
        trial_groups += groups[1]
    return {
        "first_shown_wins": rounded(first / (first + second)) if first + second else None,
        "position_p_value": sign_test(first, second),
        "order_agreement": rounded(agreement(order_groups)[0]),
        "trial_agreement": rounded(agreement(trial_groups)[0]),
    }


# ---- the command --------------------------------------------------------------------------------------
def check_role(role: str) -> None:
    if role not in JUDGE_ROLES:
        raise ConfigError(f"unknown judge role {role!r}; use --judge-role {' or '.join(JUDGE_ROLES)}")


def make_judge(settings: Settings, role: str) -> LLMClient:
    """The client of an LLM role, built from its settings."""
    check_role(role)
    return make_client(role, getattr(settings.llm, role), settings)


def check_window(
    pairs: Sequence[Pair], prompt: Prompt, settings: Settings, role: str, max_tokens: int
) -> None:
    """Refuse, before the model loads, a pair whose prompt and reply do not fit the judge's window."""
    import tiktoken

    encoding = tiktoken.get_encoding(settings.chunking.encoding)
    window = getattr(settings.llm, role).n_ctx
    for pair in pairs:
        messages = judge_messages(prompt, pair, "ab", "00000000")
        tokens = sum(len(encoding.encode(m["content"], disallowed_special=())) for m in messages)
        if tokens + max_tokens + _WINDOW_MARGIN > window:
            raise InputError(
                f"question {pair.question_id}: the two answers and the judge's reply need about "
                f"{tokens + max_tokens} tokens, more than the {window} of llm.{role}.n_ctx; raise "
                f"llm.{role}.n_ctx, lower --max-tokens, or judge shorter answers"
            )


def check_options(trials: int, temperature: float, max_tokens: int) -> None:
    """Refuse judging options that cannot work, before anything is read or loaded."""
    if trials < 1:
        raise ConfigError("--trials takes 1 or more (2 judges each pair in each order twice)")
    if temperature < 0:
        raise ConfigError("--temperature takes 0 or more")
    if max_tokens < 64:
        raise ConfigError("--max-tokens takes 64 or more: the reply holds five verdicts")


def export_qed(qed_dir: Path, question_set: str, sets: Sequence[AnswerSet], pairs: Sequence[Pair]) -> list:
    """Each set's judged answers (and contexts, when its rows carry them) in benchmark-qed's formats."""
    ids = [p.question_id for p in pairs]
    written = []
    for answer_set in sets:
        rows = [{**answer_set.answers[i], "question_id": i} for i in ids]
        written.append(qed.write_answers(qed_dir, answer_set.name, question_set, rows))
        if all(isinstance(r.get("context"), list) for r in rows):
            written.append(qed.write_contexts(qed_dir, answer_set.name, question_set, rows))
    return written


def evaluate_compare(
    settings: Settings,
    a_spec: str,
    b_spec: str,
    out_path: Path,
    console: Console,
    *,
    name_a: str | None = None,
    name_b: str | None = None,
    judge_role: str = "synthesis",
    trials: int = 2,
    temperature: float = 0.0,
    max_tokens: int = 400,
    common_only: bool = False,
    prompt_version: int = JUDGE_PROMPT_VERSION,
    qed_dir: Path | None = None,
    qed_question_set: str = "questions",
    judge: LLMClient | None = None,
) -> dict[str, Any]:
    """The `lazygraph eval compare` command: every input checked before the judge model loads."""
    check_options(trials, temperature, max_tokens)
    check_role(judge_role)
    a, b = load_answer_set(a_spec, name_a), load_answer_set(b_spec, name_b)
    if a.name == b.name:
        raise ConfigError(f"both answer sets are named {a.name!r}; name them with --name-a and --name-b")
    pairs = pair_answers(a, b, common_only)
    prompt = load_prompt("judge_pairwise", prompt_version)
    check_window(pairs, prompt, settings, judge_role, max_tokens)
    with console.status("loading the judge model"):
        client = judge or make_judge(settings, judge_role)
    setup = JudgeSetup(client, prompt, temperature, max_tokens)
    names = (a.name, b.name)
    rows = run_judgements(setup, comparison_tasks(pairs, names, trials), Path(out_path), console)
    summary = summarise_judgements(rows, names, len(pairs), trials)
    summary.update(
        {
            "a_source": a.source,
            "b_source": b.source,
            "judge": client.model_id,
            "judge_role": judge_role,
            "prompt_version": prompt.version,
            "temperature": temperature,
            "rows_file": str(out_path),
        }
    )
    if qed_dir is not None:
        summary["qed_files"] = [str(p) for p in export_qed(Path(qed_dir), qed_question_set, [a, b], pairs)]
    write_report(sibling(Path(out_path), "summary.json"), summary)
    return summary


def compare_table(summary: dict[str, Any]) -> Table:
    """The summary as a table that fits in 80 columns: one row per criterion, then the four criteria
    together. A, B, tie: questions won; 1st: share of decided judgements won by the answer shown first;
    agree: share of (question, trial) whose two orders agree."""
    title = (
        f"{summary['a']} (A) vs {summary['b']} (B): {summary['n_questions']} questions, "
        f"{summary['trials']} trial(s) x 2 orders"
    )
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    for column in ("criterion", "A", "B", "tie", "A rate", "95% CI", "p", "1st", "agree"):
        table.add_column(column, justify="left" if column == "criterion" else "right", no_wrap=True)
    for criterion, c in summary["criteria"].items():
        table.add_row(
            "directness (ctrl)" if criterion == CONTROL else criterion,
            str(c["wins_a"]),
            str(c["wins_b"]),
            str(c["ties"]),
            _fmt(c["win_rate_a"]),
            f"{c['ci95'][0]:.2f}-{c['ci95'][1]:.2f}",
            f"{c['p_value']:.3f}" + ("*" if c["significant"] else ""),
            _fmt(c["first_shown_wins"]),
            _fmt(c["order_agreement"]),
        )
    overall = summary["overall"]
    table.add_row(
        "four criteria", "", "", "", _fmt(overall["win_rate_a"]), "", "",
        _fmt(overall["first_shown_wins"]), _fmt(overall["order_agreement"]),
    )  # fmt: skip
    table.caption = "ctrl: the control criterion, which favours short, literal answers; * p < 0.05"
    return table


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
