"""Question generation from an index: sampling of chunks and communities, the prompts, parsing and
filtering of candidates, resumable candidates, the question files and benchmark-qed's question format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from support.fakes import HashEmbedder, TinyIndex

from lazygraph.errors import ConfigError, InputError
from lazygraph.eval.questions import (
    answer_in_passage,
    convert_qed_questions,
    generate_questions,
    load_question_set,
    parse_question,
    rejection,
    sample_global,
    sample_local,
    select_questions,
)
from lazygraph.llm.base import ChatResult, LLMClient
from lazygraph.settings import load_settings

QUIET = Console(quiet=True)
FILLER = " ".join(["The harbour keeps its boats in good order every season."] * 5)


def _index(with_communities: bool = True) -> TinyIndex:
    """Six documents of two chunks: the first long (a fact and filler), the second short. Two level-0
    communities of three documents each, one level-1 community per document."""
    index = TinyIndex(texts=[], doc_ids=[], titles=[])
    for d in range(6):
        region = "north" if d < 3 else "south"
        if with_communities:
            index.communities.setdefault(region, (0, None))
            index.communities[f"doc{d}"] = (1, region)
        for part in range(2):
            i = len(index.texts)
            text = (
                f"The lighthouse of Town{d} was built in 18{d}0 by Name{d}. {FILLER}"
                if part == 0
                else "Short."
            )
            index.texts.append(text)
            index.doc_ids.append(f"d{d}")
            index.titles.append(f"Town{d}")
            if with_communities:
                index.memberships += [(i, 0, region), (i, 1, f"doc{d}")]
    if with_communities:
        index.concepts = {
            "lighthouse": [0, 2, 4, 6, 8, 10],
            "north coast": [0, 2, 4],
            "south coast": [6, 8, 10],
        }
    return index


class QuestionWriter(LLMClient):
    """Local: asks when the passage's lighthouse was built, answering with the year it states (or, per
    ``bad``, an unreadable reply, an answer from nowhere, or a question leaning on "the passage").
    Global: asks about the first concept the prompt lists."""

    def __init__(self, bad: dict[str, str] | None = None) -> None:
        super().__init__("synthesis")
        self.model_id = "fake:writer"
        self.bad = bad or {}
        self.prompts: list[str] = []

    def _chat(self, messages, *, max_tokens, temperature, json_schema) -> ChatResult:
        user = messages[-1]["content"]
        self.prompts.append(user)
        if user.startswith("<passage>"):
            town, year = re.search(r"lighthouse of (Town\d) was built in (\d+)", user).groups()
            reply = {"question": f"When was the lighthouse of {town} built?", "answer": year}
            kind = self.bad.get(town)
            if kind == "garbled":
                return ChatResult("no idea", 10, 2, 0.0)
            if kind == "made_up":
                reply["answer"] = "in the year 2099"
            if kind == "deictic":
                reply["question"] = "What does the passage say about the lighthouse?"
        else:
            concepts = re.search(r"concepts they share: ([^)]+)\)", user)
            topic = concepts.group(1) if concepts else "the towns"
            reply = {"question": f"Across the collection, what is said about {topic} and its history?"}
        return ChatResult(json.dumps(reply), len(user) // 4, 20, 0.0)

    def _relevance(self, messages_per_passage):
        raise AssertionError("question writing makes no relevance tests")


# ---- sampling ------------------------------------------------------------------------------------------
def test_local_samples_spread_over_communities_and_prefer_long_chunks() -> None:
    snapshot = _index().snapshot(HashEmbedder())
    samples = sample_local(snapshot, 6, np.random.default_rng(1))
    chunks = [s.chunks[0] for s in samples]
    assert sorted(chunks) == [0, 2, 4, 6, 8, 10]  # one long chunk from each finest community
    assert all(s.key == f"local:c{c:04d}" and s.kind == "local" for s, c in zip(samples, chunks, strict=True))
    assert [s.key for s in sample_local(snapshot, 6, np.random.default_rng(1))] == [s.key for s in samples]
    assert [s.key for s in sample_local(snapshot, 6, np.random.default_rng(2))] != [s.key for s in samples]
    assert (
        len({s.chunks[0] for s in sample_local(snapshot, 9, np.random.default_rng(1))}) == 9
    )  # short ones too
    assert len(sample_local(snapshot, 50, np.random.default_rng(1))) == 12  # no chunk twice


def test_global_samples_take_multi_document_communities_coarsest_first() -> None:
    snapshot = _index().snapshot(HashEmbedder())
    samples = sample_global(snapshot, 3, np.random.default_rng(0), passages=3)
    regions = [s.key.split(":")[1] for s in samples]
    assert sorted(regions[:2]) == ["north", "south"] and regions[2] == regions[0]  # cycled
    assert [s.key.split(":")[2] for s in samples] == ["0", "0", "1"]
    for sample in samples:
        docs = {str(snapshot.chunk_doc_ids[c]) for c in sample.chunks}
        assert len(sample.chunks) == 3 and len(docs) == 3  # one chunk from each of its documents
        assert sample.community is not None
    # without communities, the whole corpus stands in for one
    bare = _index(with_communities=False).snapshot(HashEmbedder())
    corpus = sample_global(bare, 2, np.random.default_rng(0), passages=4)
    assert [s.key for s in corpus] == ["global:corpus:0", "global:corpus:1"]
    assert all(
        s.community is None and len({str(bare.chunk_doc_ids[c]) for c in s.chunks}) == 4 for s in corpus
    )


# ---- replies and filtering ------------------------------------------------------------------------------
def test_parse_and_reject_candidates() -> None:
    assert parse_question('```json\n{"question": " Who  built it? ", "answer": "Ann"}\n```') == {
        "question": "Who built it?",
        "answer": "Ann",
    }
    from lazygraph.errors import LLMError

    with pytest.raises(LLMError):
        parse_question('{"answer": "Ann"}')
    assert answer_in_passage("The Harbor Lighthouse", "the harbor lighthouse was built") == 1.0
    assert answer_in_passage("Maria Velasco", "built by Maria Lopez") == 0.5

    def local(**fields) -> dict:
        return {"type": "local", "question": "When was the lighthouse of Town1 built?", "answer": "1810",
                "answer_in_passage": 1.0, "error": None, **fields}  # fmt: skip

    assert rejection(local()) is None
    assert rejection(local(error="bad json")) == "unreadable reply"
    assert rejection(local(question="Lighthouse")) == "not a question"
    assert rejection(local(question="What does this text say about Town1?")) == "refers to its passage"
    assert rejection(local(question=" ".join(["very"] * 70) + "?")) == "too long"
    assert rejection(local(answer="")) == "no answer"
    assert rejection(local(answer_in_passage=0.5)) == "answer not in its passage"
    assert (
        rejection({"type": "global", "question": "Across the collection, what changed?", "error": None})
        is None
    )
    echo = {"type": "global", "question": "Across the collection, what are the main themes?", "error": None}
    assert rejection({**echo, "grounded_words": 0}) == "echoes the instructions"
    assert rejection({**echo, "grounded_words": 2}) is None


def test_a_global_question_must_take_words_from_what_it_was_shown() -> None:
    from lazygraph.eval.questions import grounded_words
    from lazygraph.llm.prompts import load_prompt

    prompt = load_prompt("question_global", 2)
    instructions = prompt.system + " " + prompt.user
    shown = prompt.messages(
        n_passages="2",
        themes=" (concepts they share: lighthouse, north coast)",
        passages='<passage id="1">The lighthouse of Town1 was built in 1810.</passage>',
    )[-1]["content"]
    # what a 1.5B model wrote when the prompt gave it a sample question to follow
    echoed = "Across the collection, what are the main themes, differences, trends or causes of the topic?"
    assert grounded_words(echoed, shown, instructions) == 0
    assert (
        grounded_words("How did lighthouse building differ along the north coast?", shown, instructions) == 3
    )


def test_select_keeps_the_first_distinct_candidates_of_each_kind() -> None:
    def candidate(kind: str, n: int, question: str) -> dict:
        return {"key": f"{kind}:c{n}:0", "type": kind, "question": question, "answer": "1810",
                "answer_in_passage": 1.0, "error": None, "source_chunk_ids": [f"c{n}"],
                "source_doc_ids": [f"d{n}"], "community_id": "north"}  # fmt: skip

    candidates = [
        candidate("local", 1, "When was the lighthouse of Town1 built?"),
        candidate("local", 2, "when was the lighthouse of town1 built?"),  # the same, normalised
        candidate("local", 3, "Who built the lighthouse of Town3?"),
        candidate("local", 4, "Who built the lighthouse of Town4?"),  # one more than wanted
        candidate("global", 5, "Across the collection, what changed?"),
    ]
    chosen, rejected = select_questions(candidates, {"local": 2, "global": 1})
    assert [q["question_id"] for q in chosen] == ["local-c1", "local-c3", "global-north-0"]
    assert rejected == {"duplicate": 1}
    first = chosen[0]
    assert first["supporting_doc_ids"] == ["d1"] and first["answer"] == "1810" and first["type"] == "local"
    assert "answer" not in chosen[2] and chosen[2]["source_chunk_ids"] == ["c5"]


# ---- the command ---------------------------------------------------------------------------------------
def test_generate_questions_writes_resumes_and_round_trips_benchmark_qed(tmp_path) -> None:
    snapshot = _index().snapshot(HashEmbedder())
    settings = load_settings(home=tmp_path)
    writer = QuestionWriter(bad={"Town0": "garbled", "Town1": "made_up", "Town2": "deictic"})
    out = tmp_path / "q" / "questions.jsonl"
    options = {"n_local": 3, "n_global": 2, "oversample": 2.0, "seed": 7, "passages": 3}
    summary = generate_questions(
        settings,
        "memory://tiny",
        out,
        QUIET,
        client=writer,
        snapshot=snapshot,
        qed_dir=tmp_path / "qed",
        **options,
    )
    # 6 local candidates (the chunk list allows 6 long ones) and 4 global ones
    assert len(writer.prompts) == 6 + 4 and summary["candidates"] == {"local": 6, "global": 4}
    assert summary["rejected"] == {
        "answer not in its passage": 1, "duplicate": 2, "refers to its passage": 1, "unreadable reply": 1,
    }  # fmt: skip
    assert summary["written"] == {"local": 3, "global": 2}
    questions = [json.loads(line) for line in out.read_text().splitlines()]
    local = [q for q in questions if q["type"] == "local"]
    assert {q["question"] for q in local} == {f"When was the lighthouse of Town{d} built?" for d in (3, 4, 5)}
    for q in local:
        d = q["question"][-8]
        assert q["answer"] == f"18{d}0" and q["supporting_doc_ids"] == [f"d{d}"]
        assert q["question_id"] == f"local-{q['source_chunk_ids'][0]}"
    glob = [q for q in questions if q["type"] == "global"]
    assert len({q["question"] for q in glob}) == 2 and all(len(q["source_chunk_ids"]) == 3 for q in glob)
    assert '<passage id="1">' in writer.prompts[-1] and "concepts they share" in writer.prompts[-1]
    # one file per kind: the local one is what `eval answers` takes as it is
    assert len((tmp_path / "q" / "questions.local.jsonl").read_text().splitlines()) == 3
    assert len((tmp_path / "q" / "questions.global.jsonl").read_text().splitlines()) == 2
    assert json.loads((tmp_path / "q" / "questions.summary.json").read_text()) == summary

    selected = json.loads((tmp_path / "qed" / "data_local_questions" / "selected_questions.json").read_text())
    assert selected[0]["question_type"] == "data_local" and set(selected[0]) == {
        "id", "text", "question_type", "references", "attributes",
    }  # fmt: skip
    texts = json.loads(
        (tmp_path / "qed" / "data_global_questions" / "selected_questions_text.json").read_text()
    )
    assert texts == [q["question"] for q in glob]
    converted = convert_qed_questions(
        tmp_path / "qed" / "data_local_questions" / "selected_questions.json", tmp_path / "back.jsonl"
    )
    back = [json.loads(line) for line in (tmp_path / "back.jsonl").read_text().splitlines()]
    assert converted["converted"] == 3
    assert [(q["question_id"], q["question"], q["type"], q["answer"]) for q in back] == [
        (q["question_id"], q["question"], "local", q["answer"]) for q in local
    ]

    again = QuestionWriter()  # every candidate is written: nothing is asked again
    rerun = generate_questions(
        settings, "memory://tiny", out, QUIET, client=again, snapshot=snapshot, **options
    )
    assert again.prompts == [] and rerun["written"] == summary["written"]


def test_generation_options_are_checked_first(tmp_path) -> None:
    snapshot = _index().snapshot(HashEmbedder())
    settings = load_settings(home=tmp_path)
    writer = QuestionWriter()
    out = tmp_path / "q.jsonl"
    for options, message in [
        ({"n_local": 0, "n_global": 0}, "ask for some questions"),
        ({"oversample": 0.5}, "--oversample"),
        ({"passages": 1}, "--passages takes 2 or more"),
    ]:
        with pytest.raises(ConfigError, match=message):
            generate_questions(
                settings, "memory://tiny", out, QUIET, client=writer, snapshot=snapshot, **options
            )
    assert writer.prompts == [] and not out.exists()


# ---- reading question sets ---------------------------------------------------------------------------
def test_load_question_set_from_json_lines_and_benchmark_qed(tmp_path) -> None:
    lines = tmp_path / "questions.jsonl"
    lines.write_text(
        '{"question": "First?"}\n{"question_id": "x", "question": "Second?"}\n{"question": "Third?"}\n'
    )
    assert [q["question_id"] for q in load_question_set(lines)] == ["q1", "x", "q3"]
    assert [q["question_id"] for q in load_question_set(lines, skip=1, limit=1)] == ["x"]
    autoq = tmp_path / "selected_questions.json"
    autoq.write_text(
        json.dumps([{"id": "u1", "text": "Across the data, what?", "question_type": "data_global"}, "Bare?"])
    )
    assert load_question_set(autoq) == [
        {"question_id": "u1", "question": "Across the data, what?", "type": "global"},
        {"question_id": "q2", "question": "Bare?"},
    ]
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"question_id": "a", "question": "A?"}\n{"question_id": "a", "question": "B?"}\n')
    with pytest.raises(InputError, match="question id a appears twice"):
        load_question_set(twice)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"question": ""}\n')
    with pytest.raises(InputError, match=r"empty.jsonl:1 needs a non-empty question"):
        load_question_set(empty)
    not_array = tmp_path / "obj.json"
    not_array.write_text("{}")
    with pytest.raises(InputError, match="must hold a JSON array"):
        load_question_set(not_array)
    with pytest.raises(InputError, match="does not exist"):
        load_question_set(Path(tmp_path / "missing.jsonl"))
