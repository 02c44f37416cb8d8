"""Calibrating the relevance threshold: the statistics, and a run over a small index with a fake LLM."""

from __future__ import annotations

import json

import pytest

from lazygraph.errors import ConfigError
from lazygraph.eval.relevance import calibrate_relevance, suggest_threshold, threshold_table
from lazygraph.eval.stats import roc_auc
from lazygraph.settings import load_settings


def test_roc_auc_orders_and_counts_ties_half() -> None:
    assert roc_auc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert roc_auc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5
    assert roc_auc([0.5, 0.4], [True, True]) is None


def test_threshold_table_and_suggestion() -> None:
    scores = [0.95, 0.42, 0.30, 0.60, 0.10, 0.05]
    labels = [True, True, True, False, False, False]
    table = {row["threshold"]: row for row in threshold_table(scores, labels)}
    assert table[0.4] == {"threshold": 0.4, "gold_kept": pytest.approx(2 / 3, abs=1e-4), "other_kept": 0.3333}
    assert table[0.3]["gold_kept"] == 1.0
    # 0.3 is the highest threshold keeping every gold passage; 0.4 the highest keeping two of three.
    assert suggest_threshold(threshold_table(scores, labels), 1.0) == 0.3
    assert suggest_threshold(threshold_table(scores, labels), 0.6) == 0.4
    assert suggest_threshold(threshold_table([0.01], [True]), 1.0) is None


def test_calibration_labels_passages_by_gold_document(tmp_path, engine, questions_file) -> None:
    out = tmp_path / "cal" / "report.json"
    report = calibrate_relevance(
        load_settings(home=tmp_path),
        "",
        questions_file,
        out,
        engine.console,
        skip=1,
        limit=1,
        top=4,
        engine=engine,
    )
    assert report["n_questions"] == 1 and report["skip"] == 1
    passages = report["passages"]
    assert len(passages) == 4 and [p["rank"] for p in passages] == [0, 1, 2, 3]
    assert all(p["question_id"] == "q2" for p in passages)
    # The fake assessor says yes exactly to passages about topic5, i.e. document hp0005 (two chunks).
    assert sum(p["gold"] for p in passages) == 2
    (newest,) = report["prompts"]  # the newest prompt version unless versions are named
    assert all((p["p_yes"][newest] > 0.5) == (p["doc_id"] == "hp0005") for p in passages)
    version = report["prompts"][newest]
    assert version["roc_auc"] == 1.0 and version["suggested_threshold"] == 0.9
    assert json.loads(out.read_text())["n_passages"] == 4


def test_calibration_rejects_bad_options(tmp_path, engine, questions_file) -> None:
    settings = load_settings(home=tmp_path)
    with pytest.raises(ConfigError, match="--top"):
        calibrate_relevance(
            settings, "", questions_file, tmp_path / "o.json", engine.console, top=0, engine=engine
        )
    with pytest.raises(ConfigError, match="version 9"):
        calibrate_relevance(
            settings,
            "",
            questions_file,
            tmp_path / "o.json",
            engine.console,
            prompt_versions=[9],
            engine=engine,
        )
    assert not (tmp_path / "o.json").exists()
