"""`lazygraph eval compare` through the real command line, with the embedded LLM as the judge.

Two questions, each answered by two "methods" (one answer informative, one evasive), judged in one trial
in both orders: four judgements through the real model with its JSON grammar, each row read back, the
summary written with every criterion. A second run finds every judgement written and judges nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lazygraph

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "lazygraph")
# The command runs the lazygraph under test, wherever the environment's install points.
SOURCE_ROOT = str(Path(lazygraph.__file__).resolve().parents[1])
QUESTIONS = {
    "lighthouse": "Who built the Harbor Lighthouse, and when?",
    "sardines": "What is Port Allen known for?",
}
INFORMATIVE = {
    "lighthouse": "The Harbor Lighthouse was built in 1871 by the civil engineer Maria Velasco "
    "[Data: Sources (c0001)].",
    "sardines": "Port Allen is a fishing town on the Serra coast, known for its sardine fishing "
    "[Data: Sources (c0002)].",
}
EVASIVE = {
    "lighthouse": "The index does not contain the answer.",
    "sardines": "Port Allen is a town.",
}


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=900, env=env)


def _answers(path: Path, answers: dict[str, str]) -> Path:
    rows = [{"question_id": q, "question": QUESTIONS[q], "answer": a} for q, a in answers.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_eval_compare_judges_with_the_embedded_model_and_resumes(tmp_path) -> None:
    a = _answers(tmp_path / "informative.jsonl", INFORMATIVE)
    b = _answers(tmp_path / "evasive.jsonl", EVASIVE)
    out = tmp_path / "compare.jsonl"
    env = {
        **os.environ,
        "OMP_WAIT_POLICY": "passive",
        "PYTHONPATH": os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])),
    }
    args = ["eval", "compare", "--a", str(a), "--b", str(b), "--out", str(out), "--trials", "1"]
    args += ["--qed-dir", str(tmp_path / "qed")]
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "comprehensiveness" in first.stdout and "directness (ctrl)" in first.stdout

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["question_id"], r["order"]) for r in rows) == [
        ("lighthouse", "ab"), ("lighthouse", "ba"), ("sardines", "ab"), ("sardines", "ba"),
    ]  # fmt: skip
    for row in rows:
        assert row["error"] is None, row["error"]
        assert row["judge"].startswith("llamacpp:") and row["prompt_tokens"] > 0
        assert set(row["verdicts"]) == {
            "comprehensiveness",
            "diversity",
            "empowerment",
            "relevance",
            "directness",
        }
        assert all(v in ("a", "b", "tie", None) for v in row["verdicts"].values())

    summary = json.loads((tmp_path / "compare.summary.json").read_text())
    assert (summary["a"], summary["b"], summary["n_questions"]) == ("informative", "evasive", 2)
    assert summary["judgements"] == 4 and summary["failed_judgements"] == 0
    for criterion in summary["criteria"].values():
        assert criterion["win_rate_a"] is None or 0 <= criterion["win_rate_a"] <= 1
        assert 0 <= criterion["ci95"][0] <= criterion["ci95"][1] <= 1 and 0 <= criterion["p_value"] <= 1
    assert summary["overall"]["order_agreement"] is None or 0 <= summary["overall"]["order_agreement"] <= 1
    qed_answers = json.loads((tmp_path / "qed" / "informative" / "questions.json").read_text())
    assert {q["question_id"] for q in qed_answers} == set(QUESTIONS)

    again = run_cli(*args, env=env)  # every judgement is written: nothing is judged again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 4 of 4" in again.stderr
    assert len(out.read_text().splitlines()) == 4
