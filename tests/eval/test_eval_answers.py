"""The answer evaluation: HotpotQA scoring, the lenient sentence score, resumable rows and the summary,
over a small Delta index with the fake LLM and the hashed embedder."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.cli.options import parse_int_list, parse_methods
from lazygraph.errors import ConfigError, InputError
from lazygraph.eval.answers import (
    answer_span,
    contexts_path,
    exact_match,
    gold_in_text,
    load_answer_questions,
    normalise_answer,
    run_answer_eval,
    score_answer,
    score_span,
    summarise_answers,
    summary_path,
    token_f1,
)
from lazygraph.query.engine import QueryEngine
from lazygraph.query.search import SEARCHES
from lazygraph.settings import load_settings

# Two sentences: the second is exactly the gold answer of every question below.
ANSWER_REPLY = json.dumps(
    {
        "sentences": [
            {"text": "The lighthouse dates from the nineteenth century.", "facts": [1]},
            {"text": "1871.", "facts": [1]},
        ]
    }
)


def _index() -> TinyIndex:
    """Six documents of one chunk each, one community per document under one root."""
    index = TinyIndex(texts=[], doc_ids=[])
    index.communities["all"] = (0, None)
    for d in range(6):
        index.communities[f"doc{d}"] = (1, "all")
        index.texts.append(f"Document {d} topic{d}: the lighthouse of topic{d} was built in 1871.")
        index.doc_ids.append(f"hp{d:04d}")
        index.memberships += [(d, 0, "all"), (d, 1, f"doc{d}")]
    return index


@pytest.fixture()
def engine(tmp_path) -> QueryEngine:
    embedder = HashEmbedder()
    uri = _index().write_delta(tmp_path / "idx", embedder)
    llm = FakeLLM(
        is_relevant=lambda q, p: any(f"topic{d}" in q and f"topic{d}" in p for d in range(6)),
        answer_reply=ANSWER_REPLY,
        span_reply='"1871."',
    )
    settings = load_settings(home=tmp_path)
    return QueryEngine.open(settings, uri, Console(quiet=True), roles=fake_roles(llm), embedder=embedder)


QUESTIONS = [
    {
        "question_id": "q1",
        "question": "When was the topic1 lighthouse built?",
        "answer": "1871",
        "type": "bridge",
    },
    {
        "question_id": "q2",
        "question": "Which is older, topic2 or topic3?",
        "answer": "1871",
        "type": "comparison",
    },
]


class Interrupting:
    """The engine, stopped by a KeyboardInterrupt (as a user's Ctrl-C) at answer number ``stop_at``."""

    def __init__(self, engine: QueryEngine, stop_at: int | None = None) -> None:
        self._engine, self._stop_at, self.answers = engine, stop_at, 0

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def answer(self, *args, **kwargs):
        self.answers += 1
        if self.answers == self._stop_at:
            raise KeyboardInterrupt
        return self._engine.answer(*args, **kwargs)


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _key(row: dict) -> tuple:
    return (row["question_id"], row["method"], row["budget"], row["context_tokens"])


# ---- scoring -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an   apple, a pear and THE plum. ", "apple pear and plum"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
        ("U.S.A.", "usa"),
        ("", ""),
    ],
)
def test_normalise_answer(text, normalised) -> None:
    assert normalise_answer(text) == normalised


def test_exact_match_and_f1() -> None:
    assert exact_match("The Beatles.", "beatles") == 1.0
    assert exact_match("Beatles band", "Beatles") == 0.0
    assert token_f1("the Beatles", "Beatles") == 1.0
    # 1 common token of 2 predicted and 1 gold: precision 0.5, recall 1
    assert token_f1("Beatles band", "Beatles") == pytest.approx(2 / 3)
    assert token_f1("Rolling Stones", "Beatles") == 0.0
    assert token_f1("", "Beatles") == 0.0


def test_yes_no_answers_score_zero_unless_equal() -> None:
    assert token_f1("yes", "no") == 0.0
    assert token_f1("yes it is", "yes") == 0.0  # a gold yes/no needs exactly yes/no: no partial credit
    assert token_f1("no", "no one") == 0.0
    assert token_f1("Yes.", "yes") == 1.0 and exact_match("Yes.", "yes") == 1.0


def test_short_score_is_the_best_sentence_and_citations_are_not_scored() -> None:
    answer = (
        "The magazine started in 1844 [Data: Sources (c0001, c0002)]. "
        "Arthur's Magazine. [Data: Sources (c0003)]"
    )
    scored = score_answer(answer, "Arthur's Magazine")
    assert scored["em"] == 0.0 and 0 < scored["f1"] < 1
    assert scored["short_em"] == 1.0 and scored["short_f1"] == 1.0
    assert scored["best_sentence"] == "Arthur's Magazine."
    # the method's own sentences are used when given, each split again where it holds two;
    # 1 of 4 tokens: precision 0.25, recall 1
    given = score_answer("ignored", "1871", ["It opened in 1871. It closed later.", "Nothing else."])
    assert given["best_sentence"] == "It opened in 1871." and given["short_f1"] == pytest.approx(0.4)
    # the whole answer, token by token: cited chunk ids would otherwise lower precision
    assert score_answer("Paris [Data: Sources (c0001)]", "Paris")["em"] == 1.0


# ---- questions and options ---------------------------------------------------------------------------
def test_questions_file_errors(tmp_path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_answer_questions(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="not a file"):
        load_answer_questions(tmp_path)
    no_answer = tmp_path / "no_answer.jsonl"
    no_answer.write_text('{"question": "Who?", "answer": "A"}\n{"question": "What?"}\n')
    with pytest.raises(InputError, match=r"no_answer.jsonl:2 needs a gold answer"):
        load_answer_questions(no_answer)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"Q{i}?", "answer": "A"}) + "\n" for i in range(5)))
    picked = load_answer_questions(rows, skip=1, limit=2)
    assert [q["question_id"] for q in picked] == ["q2", "q3"]


def test_option_errors_say_what_to_do(tmp_path, engine) -> None:
    with pytest.raises(ConfigError, match="integers separated by commas"):
        parse_int_list("20,fifty", "--budgets")
    assert parse_int_list("20, 50,20", "--budgets") == [20, 50]
    out = tmp_path / "rows.jsonl"
    quiet = Console(quiet=True)
    with pytest.raises(ConfigError, match="unknown method telepathy; use --methods lazy,vector"):
        run_answer_eval(engine, QUESTIONS, ["lazy", "telepathy"], [4], [200], out, quiet)
    with pytest.raises(ConfigError, match="--limits"):
        run_answer_eval(engine, QUESTIONS, ["vector"], [4], [0], out, quiet)
    with pytest.raises(InputError, match="needs a gold answer"):
        run_answer_eval(
            engine, [{"question_id": "x", "question": "Who?"}], ["vector"], [4], [200], out, quiet
        )
    assert not out.exists()  # refused before any answer


# ---- the run -----------------------------------------------------------------------------------------
def test_rows_and_summary(tmp_path, engine) -> None:
    out = tmp_path / "eval" / "answers.jsonl"
    summary = run_answer_eval(engine, QUESTIONS, ["lazy", "vector"], [4, 8], [200], out, Console(quiet=True))
    rows = _rows(out)
    # lazy at each budget, vector once with no budget
    assert sorted({(r["method"], r["budget"]) for r in rows}, key=str) == [
        ("lazy", 4),
        ("lazy", 8),
        ("vector", None),
    ]
    assert len(rows) == 2 * 3
    for row in rows:
        assert row["em"] == 0.0 and row["short_em"] == 1.0 and row["short_f1"] == 1.0
        assert row["f1"] == pytest.approx(2 / 7, abs=1e-4)  # "1871" among 7 normalised tokens
        assert row["best_sentence"] == "1871." and row["gold"] == "1871"
        # the span call's reply, quotes and full stop stripped; its tokens are not the method's
        assert (row["span"], row["span_em"], row["span_f1"]) == ("1871", 1.0, 1.0)
        assert row["span_tokens"] > 0
        assert row["llm_tokens"] == row["prompt_tokens"] + row["completion_tokens"] > 0
    assert all(r["relevance_tests"] <= r["budget"] for r in rows if r["method"] == "lazy")
    assert json.loads(summary_path(out).read_text()) == summary
    cells = {(c["method"], c["budget"]): c for c in summary["results"]}
    assert set(cells) == {("lazy", 4), ("lazy", 8), ("vector", None)}
    lazy = cells[("lazy", 8)]
    assert lazy["n"] == 2 and lazy["short_em"] == 1.0 and lazy["mean_llm_tokens"] > 0
    assert (lazy["span_em"], lazy["span_n"]) == (1.0, 2)
    assert set(lazy["by_type"]) == {"bridge", "comparison"} and lazy["by_type"]["bridge"]["n"] == 1
    # vector makes one call (the answer), lazy more (refine, claims, answer)
    assert cells[("vector", None)]["mean_llm_calls"] == 1 < lazy["mean_llm_calls"]


def test_every_method_by_default_and_budgets_only_where_relevance_is_tested(tmp_path, engine) -> None:
    methods = parse_methods(None)
    assert methods == list(SEARCHES)
    out = tmp_path / "answers.jsonl"
    summary = run_answer_eval(engine, QUESTIONS[:1], methods, [4, 8], [300], out, Console(quiet=True))
    expected = [(m, b) for m in SEARCHES for b in ([4, 8] if SEARCHES[m].calls_models else [None])]
    assert [(c["method"], c["budget"]) for c in summary["results"]] == expected
    assert all(c["n"] == 1 for c in summary["results"]) and len(_rows(out)) == len(expected)
    assert parse_methods(" vector, lazy,vector ") == ["vector", "lazy"]


def test_an_interrupted_run_resumes_without_duplicates(tmp_path, engine) -> None:
    out = tmp_path / "answers.jsonl"
    grid = (["lazy", "vector"], [4, 8], [200, 400])  # per question: 2 budgets x 2 limits + 2 limits = 6
    stopped = Interrupting(engine, stop_at=5)
    with pytest.raises(KeyboardInterrupt):
        run_answer_eval(stopped, QUESTIONS, *grid, out, Console(quiet=True))
    assert len(_rows(out)) == 4  # each answer was written as soon as it was scored
    with out.open("a") as handle:
        handle.write('{"question_id": "q1", "method": "vec')  # killed in the middle of a line
    log = io.StringIO()
    resumed = Interrupting(engine)
    summary = run_answer_eval(resumed, QUESTIONS, *grid, out, Console(file=log, width=200))
    assert resumed.answers == 12 - 4
    assert "damaged last line 5" in log.getvalue() and "resuming: 4 of 12" in log.getvalue()
    keys = [_key(r) for r in _rows(out)]
    assert len(keys) == len(set(keys)) == 12
    assert sum(c["n"] for c in summary["results"]) == 12
    again = Interrupting(engine)
    run_answer_eval(again, QUESTIONS, *grid, out, Console(quiet=True))
    assert again.answers == 0 and len(_rows(out)) == 12


def test_a_damaged_line_before_the_last_is_refused(tmp_path, engine) -> None:
    out = tmp_path / "answers.jsonl"
    run_answer_eval(engine, QUESTIONS[:1], ["vector"], [4], [200, 400], out, Console(quiet=True))
    first, second = out.read_text().splitlines()
    out.write_text(f"{first}\nnot json\n{second}\n")
    with pytest.raises(InputError, match=r"answers.jsonl:2 is not a result row"):
        run_answer_eval(engine, QUESTIONS[:1], ["vector"], [4], [200, 400], out, Console(quiet=True))
    # resume=False starts the file over
    run_answer_eval(engine, QUESTIONS[:1], ["vector"], [4], [200], out, Console(quiet=True), resume=False)
    assert len(_rows(out)) == 1


def test_summary_means_per_cell_and_type() -> None:
    def row(method, budget, em, f1, kind, tokens, seconds):
        return {
            "method": method, "budget": budget, "context_tokens": 1000, "type": kind,
            "em": em, "f1": f1, "short_em": 1.0, "short_f1": 1.0,
            "llm_tokens": tokens, "llm_calls": 1, "relevance_tests": 0, "seconds": seconds,
        }  # fmt: skip

    rows = [
        row("lazy", 20, 1.0, 1.0, "bridge", 300, 2.0),
        row("lazy", 20, 0.0, 0.5, "comparison", 100, 4.0),
        row("vector", None, 0.0, 0.25, "bridge", 50, 1.0),
    ]
    summary = summarise_answers(rows, ["lazy", "vector"], [20, 50], [1000])
    cells = summary["results"]
    assert [(c["method"], c["budget"]) for c in cells] == [("lazy", 20), ("lazy", 50), ("vector", None)]
    lazy20, lazy50, vector = cells
    assert (lazy20["n"], lazy20["em"], lazy20["f1"]) == (2, 0.5, 0.75)
    assert (lazy20["mean_llm_tokens"], lazy20["mean_seconds"]) == (200.0, 3.0)
    assert lazy20["by_type"]["bridge"] == {"n": 1, "em": 1.0, "f1": 1.0, "short_em": 1.0, "short_f1": 1.0}
    assert lazy50["n"] == 0 and lazy50["f1"] == 0.0  # a cell with no rows yet
    assert vector["f1"] == 0.25 and "lenient" in summary["scoring"]["short_em_f1"]


def test_cli_prints_the_summary_table(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import lazygraph.embed
    import lazygraph.query.engine as engine_module
    from lazygraph.cli import app

    uri = _index().write_delta(tmp_path / "idx", HashEmbedder())
    llm = FakeLLM(is_relevant=lambda q, p: "topic1" in p, answer_reply=ANSWER_REPLY)
    monkeypatch.setenv("LAZYGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(llm))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: HashEmbedder())
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "answers.jsonl"
    args = ["eval", "answers", "--index", uri, "--questions", str(questions), "--out", str(out)]
    args += ["--methods", "lazy,vector", "--budgets", "3", "--limits", "300", "--skip", "1"]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "short F1" in result.stdout and "span F1" in result.stdout and "tokens/ans" in result.stdout
    rows = _rows(out)
    # lazy, vector at the same limit, and vector at lazy's cost (--equal-cost is on by default)
    assert [(r["question_id"], r["method"], r["budget"]) for r in rows] == [
        ("q2", "lazy", 3),
        ("q2", "vector", None),
        ("q2", "vector", 3),
    ]
    assert rows[2]["equal_cost"] and "=lazy 3" in result.stdout
    summary = json.loads(summary_path(out).read_text())
    assert summary["n_questions"] == 1 and summary["limits"] == [300]
    bad = CliRunner().invoke(app, [*args[:8], "--limits", "0"])
    assert bad.exit_code != 0 and isinstance(bad.exception, ConfigError)


def test_equal_cost_grows_the_vector_context_to_the_lazy_tokens(tmp_path, engine) -> None:
    out = tmp_path / "answers.jsonl"
    summary = run_answer_eval(
        engine, QUESTIONS[:2], ["vector", "lazy"], [4], [200], out, Console(quiet=True), equal_cost=True
    )
    rows = {(r["question_id"], r["method"], r["budget"]): r for r in _rows(out)}
    for qid in ("q1", "q2"):
        lazy, same, matched = rows[(qid, "lazy", 4)], rows[(qid, "vector", None)], rows[(qid, "vector", 4)]
        # the lazy search spends more than one answer call, so the matched context is larger, and the
        # matched call's tokens come near lazy's where the one at the same limit stays far below
        assert matched["context_limit"] > 200 and matched["equal_cost"]
        assert matched["context_tokens_used"] > same["context_tokens_used"]
        assert abs(matched["llm_tokens"] - lazy["llm_tokens"]) < abs(same["llm_tokens"] - lazy["llm_tokens"])
    cells = {(r["method"], r["budget"], bool(r.get("equal_cost"))) for r in summary["results"]}
    assert cells == {("lazy", 4, False), ("vector", None, False), ("vector", 4, True)}
    with pytest.raises(ConfigError, match="add lazy"):
        run_answer_eval(
            engine, QUESTIONS[:1], ["vector"], [4], [200], out, Console(quiet=True), equal_cost=True
        )


def test_rows_keep_what_an_audit_needs(tmp_path, engine) -> None:
    out = tmp_path / "answers.jsonl"
    run_answer_eval(engine, QUESTIONS[:1], ["lazy"], [4], [300], out, Console(quiet=True))
    row = _rows(out)[0]
    assert row["subqueries"] and row["expanded_query"] and row["scope"] == "local"
    assert all(c["chunk_ids"] for c in row["claims"])
    contexts = {c["sha"]: c["text"] for c in map(json.loads, contexts_path(out).read_text().splitlines())}
    text = contexts[row["context_sha"]]
    assert '<fact id="1">' in text
    assert row["gold_in_context"] == (normalise_answer(QUESTIONS[0]["answer"]) in normalise_answer(text))


def test_gold_in_text_reads_whole_words_and_leaves_yes_no_out() -> None:
    assert gold_in_text("Ada Marsh", "It was built by ada marsh, in 1900.")
    assert gold_in_text("Ada", "Adam built it.") is False
    assert gold_in_text("yes", "yes it is") is None


def test_the_span_call_reads_the_question_and_the_answer_only() -> None:
    llm = FakeLLM(span_reply="Ada Marsh\nbecause the passage says so")
    span, tokens = answer_span(llm, "Who built it?", "Ada Marsh built it. [Data: Sources (c0001)]")
    assert (span, tokens > 0) == ("Ada Marsh", True)  # the first line only
    assert llm.tasks == ["answer_span"]
    assert score_span("ada marsh", "Ada Marsh") == {"span": "ada marsh", "span_em": 1.0, "span_f1": 1.0}
    assert score_span("", "Ada Marsh")["span_f1"] == 0.0


def test_no_span_leaves_the_span_scores_out(tmp_path, engine) -> None:
    out = tmp_path / "answers.jsonl"
    summary = run_answer_eval(
        engine, QUESTIONS[:1], ["vector"], [4], [200], out, Console(quiet=True), span=False
    )
    assert "span_em" not in _rows(out)[0] and "span_em" not in summary["results"][0]
