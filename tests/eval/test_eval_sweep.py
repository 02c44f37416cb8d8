"""The sweep: a question set across methods and budgets, quality by F1, recall or the judge against a
reference, resumable rows and judgements, the table, the PNG plot and benchmark-qed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from scripted_judge import ScriptedJudge
from support import fakes
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.errors import ConfigError
from lazygraph.eval.compare import ALL_CRITERIA
from lazygraph.eval.sweep import evaluate_sweep, parse_reference, resolve_quality, sweep_table
from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings

QUIET = Console(quiet=True)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LAZY_REPLY = json.dumps({"sentences": [{"text": "1871.", "facts": [1]}]})
VECTOR_REPLY = json.dumps({"sentences": [{"text": "The lighthouse was built in 1871.", "facts": [1]}]})


class PerMethodLLM(FakeLLM):
    """The fake LLM, answering "1871." from claims (lazy) and a longer sentence from passages (vector and
    hybrid), so that methods differ in F1 and to the judge."""

    def _chat(self, messages, *, max_tokens, temperature, json_schema):
        result = super()._chat(
            messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
        )
        task = fakes._task(messages)
        if task in ("reduce", "vector_answer"):
            result.text = LAZY_REPLY if task == "reduce" else VECTOR_REPLY
        if task == "answer_span":  # the answer itself, as a span call that shortens nothing would
            result.text = messages[-1]["content"].split("<text>\n", 1)[1].split("\n</text>", 1)[0]
        return result


def _index() -> TinyIndex:
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
    llm = PerMethodLLM(is_relevant=lambda q, p: any(f"topic{d}" in q and f"topic{d}" in p for d in range(6)))
    return QueryEngine.open(
        load_settings(home=tmp_path), uri, QUIET, roles=fake_roles(llm), embedder=embedder
    )


class Counting:
    """The engine, counting answers, stopped by a KeyboardInterrupt at answer ``stop_at``."""

    def __init__(self, engine: QueryEngine, stop_at: int | None = None) -> None:
        self._engine, self._stop_at, self.answers = engine, stop_at, 0

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def answer(self, *args, **kwargs):
        self.answers += 1
        if self.answers == self._stop_at:
            raise KeyboardInterrupt
        return self._engine.answer(*args, **kwargs)


def _questions(tmp_path: Path, fields: list[str]) -> Path:
    rows = []
    for d in (1, 2):
        row = {"question_id": f"q{d}", "question": f"When was the topic{d} lighthouse built?"}
        if "answer" in fields:
            row["answer"] = "1871"
        if "supporting_doc_ids" in fields:
            row["supporting_doc_ids"] = [f"hp{d:04d}", "hp0005"]
        rows.append(row)
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sweep(engine, tmp_path, questions, **options):
    grid = {"methods": ["lazy", "vector"], "budgets": [4, 8], "limits": [300]}
    settings = load_settings(home=tmp_path)
    return evaluate_sweep(
        settings, "unused", questions, tmp_path / "sweep.jsonl", QUIET, engine=engine, **(grid | options)
    )


def _cells(summary: dict) -> dict:
    return {(r["method"], r["budget"]): r for r in summary["results"]}


# ---- quality by gold answers and gold documents ----------------------------------------------------------
def test_f1_sweep_rows_table_and_plot(tmp_path, engine) -> None:
    summary = _sweep(engine, tmp_path, _questions(tmp_path, ["answer", "supporting_doc_ids"]))
    assert summary["quality"] == "f1"  # every question has a gold answer: auto picks F1
    rows = _rows(tmp_path / "sweep.jsonl")
    assert len(rows) == 2 * 3  # questions x (lazy at 2 budgets + vector once)
    cells = _cells(summary)
    assert set(cells) == {("lazy", 4), ("lazy", 8), ("vector", None)}
    assert cells[("lazy", 8)]["quality"] == cells[("lazy", 8)]["f1"] == 1.0  # "1871." against "1871"
    assert cells[("lazy", 8)]["quality"] == cells[("lazy", 8)]["span_f1"]  # quality is the span's F1
    assert all(r["span"] and r["span_tokens"] > 0 for r in rows)
    # "lighthouse was built in 1871": 1 of 5 tokens, precision 0.2, recall 1
    assert cells[("vector", None)]["quality"] == pytest.approx(1 / 3, abs=1e-4)
    lazy_rows = [r for r in rows if r["method"] == "lazy"]
    assert cells[("lazy", 4)]["mean_llm_tokens"] == pytest.approx(
        sum(r["llm_tokens"] for r in lazy_rows if r["budget"] == 4) / 2
    )
    assert all(r["llm_tokens"] > 0 and r["context_chunk_ids"] for r in rows)
    assert cells[("vector", None)]["recall"] is not None and cells[("lazy", 4)]["win_rate"] is None
    assert json.loads((tmp_path / "sweep.summary.json").read_text()) == summary
    png = tmp_path / "sweep.png"
    assert summary["plot"] == str(png) and png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 5000
    rendered = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    rendered.print(sweep_table(summary))
    text = rendered.export_text()
    assert "tokens/answer" in text and "spans against the gold" in text and "lazy" in text


def test_recall_sweep_when_only_gold_documents_exist(tmp_path, engine) -> None:
    summary = _sweep(engine, tmp_path, _questions(tmp_path, ["supporting_doc_ids"]))
    assert summary["quality"] == "recall"
    for row in _rows(tmp_path / "sweep.jsonl"):
        gold = [f"hp000{row['question_id'][1]}", "hp0005"]
        assert row["recall"] == len(set(gold) & set(row["context_doc_ids"])) / 2 and "f1" not in row
    for cell in summary["results"]:
        assert cell["quality"] == cell["recall"] and cell["f1"] is None


def test_an_interrupted_sweep_resumes(tmp_path, engine) -> None:
    questions = _questions(tmp_path, ["answer"])
    with pytest.raises(KeyboardInterrupt):
        _sweep(Counting(engine, stop_at=4), tmp_path, questions)
    assert len(_rows(tmp_path / "sweep.jsonl")) == 3
    resumed = Counting(engine)
    summary = _sweep(resumed, tmp_path, questions)
    assert resumed.answers == 3 and len(_rows(tmp_path / "sweep.jsonl")) == 6
    assert sum(c["n"] for c in summary["results"]) == 6


# ---- quality by the judge ----------------------------------------------------------------------------------
def prefers_the_short_answer(question: str, first: str, second: str, judgement: str) -> dict[str, str]:
    """Every criterion to the answer that is exactly "1871."; a tie between equal answers."""
    if (first == "1871.") == (second == "1871."):
        return dict.fromkeys(ALL_CRITERIA, "tie")
    return dict.fromkeys(ALL_CRITERIA, "1" if first == "1871." else "2")


def test_judge_sweep_against_a_reference_method(tmp_path, engine) -> None:
    questions = _questions(tmp_path, [])  # no gold answers, no gold documents
    judge = ScriptedJudge(script=prefers_the_short_answer)
    options = {"methods": ["lazy", "vector", "hybrid"], "budgets": [4], "judge": judge, "trials": 2}
    summary = _sweep(engine, tmp_path, questions, **options)
    assert summary["quality"] == "judge" and summary["reference"] == "vector"
    cells = _cells(summary)
    assert cells[("lazy", 4)]["quality"] == 1.0  # wins every criterion against vector
    assert cells[("hybrid", None)]["quality"] == 0.5  # the same answers as vector: ties
    assert cells[("vector", None)]["quality"] == 0.5  # the reference against itself
    lazy_judge = cells[("lazy", 4)]["judge"]
    assert lazy_judge["relevance"]["wins_a"] == 2 and lazy_judge["overall"]["first_shown_wins"] == 0.5
    judgements = _rows(tmp_path / "sweep.judgements.jsonl")
    assert (
        len(judgements) == len(judge.calls) == 2 * 2 * 2 * 2
    )  # (lazy, hybrid) x questions x trials x orders
    assert {(j["name_a"], j["name_b"]) for j in judgements} == {
        ("lazy-b4-t300", "vector-t300"),
        ("hybrid-t300", "vector-t300"),
    }
    again_judge, again_engine = ScriptedJudge(script=prefers_the_short_answer), Counting(engine)
    rerun = _sweep(again_engine, tmp_path, questions, **(options | {"judge": again_judge}))
    assert again_engine.answers == 0 and again_judge.calls == [] and rerun["results"] == summary["results"]


def test_benchmark_qed_answers_and_contexts_per_method(tmp_path, engine) -> None:
    _sweep(engine, tmp_path, _questions(tmp_path, ["answer"]), methods=["vector"], qed_dir=tmp_path / "qed")
    answers = json.loads((tmp_path / "qed" / "vector-t300" / "questions.json").read_text())
    assert [a["question_id"] for a in answers] == ["q1", "q2"] and "1871" in answers[0]["answer"]
    contexts = json.loads((tmp_path / "qed" / "vector-t300" / "questions_retrieval_results.json").read_text())
    first = contexts[0]
    assert first["question_text"] == "When was the topic1 lighthouse built?"
    assert first["context"] and set(first["context"][0]) == {"chunk_id", "text"}
    assert any("topic1" in item["text"] for item in first["context"])


# ---- options -------------------------------------------------------------------------------------------
def test_quality_and_reference_options_say_what_to_do(tmp_path) -> None:
    with_answers = [{"question_id": "a", "question": "Q?", "answer": "x", "supporting_doc_ids": ["d"]}]
    bare = [{"question_id": "b", "question": "Q?"}]
    assert resolve_quality("auto", with_answers) == "f1" and resolve_quality("auto", bare) == "judge"
    assert resolve_quality("recall", with_answers) == "recall"
    with pytest.raises(
        ConfigError, match=r"--quality f1 needs a gold answer for every question; 1 have none \(e\.g\. b\)"
    ):
        resolve_quality("f1", bare)
    with pytest.raises(ConfigError, match="unknown quality"):
        resolve_quality("vibes", bare)
    assert parse_reference("vector", ["lazy", "vector"], [20, 50]) == ("vector", None)
    assert parse_reference("lazy", ["lazy", "vector"], [20, 50]) == ("lazy", 50)
    assert parse_reference("lazy:20", ["lazy", "vector"], [20, 50]) == ("lazy", 20)
    with pytest.raises(ConfigError, match="not among --methods lazy; add it"):
        parse_reference("vector", ["lazy"], [20])
    with pytest.raises(ConfigError, match="reference budget 30 is not among --budgets 20,50"):
        parse_reference("lazy:30", ["lazy"], [20, 50])
    with pytest.raises(ConfigError, match="METHOD:BUDGET"):
        parse_reference("lazy:many", ["lazy"], [20])
    settings = load_settings(home=tmp_path)
    questions = _questions(tmp_path, [])
    with pytest.raises(ConfigError, match="unknown method telepathy"):  # before any index is opened
        evaluate_sweep(settings, str(tmp_path / "nowhere"), questions, tmp_path / "o.jsonl", QUIET,
                       methods=["telepathy"], budgets=[4], limits=[300])  # fmt: skip
    with pytest.raises(ConfigError, match="reference method 'vector' is not among"):
        evaluate_sweep(settings, str(tmp_path / "nowhere"), questions, tmp_path / "o.jsonl", QUIET,
                       methods=["lazy"], budgets=[4], limits=[300])  # fmt: skip
    assert not (tmp_path / "o.jsonl").exists()


def test_cli_prints_the_table_and_draws_the_plot(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import lazygraph.embed
    import lazygraph.query.engine as engine_module
    from lazygraph.cli import app

    uri = _index().write_delta(tmp_path / "idx", HashEmbedder())
    llm = PerMethodLLM(is_relevant=lambda q, p: "topic1" in p)
    monkeypatch.setenv("LAZYGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(llm))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: HashEmbedder())
    out = tmp_path / "sweep.jsonl"
    args = ["eval", "sweep", "--index", uri, "--questions", str(_questions(tmp_path, ["answer"]))]
    args += ["--out", str(out), "--methods", "lazy,vector", "--budgets", "3,6", "--limits", "300"]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "tokens/answer" in result.stdout and "quality" in result.stdout
    assert (tmp_path / "sweep.png").read_bytes()[:8] == PNG_SIGNATURE
    bad = CliRunner().invoke(app, [*args, "--quality", "vibes"])
    assert bad.exit_code != 0 and isinstance(bad.exception, ConfigError)


# ---- breadth, and the baselines at the lazy search's cost -------------------------------------------------
def test_breadth_sweep_with_the_baselines_at_equal_cost(tmp_path, engine) -> None:
    questions = _questions(tmp_path, [])  # global questions: no gold answers, no gold documents
    summary = _sweep(engine, tmp_path, questions, quality="breadth", equal_cost=True)
    rows = _rows(tmp_path / "sweep.jsonl")
    cells = _cells(summary)
    # lazy at two budgets, vector at the same limit, and vector at each lazy budget's cost
    assert set(cells) == {("lazy", 4), ("lazy", 8), ("vector", None), ("vector", 4), ("vector", 8)}
    for (method, budget), cell in cells.items():
        cited = [len(r["cited_doc_ids"]) for r in rows if (r["method"], r["budget"]) == (method, budget)]
        assert cell["quality"] == cell["mean_cited_docs"] == pytest.approx(sum(cited) / len(cited))
        assert cell["mean_cited_communities"] is not None
    matched = [r for r in rows if r["method"] == "vector" and r["budget"] is not None]
    assert matched and all(r["equal_cost"] and r["context_limit"] >= 100 for r in matched)
    rendered = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    rendered.print(sweep_table(summary))
    text = rendered.export_text()
    assert "=lazy 4" in text and "documents cited" in text
