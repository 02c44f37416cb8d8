"""Sample corpus and demonstration questions that ship with lazygraph.

The corpus describes a fictional coastal town (Port Ellery on the Avel Estuary): a fishing
cooperative, a university marine station, a tidal-energy project, the town council, a festival and a
storm that ties them together. Names recur across documents so that concept communities form and a
global question has something to summarise.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

_PACKAGE = "lazygraph.demo_data"


def sample_corpus_path() -> Path:
    """Path of the bundled sample corpus (JSON Lines with doc_id, title, text)."""
    return Path(str(resources.files(_PACKAGE).joinpath("sample_corpus.jsonl")))


def demo_question_records() -> dict[str, dict]:
    """Each demonstration question with its metadata: {"local": {"question", "supporting_doc_ids", ...}, ...}.

    ``supporting_doc_ids`` names the documents that answer the local question; the global question
    draws on the whole corpus and lists none.
    """
    text = resources.files(_PACKAGE).joinpath("questions.json").read_text(encoding="utf-8")
    return json.loads(text)


def demo_questions() -> dict[str, str]:
    """The demonstration questions by kind: {"local": question, "global": question}."""
    return {kind: record["question"] for kind, record in demo_question_records().items()}
