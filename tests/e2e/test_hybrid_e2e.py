"""The lexical signal end to end: the real index job writes chunk_terms, an append keeps it in step
with the chunks, an index without the table is backfilled on its next append, and the hybrid search
ranks first the chunk holding a question's rare exact term."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable
from rich.console import Console
from support.corpus import DOCS, write_jsonl
from support.fakes import FakeLLM, fake_roles

from lazygraph import tables
from lazygraph.lexical.terms import term_counts
from lazygraph.pipeline import build_index
from lazygraph.query.engine import QueryEngine
from lazygraph.query.snapshot import clear_cache
from lazygraph.settings import load_settings

pytestmark = pytest.mark.e2e

CHANGED_MOON = ("moon", "Moon", "The Moon orbits Earth. Apollo astronauts brought Moon rocks back to NASA.")
RARE_DOC = (
    "rover",
    "Lunar Roving Vehicle",
    "The Lunar Roving Vehicle drove on the Moon during Apollo 15. Its wheels were woven from "
    "zinc-coated steel piano wire.",
)
QUESTION = "Which Apollo vehicle had wheels made with zinc?"


@pytest.fixture(scope="module")
def settings():
    return load_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "2g"},
        chunking={"chunk_tokens": 32, "overlap_tokens": 4},
    )


def rows(index: Path, name: str) -> list[dict]:
    return DeltaTable(str(index / name)).to_pyarrow_table().to_pylist()


def terms_by_chunk(index: Path) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for row in rows(index, tables.CHUNK_TERMS):
        found.setdefault(row["chunk_id"], {})[row["term"]] = row["count"]
    return found


def assert_terms_match_chunks(index: Path) -> dict[str, dict[str, int]]:
    """Every chunk has exactly the terms the tokenizer gives its text, and no other chunk has any."""
    chunks = {c["chunk_id"]: c["text"] for c in rows(index, tables.CHUNKS)}
    terms = terms_by_chunk(index)
    assert set(terms) == set(chunks)
    for chunk_id, text in chunks.items():
        assert terms[chunk_id] == dict(term_counts(text))
    assert all(count > 0 for counted in terms.values() for count in counted.values())
    return terms


def test_chunk_terms_follow_the_chunks_and_feed_the_hybrid_search(tmp_path: Path, settings) -> None:
    console = Console(quiet=True)
    index = tmp_path / "index"
    corpus = write_jsonl(tmp_path / "a.jsonl", DOCS[:5])
    first = build_index(settings, str(corpus), str(index), False, console)
    assert first["counts"][tables.CHUNK_TERMS] > first["counts"][tables.CHUNKS]
    assert first["new"]["chunk_terms"] == first["counts"][tables.CHUNK_TERMS]
    assert_terms_match_chunks(index)

    old_moon = {c["chunk_id"] for c in rows(index, tables.CHUNKS) if c["doc_id"] == "moon"}
    changed = write_jsonl(tmp_path / "b.jsonl", [CHANGED_MOON])
    build_index(settings, str(changed), str(index), True, console)
    terms = assert_terms_match_chunks(index)
    assert old_moon and not old_moon & set(terms)  # the replaced chunks' terms were deleted

    # An index built before chunk_terms existed: its next append counts the old chunks' terms too.
    shutil.rmtree(index / tables.CHUNK_TERMS)
    rare = write_jsonl(tmp_path / "c.jsonl", [RARE_DOC])
    appended = build_index(settings, str(rare), str(index), True, console)
    assert appended["new"]["chunk_terms"] == appended["counts"][tables.CHUNK_TERMS]  # every row is new
    assert_terms_match_chunks(index)

    clear_cache()
    engine = QueryEngine.open(settings, str(index), console, roles=fake_roles(FakeLLM()))
    result = engine.answer(QUESTION, method="hybrid", context_tokens=400)
    texts = dict(zip(engine.snapshot.chunk_ids.tolist(), engine.snapshot.chunk_texts.tolist(), strict=True))
    assert "zinc" in texts[result.context_chunk_ids[0]]
    lexical = engine.snapshot.bm25(QUESTION)  # BM25 alone, from the Delta table, agrees
    assert "zinc" in engine.snapshot.chunk_texts[lexical.argmax()]
    assert sum("zinc" in text for text in engine.snapshot.chunk_texts[lexical > 0]) == 1
    assert result.method == "hybrid" and result.to_json()["cost"]["relevance_tests"] == 0
