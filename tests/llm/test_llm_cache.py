"""The LLM cache: what its keys depend on, what a client skips with it, and its Delta table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.fakes import FakeLLM

from lazygraph.llm.cache import LLMCache, completion_key, prompt_id, verdict_key
from lazygraph.llm.prompts import Prompt, load_prompt
from lazygraph.tables import arrow_dataset, open_delta

MODEL = "llamacpp:model.gguf"


def test_verdict_keys_ignore_case_and_spacing_of_the_question_but_nothing_else() -> None:
    v2, v3 = prompt_id("relevance", 2, "sys", "user"), prompt_id("relevance", 3, "sys", "user")
    assert v2 != prompt_id("relevance", 2, "sys", "user (edited)")
    key = verdict_key(MODEL, v2, "Who founded  the Mill?", "The mill was founded by Ada.")
    assert key == verdict_key(MODEL, v2, " who founded the mill? ", "The mill was founded by Ada.")
    assert key != verdict_key(MODEL, v2, "Who founded the mill?", "The mill was founded by Ada!")
    assert key != verdict_key(MODEL, v3, "Who founded the mill?", "The mill was founded by Ada.")
    assert key != verdict_key("openai:other", v2, "Who founded the mill?", "The mill was founded by Ada.")


def test_completion_keys_depend_on_messages_length_and_schema() -> None:
    messages = [{"role": "user", "content": "hi"}]
    key = completion_key(MODEL, messages, 64, None)
    assert key == completion_key(MODEL, [{"content": "hi", "role": "user"}], 64, None)
    assert key != completion_key(MODEL, messages, 65, None)
    assert key != completion_key(MODEL, messages, 64, {"type": "object"})
    assert key != completion_key(MODEL, [{"role": "user", "content": "hi!"}], 64, None)


def _cached_llm(cache: LLMCache) -> FakeLLM:
    llm = FakeLLM()
    llm.cache, llm.model_id = cache, MODEL
    return llm


def test_a_repeated_relevance_test_is_answered_from_the_cache_and_counted_as_a_hit() -> None:
    llm = _cached_llm(LLMCache())
    first = llm.relevance("Which REL?", ["a REL passage", "another passage"])
    with llm.ledger() as ledger:
        again = llm.relevance("which  rel?", ["a REL passage", "a third passage"])
    assert first[0] == again[0] == 0.9 and again[1] == 0.1
    assert llm.relevance_batches == [2, 1]  # only the new passage reached the model
    row = ledger.summary()["relevance"]
    assert row["calls"] == 1 and row["cache_hits"] == 1
    assert row["cached_tokens"] > 0  # what the hit cost when it was a call
    assert llm.cache is not None and llm.cache.stats()["verdict"] == {
        "hits": 1,
        "misses": 3,
        "hit_rate": 0.25,
    }


def test_another_prompt_version_is_not_a_cache_hit() -> None:
    llm = _cached_llm(LLMCache())
    current = load_prompt("relevance", 2)
    llm.relevance("Which REL?", ["a REL passage"], prompt=current)
    llm.relevance(
        "Which REL?", ["a REL passage"], prompt=Prompt("relevance", 99, current.system, current.user)
    )
    assert llm.relevance_batches == [1, 1]


def test_completions_are_cached_at_temperature_zero_only() -> None:
    llm = _cached_llm(LLMCache())
    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "say something"}]
    first = llm.chat(messages, temperature=0.0)
    with llm.ledger() as ledger:
        second = llm.chat(messages, temperature=0.0)
    assert second.text == first.text and second.cached and second.prompt_tokens == 0
    assert ledger.summary()["relevance"]["calls"] == 0
    llm.chat(messages, temperature=0.7)
    llm.chat(messages, temperature=0.7)
    assert len(llm.tasks) == 3  # one cached completion, two sampled ones


def test_a_batch_mixing_known_and_new_completions_keeps_its_order() -> None:
    llm = _cached_llm(LLMCache())
    a = [{"role": "system", "content": "x"}, {"role": "user", "content": "a"}]
    b = [{"role": "system", "content": "x"}, {"role": "user", "content": "b"}]
    known = llm.chat(b)
    out = llm.chat_batch([a, b, a])
    assert [r.cached for r in out] == [False, True, False]
    assert out[1].text == known.text and len(llm.tasks) == 3


def test_entries_survive_in_a_delta_table_and_are_read_by_the_next_process(tmp_path: Path) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    llm = _cached_llm(LLMCache.open(uri))
    llm.relevance("Which REL?", ["a REL passage"])
    llm.chat([{"role": "user", "content": "hello"}])
    assert llm.cache is not None and llm.cache.flush() == 2
    assert llm.cache.flush() == 0  # nothing new since
    table = open_delta(uri)
    assert table is not None
    assert sorted(arrow_dataset(table).to_table()["kind"].to_pylist()) == ["completion", "verdict"]

    later = _cached_llm(LLMCache.open(uri))
    assert later.cache is not None and later.cache.stats()["stored"]["rows"] == 0  # opening reads none
    assert later.relevance("which rel?", ["a REL passage"]) == [0.9]
    later.chat([{"role": "user", "content": "hello"}])
    assert later.relevance_batches == [] and later.tasks == []
    assert later.cache.stats()["stored"]["rows"] == 2  # each entry read by its key


def test_an_unwritable_location_keeps_the_cache_in_memory_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    llm = _cached_llm(LLMCache.open((blocker / "llm_cache").as_uri()))
    llm.relevance("Which REL?", ["a REL passage"])
    with caplog.at_level(logging.WARNING):
        assert llm.cache is not None and llm.cache.flush() == 0
    assert "cannot be written" in caplog.text and not llm.cache.writable
    assert llm.relevance("Which REL?", ["a REL passage"]) == [0.9] and llm.relevance_batches == [1]


def test_a_cache_that_cannot_write_still_reads_what_was_stored(tmp_path: Path, caplog) -> None:
    from lazygraph.llm.cache import Verdict

    uri = (tmp_path / "llm_cache").as_uri()
    stored_key = verdict_key("m", "p", "which stored?", "passage one")
    writer = LLMCache.open(uri)
    writer.put_verdict(stored_key, "m", Verdict(0.8, 12))
    assert writer.flush() == 1

    reader = LLMCache.open(uri)  # a query actor with read-only credentials, say

    def refuse(rows):
        raise PermissionError("read-only location")

    reader._append = refuse  # type: ignore[method-assign]
    reader.put_verdict(verdict_key("m", "p", "which new?", "passage two"), "m", Verdict(0.3, 9))
    with caplog.at_level(logging.WARNING):
        assert reader.flush() == 0
    assert "cannot be written" in caplog.text and not reader.writable
    found = reader.verdict(stored_key)  # still read by key from the table
    assert found is not None and found.p_yes == pytest.approx(0.8)
    assert reader.stats()["stored"]["rows"] == 1
