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
from typing import Any

from lazygraph.settings import Settings

_PACKAGE = "lazygraph.demo_data"

# The demo is sized to finish in about three minutes on two CPU cores with the 1.5B model, where every
# prompt token costs ~10 ms and every generated token ~50 ms: a budget of 9 relevance tests per
# question (the sample has 30 chunks, so that is 30 % of the corpus judged), at most three subqueries,
# claim extraction over all relevant chunks at once (``map_scope: query``, five chunks per call)
# instead of per subquery, and a context of 1,200 tokens for the local answer (its relevant chunks with
# their claims, then fill passages) and 2,600 for the global report (short passages across the corpus's
# themes), so that the answer prompts stay short.
DEMO_BUDGET = 9
# The local answer reads its few relevant chunks whole; the global report reads many short passages,
# one theme of the corpus after another, so it gets the larger context.
DEMO_CONTEXT_TOKENS: dict[str, int] = {"local": 1200, "global": 2600}
DEMO_QUERY_SETTINGS: dict[str, Any] = {
    "map_scope": "query",
    "max_subqueries": 3,
    "max_chunks_per_map_group": 5,
}


def demo_settings(settings: Settings) -> Settings:
    """The demo's query sizing, under any query setting the user set explicitly (YAML or environment)."""
    explicit = settings.query.model_dump(exclude_unset=True)
    # validated again, so a nested setting the user gave (query.prompts.reduce) stays a model
    query = type(settings.query).model_validate(
        {**settings.query.model_dump(), **DEMO_QUERY_SETTINGS, **explicit}
    )
    return settings.model_copy(update={"query": query})


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
