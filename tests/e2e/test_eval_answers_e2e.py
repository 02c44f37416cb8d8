"""`lazygraph eval answers` through the real command line, with the real embedded LLM and embedder.

A five-document index written as Delta tables (real embeddings), one question with its gold answer,
lazy search at budget 2 and the vector baseline at a 400-token context: two answers, each scored and
written as a row, then the summary. A second run finds every row written and answers nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import TinyIndex

import lazygraph

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "lazygraph")
# The command runs the lazygraph under test, wherever the environment's install points.
SOURCE_ROOT = str(Path(lazygraph.__file__).resolve().parents[1])
DOCS = [
    (
        "Harbor Lighthouse",
        "The Harbor Lighthouse was built in 1871 by the engineer Maria Velasco. "
        "It stands on the northern cliff of Port Allen.",
    ),
    ("Port Allen", "Port Allen is a fishing town on the Serra coast, known for sardine fishing."),
    ("Sourdough", "Sourdough bread is leavened by wild yeast kept in a starter fed with flour and water."),
    ("Alpine glaciers", "Alpine glaciers retreat when summer melting exceeds winter snowfall."),
    ("Maria Velasco", "Maria Velasco was a Spanish civil engineer known for coastal lighthouses."),
]
QUESTION = {
    "question_id": "lighthouse",
    "question": "Who built the Harbor Lighthouse?",
    "answer": "Maria Velasco",
    "type": "bridge",
    "supporting_doc_ids": ["doc0"],
}


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory) -> str:
    from lazygraph.embed import get_embedder
    from lazygraph.settings import load_settings

    index = TinyIndex(
        texts=[t for _, t in DOCS], titles=[t for t, _ in DOCS], doc_ids=[f"doc{i}" for i in range(5)]
    )
    index.communities = {"coast": (0, None), "other": (0, None)}
    index.memberships = [(0, 0, "coast"), (1, 0, "coast"), (4, 0, "coast"), (2, 0, "other"), (3, 0, "other")]
    return index.write_delta(tmp_path_factory.mktemp("index"), get_embedder(load_settings().embedding))


def test_eval_answers_scores_both_methods_and_resumes(tiny_index, tmp_path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps(QUESTION) + "\n")
    out = tmp_path / "answers.jsonl"
    env = {
        **os.environ,
        "OMP_WAIT_POLICY": "passive",
        "PYTHONPATH": os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])),
        # few and short model calls: the command is under test, not the answers' quality
        "LAZYGRAPH_QUERY__CACHE_DIR": str(tmp_path / "cache"),
        "LAZYGRAPH_QUERY__MIN_SUBQUERIES": "1",
        "LAZYGRAPH_QUERY__MAX_SUBQUERIES": "2",
        "LAZYGRAPH_QUERY__REFINE_MAX_TOKENS": "96",
        "LAZYGRAPH_QUERY__MAP_MAX_TOKENS": "160",
        "LAZYGRAPH_QUERY__ANSWER_MAX_TOKENS": "96",
    }
    args = ["eval", "answers", "--index", tiny_index, "--questions", str(questions), "--out", str(out)]
    args += ["--methods", "vector,lazy", "--budgets", "2", "--limits", "400"]
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "short F1" in first.stdout and "s/answer" in first.stdout

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # Equal cost is on by default: lazy answers first, then vector at its own limit and at lazy's cost.
    assert [(r["method"], r["budget"], r["context_tokens"]) for r in rows] == [
        ("lazy", 2, 400),
        ("vector", None, 400),
        ("vector", 2, 400),
    ]
    for row in rows:
        assert row["answer"] and row["gold"] == "Maria Velasco"
        assert 0 <= row["em"] <= row["short_em"] <= 1 and 0 <= row["f1"] <= 1 and 0 <= row["short_f1"] <= 1
        assert row["llm_tokens"] > 0 and row["seconds"] > 0
        assert "doc0" in row["context_doc_ids"]
    lazy, vector, matched = rows
    # The matched vector row may be a cache hit: its wider limit holds the same five passages.
    assert lazy["llm_calls"] >= 1 and vector["llm_calls"] >= 1
    assert lazy["relevance_tests"] <= 2
    assert not vector.get("equal_cost") and matched["equal_cost"] is True
    # The matched row's context is sized from lazy's tokens, not from the 400-token limit.
    assert matched["context_limit"] != 400 and 100 <= matched["context_limit"] < lazy["llm_tokens"]

    summary = json.loads((tmp_path / "answers.summary.json").read_text())
    assert summary["n_questions"] == 1 and summary["limits"] == [400]
    assert [(c["method"], c["budget"], c["n"]) for c in summary["results"]] == [
        ("vector", None, 1),
        ("lazy", 2, 1),
        ("vector", 2, 1),
    ]
    for cell in summary["results"]:
        for field in ("em", "f1", "short_em", "short_f1", "mean_llm_tokens", "mean_seconds", "by_type"):
            assert field in cell
        assert cell["by_type"]["bridge"]["n"] == 1

    again = run_cli(*args, env=env)  # every row is written: nothing is answered again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 3 of 3" in again.stderr
    assert len(out.read_text().splitlines()) == 3


def test_eval_questions_writes_checked_questions_with_the_real_model(tiny_index, tmp_path) -> None:
    env = {
        **os.environ,
        "OMP_WAIT_POLICY": "passive",
        "PYTHONPATH": os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])),
    }
    out = tmp_path / "questions.jsonl"
    args = ["eval", "questions", "--index", tiny_index, "--local", "2", "--global", "1"]
    args += ["--oversample", "1", "--passages", "3", "--out", str(out)]
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr[-3000:]

    candidates = [
        json.loads(line) for line in (tmp_path / "questions.candidates.jsonl").read_text().splitlines()
    ]
    assert sorted(c["type"] for c in candidates) == ["global", "local", "local"]
    for candidate in candidates:  # the JSON schema holds the model to a readable reply
        assert candidate["error"] is None and candidate["question"]
    [theme] = [c for c in candidates if c["type"] == "global"]
    assert theme["prompt_version"] == 2 and isinstance(theme["grounded_words"], int)
    assert set(theme["source_doc_ids"]) <= {"doc0", "doc1", "doc4"}, "the coast community's documents"

    summary = json.loads((tmp_path / "questions.summary.json").read_text())
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["written"]["local"] + summary["written"]["global"] == len(written)
    assert sum(summary["rejected"].values()) == 3 - len(written)
    for question in written:
        assert question["question"].endswith("?")
        if question["type"] == "local":  # kept only with an answer read off its own passage
            assert question["answer"] and question["supporting_doc_ids"] == question["source_doc_ids"]

    again = run_cli(*args, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 3 of 3" in again.stderr
