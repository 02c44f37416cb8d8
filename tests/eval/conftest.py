"""Fixtures of the evaluation tests: a query engine over a small Delta index, and a questions file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings


def _index() -> TinyIndex:
    """Ten documents of two chunks each, one community per document under one root."""
    index = TinyIndex(texts=[])
    index.communities["all"] = (0, None)
    index.doc_ids = []
    for d in range(10):
        index.communities[f"doc{d}"] = (1, "all")
        for part in range(2):
            i = len(index.texts)
            index.texts.append(f"Document {d} topic{d} part {part}: facts about topic{d} and filler words.")
            index.doc_ids.append(f"hp{d:04d}")
            index.memberships += [(i, 0, "all"), (i, 1, f"doc{d}")]
    return index


@pytest.fixture()
def engine(tmp_path: Path, hash_embedder: HashEmbedder) -> QueryEngine:
    """An engine over ``_index()`` written as Delta tables; the fake LLM judges a passage relevant
    when it names the same topicN as the question."""
    uri = _index().write_delta(tmp_path / "idx", hash_embedder)
    llm = FakeLLM(is_relevant=lambda q, p: any(f"topic{d}" in q and f"topic{d}" in p for d in range(10)))
    settings = load_settings(home=tmp_path)
    return QueryEngine.open(settings, uri, Console(quiet=True), roles=fake_roles(llm), embedder=hash_embedder)


@pytest.fixture()
def questions_file(tmp_path: Path) -> Path:
    """Three labelled questions as JSONL (q1 comparison/easy, q2 bridge/hard, q3 untyped)."""
    rows = [
        {
            "question_id": "q1",
            "question": "What about topic3 and topic7?",
            "type": "comparison",
            "level": "easy",
            "supporting_doc_ids": ["hp0003", "hp0007"],
        },
        {
            "question_id": "q2",
            "question": "Tell me of topic5",
            "type": "bridge",
            "level": "hard",
            "supporting_doc_ids": ["hp0005", "hp0009"],
        },
        {"question_id": "q3", "question": "unused", "supporting_doc_ids": ["hp0001"]},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path
