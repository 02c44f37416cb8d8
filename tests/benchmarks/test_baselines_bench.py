"""`lazygraph bench baselines` on a tiny index (fake embedder, no model): every baseline and both
focused ablations are measured, and a question whose gold document is found scores its recall."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.bench import baselines
from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings


def test_every_baseline_and_ablation_is_measured(tmp_path: Path, monkeypatch) -> None:
    embedder = HashEmbedder()
    texts = [
        f"The {topic} of the old harbour town, note {i}."
        for i, topic in enumerate(
            ["lighthouse", "tide", "storm", "nets", "gulls", "whales", "ferry", "market"]
        )
    ]
    index = TinyIndex(texts=texts, doc_ids=[f"d{i}" for i in range(len(texts))])
    uri = index.write_delta(tmp_path / "index", embedder, terms=True)
    opened = QueryEngine.open

    def open_with_fakes(settings, uri, console, **kwargs):  # noqa: ANN001, ANN202
        return opened(settings, uri, Console(quiet=True), roles=fake_roles(FakeLLM()), embedder=embedder)

    monkeypatch.setattr(QueryEngine, "open", open_with_fakes)
    questions = tmp_path / "questions.jsonl"
    rows = [
        {
            "question_id": "q1",
            "question": "What is the storm of the old harbour town?",
            "answer": "x",
            "type": "bridge",
            "supporting_doc_ids": ["d2"],
        },
        {
            "question_id": "q2",
            "question": "Where do the whales go?",
            "answer": "x",
            "type": "comparison",
            "supporting_doc_ids": ["d5", "d7"],
        },
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    per_question: list[dict] = []
    figures = baselines.measure(load_settings(), uri, questions, [60, 400], rows=per_question)
    assert set(figures) == {"vector", "hybrid", "hybrid-focused", "prior-focused"}
    for method, kinds in figures.items():
        assert set(kinds) == {"all", "bridge", "comparison"}
        assert all(0.0 <= recall <= 1.0 for recall in kinds["all"].values()), method
    # At 400 tokens every one of the eight short chunks fits: the rankings find every gold document;
    # the prior's fill stops at query.context_fill_min, so it may hold fewer, never fewer than at 60.
    assert all(figures[m]["all"][400] == 1.0 for m in ("vector", "hybrid", "hybrid-focused"))
    assert figures["prior-focused"]["all"][400] >= figures["prior-focused"]["all"][60] > 0
    assert len(per_question) == 2 * 4 * 2
