"""Answer evaluation: how close each method's answers come to the gold answers of a question set.

Retrieval recall (``eval/retrieval.py``) says whether the right documents reached the context; this
says whether the answer the user reads is right. Scores follow the official HotpotQA evaluation:
exact match (EM) and token F1 over normalised text (lower case, no punctuation, no articles a/an/the,
single spaces; a yes/no/noanswer that differs from the gold scores F1 0).

The answer is scored as the method returns it, without its inline ``[Data: Sources (...)]`` markers
(citations, not answer text). The embedded model answers in sentences while HotpotQA's gold answers
are short spans, so a sentence that holds the right name still scores an F1 near 0.1. Two further
scores make the methods' answers comparable to the gold spans:

- *lenient* ``short``: the best EM and the best F1 over the answer's single sentences;
- ``span``: the answer reduced to the span that answers the question by one more LLM call (prompt
  ``answer_span``), which reads only the question and the method's answer, never its context, so it
  can shorten a right answer but not find one the answer lacks. The same model and prompt serve every
  method; its tokens are reported apart (``span_tokens``) and are not the method's cost.

None is the official metric over whole answers, which the summary reports too, so the gaps stay visible.

One JSON line per (question, method, budget, context limit) is appended as soon as it is scored, so a
run that is stopped resumes where it was; the summary is written next to that file.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from lazygraph.errors import ConfigError, InputError
from lazygraph.eval.retrieval import check_questions, progress_bar, recall, write_report
from lazygraph.eval.rows import append_rows, read_row_file
from lazygraph.jsonlines import iter_json_objects
from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.cost import llm_tokens
from lazygraph.query.engine import QueryEngine
from lazygraph.query.search import SEARCHES
from lazygraph.query.source import with_index_source
from lazygraph.settings import Settings

# HotpotQA's answers for yes/no questions (and its "no answer"): a partial token overlap with one of
# them means nothing, so a differing one scores F1 0.
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TAG = re.compile(r"</?\w+[^>]*>")  # the tags a rendered context quotes its passages in
_CITATION = re.compile(r"\s*\[Data: Sources \([^)]*\)\]")
# A sentence ends at ., ! or ? followed by white space; crude ("U.S. Army" splits), which only makes
# the lenient score more lenient.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# The prompt that reduces an answer to its span (``answer_span.v<N>.md``), pinned like the query's. v3 asks
# for the short answer the text gives: v2 replied "unknown" or "yes" to a third of the answers that named
# the gold answer (calibration questions, every method alike).
SPAN_PROMPT_VERSION = 3
SPAN_MAX_TOKENS = 24

# The fields a row is identified by: a rerun skips a combination whose row is already written.
RowKey = tuple[str, str, int | None, int]
ROW_FIELDS = ("question_id", "method", "budget", "context_tokens")


# ---- scoring -----------------------------------------------------------------------------------------
def normalise_answer(text: str) -> str:
    """Lower case, drop punctuation, drop the articles a/an/the, collapse white space (HotpotQA's rule)."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalise_answer(prediction) == normalise_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall over the normalised texts."""
    predicted, wanted = normalise_answer(prediction), normalise_answer(gold)
    if (predicted in _CLOSED_ANSWERS or wanted in _CLOSED_ANSWERS) and predicted != wanted:
        return 0.0
    predicted_tokens, gold_tokens = predicted.split(), wanted.split()
    common = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_sentences(sentences: Iterable[str]) -> list[str]:
    """The single sentences of an answer: its own sentences, each split again where it holds several."""
    return [part for text in sentences for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def score_answer(answer: str, gold: str, sentences: Sequence[str] | None = None) -> dict[str, Any]:
    """EM and F1 of the whole answer, and the lenient short EM/F1: the best over its sentences.

    ``sentences`` are the answer's own sentences when the method returns them; otherwise ``answer``
    is split at sentence ends.
    """
    text = _CITATION.sub("", answer).strip()
    parts = answer_sentences(sentences if sentences else [text]) or [text]
    f1s = [token_f1(part, gold) for part in parts]
    best = max(range(len(parts)), key=f1s.__getitem__)
    return {
        "em": exact_match(text, gold),
        "f1": round(token_f1(text, gold), 4),
        "short_em": max(exact_match(part, gold) for part in parts),
        "short_f1": round(f1s[best], 4),
        "best_sentence": parts[best],
    }


def answer_span(client: LLMClient, question: str, answer: str) -> tuple[str, int]:
    """The span of ``answer`` that answers ``question`` (one LLM call), and the call's tokens."""
    prompt = load_prompt("answer_span", SPAN_PROMPT_VERSION)
    text = _CITATION.sub("", answer).strip()
    result = client.chat(prompt.messages(question=question, answer=text), max_tokens=SPAN_MAX_TOKENS)
    span = result.text.strip().splitlines()[0].strip() if result.text.strip() else ""
    return span.strip(" \"'`").removesuffix("."), result.prompt_tokens + result.completion_tokens


def score_span(span: str, gold: str) -> dict[str, Any]:
    return {"span": span, "span_em": exact_match(span, gold), "span_f1": round(token_f1(span, gold), 4)}


# ---- questions and the grid --------------------------------------------------------------------------
def load_answer_questions(path: Path, skip: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Questions with a gold ``answer``, after the first ``skip``, at most ``limit`` of them."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"questions file {path} does not exist or is not a file; pass a JSON Lines file to --questions"
        )
    questions: list[dict[str, Any]] = []
    try:
        for number, row in iter_json_objects(path):
            _check_question(row, f"{path}:{number}")
            row.setdefault("question_id", f"q{number}")
            questions.append(row)
            if limit is not None and len(questions) >= skip + limit:
                break
    except OSError as exc:
        raise InputError(
            f"cannot read questions file {path} ({exc.strerror}); check its permissions"
        ) from exc
    return questions[skip:]


def _check_question(row: dict[str, Any], where: str) -> None:
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        raise InputError(f"{where} needs a non-empty question; write it or remove the line")
    if not isinstance(row.get("answer"), str) or not row["answer"].strip():
        raise InputError(f"{where} needs a gold answer (the field answer); add it or remove the line")


def check_grid(methods: Sequence[str], budgets: Sequence[int], limits: Sequence[int]) -> None:
    """Refuse a grid the engine could not run, before any model is loaded."""
    unknown = [m for m in methods if m not in SEARCHES]
    if unknown or not methods:
        raise ConfigError(
            f"unknown method {', '.join(unknown) or '(none)'}; use --methods {','.join(SEARCHES)}"
        )
    if not budgets or any(b < 0 for b in budgets):
        raise ConfigError("--budgets takes relevance-test budgets of 0 or more, e.g. --budgets 20,50")
    if not limits or any(t < 1 for t in limits):
        raise ConfigError("--limits takes context-token limits of 1 or more, e.g. --limits 1000,2000")


def method_budgets(method: str, budgets: Sequence[int]) -> list[int | None]:
    """The budgets a method runs at: each one where it tests relevance, else once, with no budget."""
    return list(budgets) if SEARCHES[method].calls_models else [None]


def grid_keys(
    questions: Sequence[dict[str, Any]],
    methods: Sequence[str],
    budgets: Sequence[int],
    limits: Sequence[int],
    equal_cost: bool = False,
) -> list[tuple[dict[str, Any], RowKey]]:
    """Every combination to answer, question by question (a stopped run leaves whole questions done).

    With ``equal_cost``, each question's lazy cells come first, then every method without relevance
    tests once more per lazy cell, keyed by that cell's budget and limit (its context is matched to
    the lazy row's tokens when it is answered)."""
    methods = ["lazy", *[m for m in methods if m != "lazy"]] if equal_cost else list(methods)
    keys = []
    for question in questions:
        qid = str(question["question_id"])
        keys += [
            (question, (qid, method, budget, limit))
            for method in methods
            for budget in method_budgets(method, budgets)
            for limit in limits
        ]
        if equal_cost:
            keys += [
                (question, (qid, method, budget, limit))
                for method in methods
                if not SEARCHES[method].calls_models
                for budget in budgets
                for limit in limits
            ]
    return keys


def identified(questions: Sequence[dict[str, Any]], gold: bool = True) -> list[dict[str, Any]]:
    """The questions, each checked (with its gold answer, where ``gold``) and with an id (its position
    when it has none), ids unique."""
    identified = [{"question_id": f"q{i}", **q} for i, q in enumerate(questions, start=1)]
    for question in identified:
        if gold:
            _check_question(question, f"question {question['question_id']}")
    ids = Counter(str(q["question_id"]) for q in identified)
    repeated = sorted(i for i, n in ids.items() if n > 1)
    if repeated:
        raise InputError(
            f"question ids {', '.join(repeated)} appear more than once; give each question its own id"
        )
    return identified


# ---- the per-question file ---------------------------------------------------------------------------
def row_key(row: dict[str, Any]) -> RowKey:
    return (str(row["question_id"]), row["method"], row["budget"], row["context_tokens"])


def read_rows(path: Path, console: Console) -> list[dict[str, Any]]:
    """The rows already written; a damaged last line (the run was killed mid-write) is cut off.

    A damaged line before the last is not a kill's trace, so the file is refused rather than guessed at.
    """
    return read_row_file(path, ROW_FIELDS, console, what="a result row")


def append_row(path: Path, row: dict[str, Any]) -> None:
    append_rows(path, [row])


def summary_path(out_path: Path) -> Path:
    """``answers.jsonl`` -> ``answers.summary.json``, in the same folder."""
    return out_path.with_name(f"{out_path.stem}.summary.json")


# ---- answering -----------------------------------------------------------------------------------------
# Tokens an answer is expected to generate, kept out of an equal-cost context (the comparison matches
# the whole call, prompt and answer, to the lazy search's tokens).
EXPECTED_ANSWER_TOKENS = 60


def answer_row(
    engine: QueryEngine,
    question: dict[str, Any],
    key: RowKey,
    span: bool = True,
    context_limit: int | None = None,
) -> dict[str, Any]:
    """Answer one question with one method, budget and context limit, and score the answer (and, with
    ``span``, its span: one more call to the synthesis model, outside the method's cost record).

    ``context_limit`` replaces the key's limit for the search (an equal-cost row, whose key names the
    lazy cell it is matched to). The row keeps what a person needs to audit the answer: the expanded
    query, subqueries, claims, the rendered context's hash (the text is in the contexts file beside
    the rows) and whether the gold answer appears in it."""
    question_id, method, budget, limit = key
    searched_budget = budget if SEARCHES[method].calls_models else None
    result = engine.answer(
        question["question"], method=method, budget=searched_budget, context_tokens=context_limit or limit
    )
    cost = result.cost
    gold = question.get("answer") if isinstance(question.get("answer"), str) else None
    scored: dict[str, Any] = {}
    if gold and gold.strip():
        sentences = [s["text"] for s in result.sentences]
        scored = {
            "gold": gold,
            **score_answer(result.answer, gold, sentences),
            "gold_in_context": gold_in_text(gold, result.context_text),
            "gold_in_answer": gold_in_text(gold, _CITATION.sub("", result.answer)),
        }
        if span:
            client = engine.roles(engine.plan(method, budget=searched_budget).synthesis_role).synthesis
            text, tokens = answer_span(client, question["question"], result.answer)
            scored.update({**score_span(text, gold), "span_tokens": tokens})
    supporting = question.get("supporting_doc_ids") or []
    return {
        "question_id": question_id,
        "type": question.get("type", ""),
        "level": question.get("level", ""),
        "method": method,
        "budget": budget,
        "context_tokens": limit,
        # an equal-cost row: the context limit its search was given to match the lazy cell's tokens
        **({"equal_cost": True, "context_limit": context_limit} if context_limit is not None else {}),
        "question": question["question"],
        "answer": result.answer,
        **scored,
        # The method's cost: tokens of fresh calls and of calls answered from the LLM cache.
        "llm_tokens": llm_tokens(cost),
        "llm_cache_hits": cost["llm_cache_hits"],
        "prompt_tokens": cost["prompt_tokens"],
        "completion_tokens": cost["completion_tokens"],
        "llm_calls": cost["llm_calls"],
        "relevance_tests": cost["relevance_tests"],
        "seconds": cost["seconds"],
        "context_chunk_ids": result.context_chunk_ids,
        "context_doc_ids": result.context_doc_ids,
        "supporting_doc_ids": supporting,
        **({"recall": recall(result.context_doc_ids, supporting)} if supporting else {}),
        **breadth(engine, result),
        "scope": result.scope,
        "expanded_query": result.expanded_query,
        "subqueries": [s["text"] for s in result.subqueries],
        "claims": [
            {"text": c["text"], "chunk_ids": c["source_chunk_ids"], "kind": c["kind"]}
            for c in result.claims
            if c["kind"] == "claim" and not c["extracted"]
        ],
        "context_sha": context_hash(result.context_text),
        "context_tokens_used": engine.count_tokens(result.context_text),
        "_context_text": result.context_text,  # written to the contexts file, not to the row
    }


def breadth(engine: QueryEngine, result: Any) -> dict[str, Any]:
    """How widely an answer draws on the corpus: the documents and the level-1 communities (themes) its
    sentences cite, and the themes a report is organised by. A reader can judge a global answer's
    breadth from these counts without an LLM judge."""
    from lazygraph.query.evidence import theme_of

    index = engine.snapshot.chunk_index()
    chunks = [index[s["chunk_id"]] for s in result.sources if s["chunk_id"] in index]
    communities = {theme_of(engine.snapshot, c) for c in chunks} - {-1}
    return {
        "cited_doc_ids": list(dict.fromkeys(s["doc_id"] for s in result.sources)),
        "cited_communities": len(communities),
        "themes": result.themes,
        "sentences": len(result.sentences),
    }


def context_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def gold_in_text(gold: str, text: str) -> bool | None:
    """Whether the normalised gold answer appears in the normalised text (None for yes/no answers,
    which any text "contains")."""
    wanted = normalise_answer(gold)
    if not wanted or wanted in _CLOSED_ANSWERS:
        return None
    return f" {wanted} " in f" {normalise_answer(_TAG.sub(' ', text))} "


def contexts_path(out_path: Path) -> Path:
    """``answers.jsonl`` -> ``answers.contexts.jsonl``: every rendered context once, by its hash."""
    return out_path.with_name(f"{out_path.stem}.contexts.jsonl")


class ContextFile:
    """The rendered contexts of a rows file, each written once (rows name them by ``context_sha``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: set[str] = set()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    self.seen.add(json.loads(line)["sha"])
                except (ValueError, KeyError, TypeError):
                    continue  # a damaged line: its context is written again when met

    def add(self, sha: str, text: str) -> None:
        if sha in self.seen:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"sha": sha, "text": text}) + "\n")
        self.seen.add(sha)


def equal_cost_limit(engine: QueryEngine, question: str, lazy_row: dict[str, Any]) -> int:
    """The context limit that gives a passage search's answer call the LLM tokens the lazy row spent
    (its prompt's fixed text and an expected answer deducted), at least 100."""
    from lazygraph.llm.prompts import load_prompt as _load

    prompt = _load("vector_answer", engine.settings.query.prompts.vector_answer)
    fixed = sum(
        engine.count_tokens(m["content"])
        for m in prompt.messages(passages="", question=question, max_facts="3")
    )
    return max(100, int(lazy_row["llm_tokens"]) - fixed - EXPECTED_ANSWER_TOKENS)


def run_answer_eval(
    engine: QueryEngine,
    questions: Sequence[dict[str, Any]],
    methods: Sequence[str],
    budgets: Sequence[int],
    limits: Sequence[int],
    out_path: Path,
    console: Console,
    resume: bool = True,
    span: bool = True,
    equal_cost: bool = False,
) -> dict[str, Any]:
    """Answer and score every (question, method, budget, limit) not yet in ``out_path``; summarise all.

    With ``equal_cost``, every method that tests no relevance (vector, hybrid) also answers at the cost
    of each lazy cell: its context grown until its answer call spends the LLM tokens the lazy search
    spent on that question (the row's ``budget`` names the lazy budget it is matched to)."""
    check_grid(methods, budgets, limits)
    if equal_cost and "lazy" not in methods:
        raise ConfigError("--equal-cost matches the lazy search's cost: add lazy to --methods")
    questions = identified(questions)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    grid = (methods, budgets, limits)
    rows = answer_grid(engine, questions, grid, out_path, console, equal_cost, span, resume)
    summary = summarise_answers(list(rows.values()), methods, budgets, limits, equal_cost)
    summary.update({"n_questions": len(questions), "rows_file": str(out_path)})
    write_report(summary_path(out_path), summary)
    return summary


def answer_grid(
    engine: QueryEngine,
    questions: Sequence[dict[str, Any]],
    grid: tuple[Sequence[str], Sequence[int], Sequence[int]],
    out_path: Path,
    console: Console,
    equal_cost: bool = False,
    span: bool = True,
    resume: bool = True,
) -> dict[RowKey, dict[str, Any]]:
    """Every (question, method, budget, limit) of the grid, in grid order: the rows already in
    ``out_path`` read back, the rest answered and appended one by one, so a stopped run resumes where it
    was (``resume=False`` starts the file over). The one runner of `eval answers` and `eval sweep`."""
    methods, budgets, limits = grid
    for method in methods:  # every question must fit every method's prompts before a model is called
        check_questions(engine, list(questions), engine.plan(method, budget=max(budgets)))
    if not resume:
        out_path.unlink(missing_ok=True)
        contexts_path(out_path).unlink(missing_ok=True)
    rows = {row_key(r): r for r in read_rows(out_path, console)}
    keys = grid_keys(questions, methods, budgets, limits, equal_cost)
    todo = [(question, key) for question, key in keys if key not in rows]
    if len(todo) < len(keys):
        console.print(
            f"resuming: {len(keys) - len(todo)} of {len(keys)} answers already in {escape(str(out_path))}"
        )
    answer_all(engine, todo, len(keys), out_path, rows, console, span)
    return {key: rows[key] for _, key in keys}


def answer_all(
    engine: QueryEngine,
    todo: Sequence[tuple[dict[str, Any], RowKey]],
    total: int,
    out_path: Path,
    rows: dict[RowKey, dict[str, Any]],
    console: Console,
    span: bool = True,
) -> None:
    """Answer what is left, writing each row as soon as it is scored; the bar shows s per answer."""
    start = time.perf_counter()
    contexts = ContextFile(contexts_path(out_path))
    with progress_bar(console) as progress:
        task = progress.add_task("answers", total=total, completed=total - len(todo))
        for done, (question, key) in enumerate(todo, start=1):
            question_id, method, budget, limit = key
            matched = None
            if budget is not None and not SEARCHES[method].calls_models:  # an equal-cost row
                matched = equal_cost_limit(
                    engine, question["question"], rows[(question_id, "lazy", budget, limit)]
                )
            row = answer_row(engine, question, key, span, matched)
            contexts.add(row["context_sha"], row.pop("_context_text"))
            append_row(out_path, row)
            rows[key] = row
            per_answer = (time.perf_counter() - start) / done
            progress.update(task, advance=1, description=f"answers ({per_answer:.1f} s/answer)")


# ---- the summary ----------------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scores = {
        "n": len(rows),
        "em": _mean([r["em"] for r in rows]),
        "f1": _mean([r["f1"] for r in rows]),
        "short_em": _mean([r["short_em"] for r in rows]),
        "short_f1": _mean([r["short_f1"] for r in rows]),
    }
    spanned = [r for r in rows if "span_em" in r]  # none with --no-span
    if spanned:
        scores["span_em"] = _mean([r["span_em"] for r in spanned])
        scores["span_f1"] = _mean([r["span_f1"] for r in spanned])
        scores["span_n"] = len(spanned)
    return scores


def _given_context(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    held = [r for r in rows if r.get("gold_in_context")]
    stated = sum(1 for r in held if r.get("gold_in_answer"))
    return {"contexts": len(held), "answers": stated, "share": round(stated / len(held), 4) if held else None}


def summarise_cell(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Scores, cost per answer and scores per question type of one (method, budget, limit)."""
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_type[row.get("type") or "(none)"].append(row)
    return {
        **_scores(rows),
        "mean_llm_tokens": _mean([r["llm_tokens"] for r in rows]),
        "mean_llm_calls": _mean([r["llm_calls"] for r in rows]),
        "mean_relevance_tests": _mean([r["relevance_tests"] for r in rows]),
        "mean_seconds": _mean([r["seconds"] for r in rows]),
        "mean_context_tokens_used": _mean([r.get("context_tokens_used", 0) for r in rows]),
        # of the answers whose context holds the gold answer string, the share that state it
        "gold_in_answer_given_context": _given_context(rows),
        "by_type": {kind: _scores(typed) for kind, typed in sorted(by_type.items())},
    }


def summarise_answers(
    rows: Sequence[dict[str, Any]],
    methods: Sequence[str],
    budgets: Sequence[int],
    limits: Sequence[int],
    equal_cost: bool = False,
) -> dict[str, Any]:
    """One result per (method, budget, limit) in grid order; ``budget`` is None where it does not apply,
    and names the matched lazy budget in a method's equal-cost cells."""
    cells: dict[tuple[str, int | None, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        cells[(row["method"], row["budget"], row["context_tokens"])].append(row)
    results = [
        {
            "method": method,
            "budget": budget,
            "context_tokens": limit,
            **summarise_cell(cells[(method, budget, limit)]),
        }
        for method in methods
        for budget in method_budgets(method, budgets)
        for limit in limits
    ]
    if equal_cost:
        results += [
            {
                "method": method,
                "budget": budget,
                "context_tokens": limit,
                "equal_cost": True,
                **summarise_cell(cells[(method, budget, limit)]),
            }
            for method in methods
            if not SEARCHES[method].calls_models
            for budget in budgets
            for limit in limits
        ]
    return {
        "methods": list(methods),
        "budgets": list(budgets),
        "limits": list(limits),
        "scoring": {
            "em_f1": "HotpotQA exact match and token F1 of the whole answer (citation markers removed)",
            "short_em_f1": "lenient, not the official metric: the best EM and F1 over the answer's sentences",
            "span_em_f1": "EM and F1 of the span one LLM call reduces the answer to, reading the question "
            "and the answer only",
        },
        "results": results,
    }


def evaluate_answers(
    settings: Settings,
    index: str,
    questions_file: Path,
    out_path: Path,
    console: Console,
    *,
    methods: Sequence[str],
    budgets: Sequence[int],
    limits: Sequence[int],
    skip: int = 0,
    limit: int | None = None,
    engine: QueryEngine | None = None,
    span: bool = True,
    equal_cost: bool = False,
) -> dict[str, Any]:
    """The `lazygraph eval answers` command: check everything cheap first, then open the index and run."""
    if skip < 0 or (limit is not None and limit < 1):
        raise ConfigError("--skip takes 0 or more and --limit 1 or more questions")
    check_grid(methods, budgets, limits)
    questions = load_answer_questions(Path(questions_file), skip, limit)
    # Evaluation reads per-chunk data (ranks, breadth, the focus) that only the snapshot holds.
    engine = engine or QueryEngine.open(with_index_source(settings, "snapshot"), index, console=console)
    return run_answer_eval(
        engine, questions, methods, budgets, limits, Path(out_path), console, span=span, equal_cost=equal_cost
    )
