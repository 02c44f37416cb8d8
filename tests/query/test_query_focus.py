"""Sentence-level focus: which sentences of a chunk the assessor and the map step read."""

from __future__ import annotations

import numpy as np
from support.fakes import HashEmbedder, TinyIndex

from lazygraph.demo_data import demo_settings
from lazygraph.query.focus import GAP, SentenceFocus, split_sentences
from lazygraph.settings import load_settings

TEXT = (
    "The harbour opened in 1820. Gulls nest on the north wall every spring. "
    "The lighthouse keeper Ada Marsh lit the lamp for forty years. Fishing boats land sardines at dawn. "
    "A ferry runs to the islands twice a week."
)


def _focus(max_tokens: int) -> tuple[SentenceFocus, HashEmbedder]:
    embedder = HashEmbedder()
    snapshot = TinyIndex(texts=[TEXT, "Short text."], titles=["Port Allen", "Other"]).snapshot(embedder)
    return SentenceFocus(snapshot, embedder.encode, lambda t: len(t.split()), max_tokens), embedder


def test_sentences_split_on_end_punctuation_before_a_capital() -> None:
    assert split_sentences("Dr. Wren left. He came back in 2023. e.g. not here") == [
        "Dr. Wren left.",
        "He came back in 2023. e.g. not here",
    ]
    # a title or "c." before a name or a year never ends a sentence: the name stays with its sentence
    assert split_sentences("The leader is Hon. Ada Vell of the party. Gen. Ott died c. 1560. It rained.") == [
        "The leader is Hon. Ada Vell of the party.",
        "Gen. Ott died c. 1560.",
        "It rained.",
    ]


def test_focus_keeps_the_most_similar_sentences_in_chunk_order() -> None:
    focus, embedder = _focus(max_tokens=14)
    vector = embedder.encode(["Who was the lighthouse keeper who lit the lamp?"])[0]
    [passage] = focus.passages([0], vector)
    assert passage.startswith("Port Allen\n")
    assert "Ada Marsh lit the lamp" in passage and "ferry" not in passage
    assert GAP in passage  # left-out sentences are marked
    assert len(passage.split()) <= 14 + 2  # the budget, plus the gap marks


def test_a_chunk_that_fits_and_focus_off_read_the_whole_chunk() -> None:
    focus, embedder = _focus(max_tokens=1000)
    vector = embedder.encode(["anything"])[0]
    assert focus.passages([0, 1], vector) == [f"Port Allen\n{TEXT}", "Other\nShort text."]
    off, _ = _focus(max_tokens=0)
    assert off.passages([0], np.zeros(8, dtype=np.float32)) == [f"Port Allen\n{TEXT}"]


def test_demo_sizing_never_overrides_what_the_user_set() -> None:
    sized = demo_settings(load_settings())
    assert sized.query.map_scope == "query" and sized.query.max_subqueries == 3
    mine = demo_settings(load_settings(query={"max_subqueries": 5}))
    assert mine.query.max_subqueries == 5 and mine.query.map_scope == "query"


def test_one_focus_serves_two_lengths_from_the_same_sentence_vectors() -> None:
    focus, embedder = _focus(max_tokens=1000)
    vector = embedder.encode(["Who was the lighthouse keeper who lit the lamp?"])[0]
    [whole] = focus.passages([0], vector)
    [short] = focus.passages([0], vector, max_tokens=14)
    assert whole == f"Port Allen\n{TEXT}"
    assert "Ada Marsh lit the lamp" in short and len(short.split()) < len(whole.split())
    # the best sentence is kept even when it alone is longer than the limit
    [tiny] = focus.passages([0], vector, max_tokens=1)
    assert "Ada Marsh lit the lamp" in tiny


def test_the_assessor_reads_fewer_tokens_than_the_map_step_quotes(tmp_path) -> None:
    import re
    from dataclasses import dataclass, field

    from support.fakes import FakeLLM, fake_roles

    from lazygraph.query.engine import QueryEngine

    @dataclass
    class Recording(FakeLLM):
        judged: list[str] = field(default_factory=list)
        quoted: list[str] = field(default_factory=list)

        def _relevance(self, messages_per_passage):
            for messages in messages_per_passage:
                user = messages[-1]["content"]
                self.judged.append(user.split("<passage>\n", 1)[1].rsplit("\n</passage>", 1)[0])
            return super()._relevance(messages_per_passage)

        def _chat(self, messages, **kwargs):
            user = messages[-1]["content"]
            self.quoted += re.findall(r'<passage id="\d+">\n(.*?)\n</passage>', user, re.S)
            return super()._chat(messages, **kwargs)

    index = TinyIndex(texts=[TEXT, TEXT.replace("Ada Marsh", "Ben Hale")], titles=["Port Allen", "Port Bree"])
    seen = {}
    for relevance_focus in (None, 12):
        embedder = HashEmbedder()
        settings = load_settings(
            home=tmp_path,
            query={"focus_tokens": 1000, "relevance_focus_tokens": relevance_focus, "map_scope": "query"},
        )
        llm = Recording(is_relevant=lambda q, p: "lamp" in p)
        engine = QueryEngine(settings, index.snapshot(embedder), roles=fake_roles(llm), embedder=embedder)
        engine.answer("Who lit the lamp of the lighthouse?", budget=4)
        assert llm.judged and llm.quoted
        seen[relevance_focus] = llm
    # by default the assessor reads what the map step quotes: here, the whole chunk
    assert all("ferry" in p for p in seen[None].judged + seen[None].quoted)
    # with a shorter assessor focus it reads the lamp's sentence only, and the map step still quotes it all
    assert all("lit the lamp" in p and "ferry" not in p for p in seen[12].judged)
    assert all("ferry" in p for p in seen[12].quoted)
