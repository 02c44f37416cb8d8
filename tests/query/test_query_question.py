"""Questions that cannot lead to an answer are refused before any model is loaded or called."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.errors import InputError
from lazygraph.eval.retrieval import load_questions, run_retrieval_grid
from lazygraph.query.engine import PROMPT_OVERHEAD_TOKENS, QueryEngine
from lazygraph.query.question import validate_question
from lazygraph.serve.worker import QueryWorker
from lazygraph.settings import load_settings

SMALL_WINDOW = 512  # the least n_ctx the settings allow
LIMIT = SMALL_WINDOW - PROMPT_OVERHEAD_TOKENS


def _index() -> TinyIndex:
    index = TinyIndex(texts=["The tide rises twice a day. REL", "Bread dough rises with yeast."])
    index.communities = {"all": (0, None)}
    index.memberships = [(0, 0, "all"), (1, 0, "all")]
    return index


def _engine(tmp_path: Path, llm: FakeLLM, **llm_settings: dict) -> QueryEngine:
    relevance = {"n_ctx": SMALL_WINDOW}
    settings = load_settings(home=tmp_path, llm={"relevance": relevance, **llm_settings})
    embedder = HashEmbedder()
    return QueryEngine(settings, _index().snapshot(embedder), roles=fake_roles(llm), embedder=embedder)


def _words(engine: QueryEngine, tokens: int) -> str:
    text = " tide" * tokens
    assert engine.count_tokens(text) == tokens
    return text


@pytest.mark.parametrize("question", ["", "   ", "\n\t "])
def test_an_empty_question_is_refused_without_any_llm_call(tmp_path: Path, question: str, fake_llm) -> None:
    engine = _engine(tmp_path, fake_llm)
    for method in ("lazy", "vector"):
        with pytest.raises(InputError, match="the question is empty"):
            engine.answer(question, method=method, budget=10)
    assert fake_llm.tasks == [] and fake_llm.relevance_batches == []


def test_a_question_longer_than_the_window_is_refused_with_the_limit(tmp_path: Path, fake_llm) -> None:
    engine = _engine(tmp_path, fake_llm)
    with pytest.raises(InputError, match=rf"{LIMIT + 1} tokens long; at most {LIMIT} fit .*llm\.relevance"):
        engine.answer(_words(engine, LIMIT + 1), budget=10)
    assert fake_llm.tasks == [] and fake_llm.relevance_batches == []
    engine.answer(_words(engine, LIMIT), budget=2)  # exactly at the limit: answered
    assert fake_llm.tasks


def test_the_window_is_that_of_the_models_the_plan_uses(tmp_path: Path, fake_llm) -> None:
    engine = _engine(tmp_path, fake_llm, synthesis={"n_ctx": 8192})
    question = _words(engine, 1000)
    # Z500 refines with the synthesis model but tests relevance with the small one: refused.
    with pytest.raises(InputError, match="llm.relevance"):
        engine.answer(question, preset="Z500")
    assert fake_llm.tasks == []
    # The vector baseline only sends the question to the synthesis model: answered.
    result = engine.answer(question, preset="SS_8K")
    assert result.method == "vector" and fake_llm.tasks == ["vector_answer"]
    vector_plan = engine.plan(preset="SS_8K")
    with pytest.raises(InputError, match="llm.synthesis"):
        validate_question(_words(engine, 8192), engine.settings, vector_plan, engine.count_tokens)


def test_cli_refuses_an_empty_question_before_opening_the_index(tmp_path: Path) -> None:
    env = {**os.environ, "LAZYGRAPH_HOME": str(tmp_path / "home"), "COLUMNS": "60"}
    for question in ("", "   "):
        done = subprocess.run(
            [sys.executable, "-m", "lazygraph", "query", "--index", str(tmp_path / "no-index"), question],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "the question is empty" in lines[0], done.stderr
        assert done.stdout == ""
    assert not (tmp_path / "home").exists()  # no model, jar or cache was touched


def test_batch_turns_an_over_long_question_into_that_query_s_error_row(tmp_path: Path, fake_llm) -> None:
    engine = _engine(tmp_path, fake_llm)
    worker = QueryWorker(engine.settings, "memory://tiny", lambda settings, index, roles: engine)
    row = worker.answer("q1", _words(engine, LIMIT + 1), "lazy", None, 4)
    assert row["status"] == "error" and row["error"].startswith("InputError: the question is")
    ok = worker.answer("q2", "Why does the tide rise?", "lazy", None, 4)
    assert ok["status"] == "ok"


def test_eval_refuses_empty_and_over_long_questions_before_any_llm_call(tmp_path: Path, fake_llm) -> None:
    path = tmp_path / "questions.jsonl"
    rows = [
        {"question_id": "a", "question": "Why does the tide rise?", "supporting_doc_ids": ["d0000"]},
        {"question_id": "b", "question": "  ", "supporting_doc_ids": ["d0001"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(InputError, match=r"questions.jsonl:2 has an empty question"):
        load_questions(path)
    engine = _engine(tmp_path, fake_llm)
    questions = [rows[0], {**rows[0], "question_id": "long", "question": _words(engine, LIMIT + 1)}]
    with pytest.raises(InputError, match="question long: the question is"):
        run_retrieval_grid(engine, questions, [4], [500], Console(quiet=True))
    assert fake_llm.tasks == [] and fake_llm.relevance_batches == []
