"""The query engine end to end with a fake LLM and a hashed embedder over small synthetic indexes."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import tiktoken
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph.errors import IndexNotFoundError
from lazygraph.llm.base import ChatResult
from lazygraph.query.answer import (
    UNREADABLE_ANSWER,
    CitedSentence,
    answer_schema,
    attach_sources,
    parse_sentences,
)
from lazygraph.query.engine import QueryEngine
from lazygraph.query.evidence import Claim, Evidence
from lazygraph.query.search.lazy.claims import fit_to_context, render_claim
from lazygraph.query.search.lazy.reduce import (
    NO_REPORT,
    _echoes,
    _theme_parts,
    _theme_sentences,
    reduce_answer,
)
from lazygraph.query.search.lazy.subqueries import Subquery, guessed_names, match_concepts, parse_refinement
from lazygraph.query.snapshot import clear_cache, decode_embeddings, load_snapshot, row
from lazygraph.settings import QuerySettings, load_settings

TOPICS = {
    "tide": "The tide rises twice a day because the moon pulls the ocean water.",
    "bread": "Bread dough rises because yeast ferments sugar into gas.",
    "volcano": "A volcano erupts when magma pressure breaks the crust.",
    "glacier": "A glacier moves slowly downhill under its own weight of ice.",
}


def _corpus() -> TinyIndex:
    """Four topics, three chunks each; one community per topic under two roots; concepts per topic."""
    index = TinyIndex(texts=[])
    index.communities = {"water": (0, None), "land": (0, None)}
    for topic, sentence in TOPICS.items():
        root = "water" if topic in ("tide", "glacier") else "land"
        index.communities[topic] = (1, root)
        index.concepts[topic] = []
        for j in range(3):
            i = len(index.texts)
            index.texts.append(f"{sentence} Note {j} about {topic}.")
            index.memberships += [(i, 0, root), (i, 1, topic)]
            index.concepts[topic].append(i)
    index.doc_ids = [f"doc-{i // 3}" for i in range(len(index.texts))]
    index.edges = [("tide", "glacier")]
    return index


def _engine(tmp_path, index: TinyIndex | None = None, llm: FakeLLM | None = None, **query) -> QueryEngine:
    settings = load_settings(home=tmp_path, query=query)
    embedder = HashEmbedder()
    snap = (index or _corpus()).snapshot(embedder)
    llm = llm or FakeLLM(is_relevant=lambda q, p: "tide" in p.lower() and "tide" in q.lower())
    return QueryEngine(settings, snap, roles=fake_roles(llm), embedder=embedder)


def test_lazy_answer_cites_sources_and_records_cost(tmp_path) -> None:
    llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    engine = _engine(tmp_path, llm=llm)
    result = engine.answer("Why does the tide rise?", budget=12, trace=True)
    data = result.to_json()
    assert data["cost"]["relevance_tests"] <= 12
    assert "[Data: Sources (" in result.answer and "[S1]" not in result.answer
    cited = result.answer.split("[Data: Sources (")[1].split(")")[0].split(", ")
    assert set(cited) <= set(data["context_chunk_ids"])
    assert data["context_doc_ids"] and set(data["context_doc_ids"]) <= {"doc-0"}
    assert all("tide" in c["text"].lower() for c in data["claims"])
    assert len(data["subqueries"]) == 4  # the question plus the three from the model
    assert data["expanded_query"].endswith("(expanded)")
    cost = data["cost"]
    assert set(cost) >= {
        "relevance_tests",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "seconds",
        "per_role",
        "stages",
        "communities_visited",
        "llm_seconds",
        "non_llm_seconds",
    }
    assert cost["llm_calls"] == cost["relevance_tests"] + len(llm.tasks)
    assert set(cost["stages"]) >= {"refine", "match", "map", "reduce"}
    assert cost["communities_visited"]["0"] >= 1
    assert llm.tasks[0] == "refine" and llm.tasks[-1] == "reduce" and "map_claims" in llm.tasks
    assert any("refined with concepts: tide" in line for line in result.trace)
    json.dumps(data)  # serialisable as the CLI prints it


def test_budget_is_shared_by_subqueries_and_never_exceeded(tmp_path) -> None:
    llm = FakeLLM(is_relevant=lambda q, p: True)
    engine = _engine(tmp_path, llm=llm)
    for budget in (0, 1, 3, 7, 20):
        result = engine.answer("tide and bread and volcano", budget=budget)
        assert result.to_json()["cost"]["relevance_tests"] <= budget
        assert sum(s["relevance_tests"] for s in result.subqueries) <= budget
        if budget:
            assert result.subqueries[0]["budget"] >= 1  # the question itself is always searched first
        found = [c for s in result.subqueries for c in s["relevant_chunk_ids"]]
        assert len(found) == len(set(found))  # a chunk is tested once per query, not once per subquery


def test_no_relevant_chunk_says_so_without_map_or_reduce(tmp_path) -> None:
    llm = FakeLLM(is_relevant=lambda q, p: False)
    engine = _engine(tmp_path, llm=llm)
    result = engine.answer("What is the capital of Mars?", budget=10)
    assert result.answer.startswith("No relevant information was found")
    assert llm.tasks == ["refine"]  # no claim extraction, no answer call
    assert result.claims == [] and result.context_chunk_ids == []
    assert result.to_json()["cost"]["relevance_tests"] == 10


def test_empty_index_answers_without_any_model_call(tmp_path, fake_llm) -> None:
    engine = _engine(tmp_path, index=TinyIndex(texts=[]), llm=fake_llm)
    for method in ("lazy", "vector"):
        result = engine.answer("anything?", method=method)
        assert "No relevant information" in result.answer
    assert fake_llm.tasks == [] and fake_llm.relevance_batches == []


def test_refine_falls_back_to_the_question_on_junk(tmp_path) -> None:
    llm = FakeLLM(refine_reply="I cannot do JSON, sorry", is_relevant=lambda q, p: "tide" in p.lower())
    engine = _engine(tmp_path, llm=llm)
    result = engine.answer("Why does the tide rise?", budget=6, trace=True)
    assert [s["text"] for s in result.subqueries] == ["Why does the tide rise?"]
    assert result.expanded_query == "Why does the tide rise?"
    assert any("no usable subqueries" in line for line in result.trace)
    qs = QuerySettings()
    refined = parse_refinement(
        {"subqueries": ["", 3, "ok query", "OK query"], "expanded_query": 5, "scope": "cosmic"}, "Q?", qs
    )
    assert [s.text for s in refined.subqueries] == ["Q?", "ok query"] and refined.expanded_query == "Q?"
    assert refined.llm_ok and refined.scope == "local"


def _texts(reply: dict, question: str, settings: QuerySettings) -> list[str]:
    return [s.text for s in parse_refinement(reply, question, settings).subqueries]


def test_where_the_question_goes_among_the_subqueries() -> None:
    reply = {"subqueries": ["a one", "q?", "b two", "c three", "d four", "e five"], "expanded_query": "x"}
    first = _texts(reply, "Q?", QuerySettings(question_subquery="first", max_subqueries=4))
    last = _texts(reply, "Q?", QuerySettings(question_subquery="last", max_subqueries=4))
    none = _texts(reply, "Q?", QuerySettings(question_subquery="none", max_subqueries=4))
    assert first == ["Q?", "a one", "b two", "c three"]
    assert last == ["a one", "b two", "c three", "Q?"]
    assert none == ["a one", "b two", "c three", "d four"]
    # With nothing but a copy of the question, the question is searched alone whatever the setting.
    for position in ("first", "last", "none"):
        settings = QuerySettings(question_subquery=position)
        assert _texts({"subqueries": ["q?"]}, "Q?", settings) == ["Q?"]


def test_subqueries_that_guess_an_answer_are_dropped() -> None:
    question = "Who is the husband of the actress who starred in Ankur?"
    reply = {
        "scope": "local",
        "subqueries": [
            "Which actress starred in Ankur?",
            "Shabana Azmi is married to whom?",  # a guessed bridge entity
            "Who is the husband of the actress who starred in Ankur?",
            "When was the film released in 1974?",  # a guessed date
            "Who are the actresses of ankur?",  # a plural and the question's own name in lower case
        ],
        "expanded_query": "Shabana Azmi's husband, who is the husband of the actress in Ankur",
    }
    refined = parse_refinement(reply, question, QuerySettings(question_subquery="none"))
    # (the copy of the question is left out too: question_subquery "none")
    assert [s.text for s in refined.subqueries] == [
        "Which actress starred in Ankur?",
        "Who are the actresses of ankur?",
    ]
    assert refined.guesses == ["Shabana Azmi is married to whom?", "When was the film released in 1974?"]
    assert refined.expanded_query == question  # a guessed premise never reaches the reduce
    assert guessed_names("Ankur cast: who starred?", question) == []
    assert guessed_names("Was Ankur filmed in Hyderabad?", question) == ["Hyderabad"]


def test_refine_reads_the_scope_of_the_question() -> None:
    reply = {"scope": "global", "subqueries": ["what themes recur?"], "expanded_query": "the themes"}
    assert parse_refinement(reply, "What are the main themes?", QuerySettings()).scope == "global"
    local = {"scope": "local", "subqueries": ["who led the review?"], "expanded_query": "who led it"}
    # the wording of a question about the whole corpus makes it global whatever the model said
    for question in (
        "Across the dataset, what are the key legislative and policy changes affecting health care?",
        "What are the main themes and tensions in the debate about the array?",
    ):
        assert parse_refinement(local, question, QuerySettings()).scope == "global"
    assert parse_refinement(local, "Who led the review of the array?", QuerySettings()).scope == "local"


def test_a_question_for_one_fact_stays_local_when_the_model_calls_it_global() -> None:
    said_global = {"scope": "global", "subqueries": ["which continent?"], "expanded_query": "the limit"}
    for question in (
        "What is the northern limit of the coldest continent?",
        "Are both newspapers, the Harbour Gazette and the Estuary Post, weekly publications?",
        "When did the council that approved the turbines first meet?",
        "Where is the city whose mayor opened the marine station?",
        "Which of the two storms flooded more houses?",
        "The singer of the harbour song has sold more than how many records worldwide?",
        "The station's director is known for her surveys of what?",
        "The first turbine was installed by a firm founded in what year?",
        "Which firm was chosen to build the array?",
    ):
        assert parse_refinement(said_global, question, QuerySettings()).scope == "local", question
    # questions about many documents keep the model's reading, and corpus-wide wording decides alone
    for question in (
        "What arguments for and against the tidal array do people make?",
        "How did public opinion on the array evolve over time?",
        "What environmental concerns about the estuary do the documents raise?",
        "When did the main tensions of the debate change, across the whole collection?",
    ):
        assert parse_refinement(said_global, question, QuerySettings()).scope == "global", question
    local = {**said_global, "scope": "local"}
    evolve = "How did public opinion on the array evolve?"
    assert parse_refinement(local, evolve, QuerySettings()).scope == "local"


def test_subquery_concepts_by_name_and_embedding(tmp_path) -> None:
    engine = _engine(tmp_path)
    snap = engine.snapshot
    sub = Subquery("how do glacier masses move")
    vectors = snap.concept_vectors(engine.encode, tmp_path / "cache")
    match_concepts(snap, sub, engine.encode([sub.text])[0], vectors, QuerySettings(concepts_per_subquery=2))
    assert sub.concepts[0] == "glacier"
    assert "glacier" in sub.refined
    # cached on disk for the next process
    assert list((tmp_path / "cache").glob("concept-vectors-*.npy"))


def test_named_concepts_rank_by_similarity_then_in_index_order(tmp_path) -> None:
    engine = _engine(tmp_path)
    snap = engine.snapshot
    text = "bread and tide and glacier and volcano"
    names = snap.concept_name_index()
    named = sorted(names[n] for n in ("bread", "tide", "glacier", "volcano") if n in names)
    assert len(named) >= 3
    # Without name vectors every named concept scores alike: the index's order decides.
    sub = Subquery(text)
    match_concepts(snap, sub, engine.encode([text])[0], None, QuerySettings(concepts_per_subquery=3))
    assert sub.concept_indices == named[:3]
    # With them, the named concepts come by similarity, even all below the similarity floor.
    vectors = snap.concept_vectors(engine.encode, tmp_path / "cache")
    vector = engine.encode([text])[0]
    sub = Subquery(text)
    cfg = QuerySettings(concepts_per_subquery=3, min_concept_similarity=0.999)
    match_concepts(snap, sub, vector, vectors, cfg)
    ranked = [(-float(np.float32(vectors[i] @ vector)), i) for i in sub.concept_indices]
    assert ranked == sorted(ranked) and len(ranked) == 3
    assert set(sub.concept_indices) <= set(named)


def test_claims_are_cut_to_the_context_limit(tmp_path) -> None:
    llm = FakeLLM(is_relevant=lambda q, p: True)
    engine = _engine(tmp_path, llm=llm)
    enc = tiktoken.get_encoding(engine.settings.chunking.encoding)
    full = engine.answer("tide bread volcano glacier", budget=24, context_tokens=5000)
    small = engine.answer("tide bread volcano glacier", budget=24, context_tokens=100)
    assert len(small.claims) < len(full.claims)
    used = sum(
        len(enc.encode(render_claim(n, c)))
        for n, c in enumerate([Claim(c["text"], [], 0, 0) for c in small.claims], start=1)
    )
    assert used <= 100 + len(small.claims)  # label numbers may differ by one token per claim
    # ranking with diversity: claims from several communities precede a second one from the same
    communities = [c["source_chunk_ids"][0] for c in full.claims]
    assert len(set(communities)) > 1


def test_fit_to_context_skips_what_does_not_fit() -> None:
    claims = [Claim("x " * n, [0], 0, 0) for n in (30, 200, 10)]
    kept = fit_to_context(claims, 60, lambda text: len(text.split()))
    assert [len(c.text.split()) for c in kept] == [30, 10]


def test_structured_answer_cites_facts_per_sentence() -> None:
    text = json.dumps(
        {"sentences": [{"text": "A.", "facts": [1]}, {"text": "B.", "facts": [2, 1, 2, 9]}, {"text": " "}]}
    )
    sentences = parse_sentences(text, n_facts=2, max_facts=3)
    # unknown fact numbers are dropped, duplicates removed, empty sentences skipped
    assert [(s.text, s.facts) for s in sentences] == [("A.", [1]), ("B.", [2, 1])]


def test_prose_answer_falls_back_to_labels_without_citing_everything() -> None:
    sentences = parse_sentences("A holds [S1]. B holds [F2, S1]. Bad label [S9]. Nothing cited.", 2, 3)
    assert [(s.text, s.facts) for s in sentences] == [
        ("A holds.", [1]),
        ("B holds.", [2, 1]),
        ("Bad label.", []),
        ("Nothing cited.", []),
    ]


def test_answer_schema_allows_only_real_fact_numbers() -> None:
    schema = answer_schema(n_facts=3, max_facts=2, max_sentences=4)
    item = schema["properties"]["sentences"]["items"]["properties"]["facts"]
    assert item["items"]["enum"] == [1, 2, 3] and item["maxItems"] == 2
    assert schema["properties"]["sentences"]["maxItems"] == 4
    text = schema["properties"]["sentences"]["items"]["properties"]["text"]
    assert "maxLength" not in text
    bounded = answer_schema(n_facts=3, max_facts=2, max_sentences=4, max_chars=120)
    assert bounded["properties"]["sentences"]["items"]["properties"]["text"]["maxLength"] == 120


def test_a_reply_cut_off_at_max_tokens_keeps_its_whole_sentences_once_each() -> None:
    looping = (
        '{"sentences": [{"text": "The storm broke the wall.", "facts": [1]}, '
        '{"text": "The tide rose.", "facts": [2]}, {"text": "the storm  broke the wall.", "facts": [3]}, '
        '{"text": "The storm broke the wall. The storm broke the wa'
    )
    sentences = parse_sentences(looping, n_facts=3, max_facts=2)
    assert [(s.text, s.facts) for s in sentences] == [
        ("The storm broke the wall.", [1, 3]),
        ("The tide rose.", [2]),
    ]
    # Cut off inside its first sentence, nothing whole is left, and raw JSON is never an answer.
    assert parse_sentences('{"sentences": [{"text": "The sto', 3, 2) == []


def test_a_sentence_stopped_at_the_schemas_length_keeps_its_whole_sentences() -> None:
    """The demo's report once ended a theme with "... the Avel Tidal Array. Mayor G": the model copied
    three sentences of a source into one and the grammar stopped it at ``maxLength``."""
    copied = "Brightwater asked the council to approve four turbines. Dr. Wren agreed to review it. Mayor G"
    reply = json.dumps({"sentences": [{"text": copied, "facts": [1]}, {"text": "Short.", "facts": [2]}]})
    at_limit = parse_sentences(reply, 2, 2, max_chars=len(copied))
    assert [s.text for s in at_limit] == [
        "Brightwater asked the council to approve four turbines. Dr. Wren agreed to review it.",
        "Short.",
    ]
    assert at_limit[0].facts == [1]
    # under the limit the model ended the text itself: it is left as written
    assert parse_sentences(reply, 2, 2, max_chars=len(copied) + 1)[0].text == copied
    # one unfinished sentence has nothing whole to fall back to: kept, marked as cut
    single = json.dumps({"sentences": [{"text": "The council voted nine to", "facts": [1]}]})
    assert parse_sentences(single, 1, 1, max_chars=25)[0].text == "The council voted nine to …"


def test_a_malformed_reply_keeps_its_closed_texts_never_the_raw_json() -> None:
    # What a server that ignored the schema returned: a closed text, then a broken facts list.
    broken = '{"sentences": [{"text": "The passage discusses free coverage.", "facts": }]}'
    assert [(s.text, s.facts) for s in parse_sentences(broken, 3, 2)] == [
        ("The passage discusses free coverage.", [])
    ]
    # A theme of a report cut off in its second sentence keeps its title and its whole sentence.
    theme = (
        '{"title": "Storm damage", "sentences": '
        '[{"text": "The storm broke the wall.", "facts": [2]}, {"text": "It'
    )
    title, said = _theme_sentences(theme, 3, 2)
    assert (title, [(s.text, s.facts) for s in said]) == (
        "Storm damage",
        [("The storm broke the wall.", [2])],
    )


def test_an_unreadable_reply_is_asked_again_then_replaced_by_a_plain_message() -> None:
    snap = TinyIndex(texts=["The tide rises twice a day."], doc_ids=["d0"]).snapshot()
    items = [Evidence(0, "The tide rises twice a day.")]
    cut = FakeLLM(answer_reply='{"sentences": [{"text": "The ti')
    answer = reduce_answer("How often?", items, snap, cut, QuerySettings())
    assert cut.tasks == ["reduce", "reduce"]  # asked once more, with twice the tokens
    assert answer.text == UNREADABLE_ANSWER and "{" not in answer.text


def test_sources_are_capped_per_sentence_and_resolved_to_excerpts() -> None:
    snap = TinyIndex(
        texts=[f"Filler sentence {i}. The tide rose {i} metres. Another line." for i in range(8)],
        doc_ids=[f"d{i}" for i in range(8)],
    ).snapshot()
    fact_chunks = [[0, 1, 2], [3, 4, 5], [6, 7]]
    texts = ["tide rose 0 1 2", "tide rose 3 4 5", "tide rose 6 7"]
    answer = attach_sources(
        [CitedSentence("All tides.", [1, 2, 3]), CitedSentence("Uncited.", [])], fact_chunks, texts, snap, 5
    )
    assert len(answer.sentences[0].chunk_ids) == 5 and answer.sentences[1].chunk_ids == []
    assert [s.chunk_id for s in answer.sources] == answer.sentences[0].chunk_ids
    first = answer.sources[0]
    assert first.title == "Title 0" and first.doc_id == "d0" and first.excerpt == "The tide rose 0 metres."
    assert answer.text.startswith("All tides. [Data: Sources (") and answer.text.endswith("Uncited.")


def test_vector_preset_and_token_limit(tmp_path, fake_llm) -> None:
    engine = _engine(tmp_path, llm=fake_llm)
    result = engine.answer("Why does the tide rise?", preset="SS_8K")
    assert result.method == "vector" and result.preset == "SS_8K"
    assert result.to_json()["cost"]["relevance_tests"] == 0
    assert fake_llm.tasks == ["vector_answer"]
    assert "[Data: Sources (" in result.answer
    enc = tiktoken.get_encoding(engine.settings.chunking.encoding)
    snap = engine.snapshot
    with engine.search("Why does the tide rise?", "vector", answering=False) as searched:
        pass  # the vector search's cut, at each limit below
    for limit in (30, 60, 200):
        chosen = searched.context(limit).chunks
        rendered = [f"S{n}: Title {c}\n{snap.chunk_texts[c]}" for n, c in enumerate(chosen, start=1)]
        assert sum(len(enc.encode(r)) for r in rendered) <= limit
    chosen = searched.context(40).chunks
    assert chosen and all(snap.chunk_doc_ids[c] == "doc-0" for c in chosen[:1])  # the tide doc ranks first


def test_vector_context_is_clipped_to_the_model_window(tmp_path) -> None:
    engine = _engine(tmp_path)
    result = engine.answer("tide", method="vector", context_tokens=64000, trace=True)
    assert any("limited" in line for line in result.trace)
    assert engine.plan("vector").preset == "SS_8K"
    assert engine.plan(preset="SS_64K").method == "vector"
    assert engine.plan(preset="Z500", budget=7).budget == 7


def test_snapshot_from_delta_tables_is_cached_and_complete(tmp_path) -> None:
    clear_cache()
    uri = _corpus().write_delta(tmp_path / "idx")
    snap = load_snapshot(uri)
    assert snap is load_snapshot(uri)
    assert snap.n_chunks == 12 and snap.embeddings.shape == (12, 64)
    assert np.allclose(np.linalg.norm(snap.embeddings, axis=1), 1.0, atol=1e-3)
    assert snap.n_levels == 2 and len(snap.roots()) == 2
    tides = list(snap.community_ids).index("tide")
    assert row(snap.community_chunks, tides).tolist() == [0, 1, 2]
    assert snap.community_ids[snap.community_parent[tides]] == "water"
    assert snap.concept_adjacency.indices.size == 2
    assert set(snap.concept_names) == set(TOPICS)
    with pytest.raises(IndexNotFoundError, match="lazygraph index"):
        load_snapshot(str(tmp_path / "nowhere"))


def test_chunks_without_concepts_stay_reachable(tmp_path, hash_embedder) -> None:
    index = _corpus()
    index.texts.append("An orphan chunk about tides with no concept. REL")
    index.doc_ids.append("doc-orphan")
    snap = index.snapshot(hash_embedder)
    assert "(chunks without concepts)" in set(snap.community_ids)
    llm = FakeLLM(is_relevant=lambda q, p: "orphan" in p)
    settings = load_settings(home=tmp_path)
    engine = QueryEngine(settings, snap, roles=fake_roles(llm), embedder=hash_embedder)
    result = engine.answer("orphan chunk", budget=20)
    assert "doc-orphan" in result.context_doc_ids


@pytest.mark.parametrize("binary_type", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_embeddings_decode_from_any_binary_layout(binary_type) -> None:
    vectors = np.random.default_rng(0).random((5, 8)).astype(np.float16)
    table = pa.table(
        {
            "embedding": pa.array([v.tobytes() for v in vectors], binary_type),
            "dtype": ["float16"] * 5,
            "dim": [8] * 5,
        }
    )
    assert np.allclose(decode_embeddings(table), vectors.astype(np.float32))
    mixed = pa.table(
        {
            "embedding": pa.array(
                [vectors[0].tobytes(), vectors[1].astype(np.float32).tobytes()], binary_type
            ),
            "dtype": ["float16", "float32"],
            "dim": [8, 8],
        }
    )
    assert np.allclose(decode_embeddings(mixed), vectors[:2].astype(np.float32), atol=1e-3)


def test_map_over_the_whole_question_makes_fewer_calls(tmp_path) -> None:
    counts = {}
    for scope in ("subquery", "query"):
        llm = FakeLLM(is_relevant=lambda q, p: True)
        engine = _engine(tmp_path, llm=llm, map_scope=scope, max_chunks_per_map_group=4)
        result = engine.answer("tide bread volcano glacier", budget=12, trace=True)
        counts[scope] = llm.tasks.count("map_claims")
        assert result.claims and result.to_json()["cost"]["relevance_tests"] <= 12
    assert counts["query"] < counts["subquery"]
    assert counts["query"] == 3  # 12 relevant chunks, 4 per call


def test_cli_query_prints_the_json_contract(tmp_path, monkeypatch, hash_embedder) -> None:
    from typer.testing import CliRunner

    import lazygraph.embed
    import lazygraph.query.engine as engine_module
    from lazygraph.cli import app

    uri = _corpus().write_delta(tmp_path / "idx", hash_embedder)
    llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    monkeypatch.setenv("LAZYGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(llm))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: hash_embedder)
    runner = CliRunner()
    args = ["query", "--index", uri, "--budget", "6", "--json", "Why does the tide rise?"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert {"answer", "subqueries", "claims", "context_chunk_ids", "cost"} <= set(data)
    assert data["cost"]["relevance_tests"] <= 6 and "[Data: Sources (" in data["answer"]
    result = runner.invoke(app, ["query", "--index", uri, "--preset", "SS_8K", "Why does the tide rise?"])
    assert result.exit_code == 0 and "[Data: Sources (" in result.stdout


def test_relevant_chunks_the_model_skips_still_reach_the_claims(tmp_path) -> None:
    # The model's reply cites only passage 1 of each group; the other relevant chunks are quoted.
    reply = json.dumps({"claims": [{"text": "The tide rises twice a day.", "sources": [1]}]})
    llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower(), map_reply=reply)
    engine = _engine(tmp_path, llm=llm, max_chunks_per_map_group=4)
    result = engine.answer("Why does the tide rise?", budget=12, context_tokens=5000)
    relevant = {c for s in result.subqueries for c in s["relevant_chunk_ids"]}
    assert relevant and relevant <= set(result.context_chunk_ids)
    extracted = [c for c in result.claims if c["extracted"]]
    assert extracted and all(c["source_chunk_ids"][0] in relevant for c in extracted)
    assert len(result.claims) - len(extracted) >= 1  # the model's own claims are kept too


def test_a_repeated_query_is_answered_from_the_llm_cache_across_engines(tmp_path) -> None:
    location = (tmp_path / "llm_cache").as_uri()
    embedder = HashEmbedder()
    snap = _corpus().snapshot(embedder)

    def engine(llm: FakeLLM) -> QueryEngine:
        settings = load_settings(home=tmp_path, query={"llm_cache": {"location": location}})
        # Roles built by the engine (not fixed ones) get the cache, as the CLI's and the batch's do.
        return QueryEngine(settings, snap, roles=lambda role: fake_roles(llm), embedder=embedder)

    question = "Why does the tide rise?"
    first_llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    first = engine(first_llm).answer(question, budget=6).to_json()
    later_llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    again = engine(later_llm).answer(question, budget=6).to_json()  # a new engine reads the table
    assert first["cost"]["llm_calls"] > 0 and first["cost"]["llm_cache_hits"] == 0
    assert later_llm.tasks == [] and later_llm.relevance_batches == []
    assert again["cost"]["llm_calls"] == 0 and again["cost"]["prompt_tokens"] == 0
    assert again["cost"]["llm_cache_hits"] == first["cost"]["llm_calls"]  # every test and completion
    assert (
        again["cost"]["llm_cached_tokens"]
        == first["cost"]["prompt_tokens"] + first["cost"]["completion_tokens"]
    )
    assert (
        again["answer"] == first["answer"]
        and again["cost"]["relevance_tests"] == first["cost"]["relevance_tests"]
    )


def test_the_llm_cache_can_be_turned_off(tmp_path) -> None:
    settings = load_settings(home=tmp_path, query={"llm_cache": {"enabled": False}})
    llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    embedder = HashEmbedder()
    snap = _corpus().snapshot(embedder)
    engine = QueryEngine(settings, snap, roles=lambda role: fake_roles(llm), embedder=embedder)
    engine.answer("Why does the tide rise?", budget=3)
    calls = len(llm.tasks)
    engine.answer("Why does the tide rise?", budget=3)
    assert len(llm.tasks) == 2 * calls and engine.llm_cache() is None
    assert not (tmp_path / "llm_cache").exists()


def _reduce_prompt(version: int, items: list, scope: str = "local", answer_reply: str | None = None):
    snap = TinyIndex(texts=["The tide rises twice a day. It never rises at noon."], doc_ids=["d0"]).snapshot()
    seen: list[str] = []
    llm = FakeLLM() if answer_reply is None else FakeLLM(answer_reply=answer_reply)
    chat = llm._chat

    def recording_chat(messages, **kwargs):
        seen.append(messages[-1]["content"])
        return chat(messages, **kwargs)

    llm._chat = recording_chat
    qs = QuerySettings(prompts={"reduce": version})
    answer = reduce_answer(
        "How often?",
        items,
        snap,
        llm,
        qs,
        expanded_query="How often does the tide rise each day?",
        scope=scope,
    )
    return seen[-1], answer


@pytest.mark.parametrize("version", [2, 3, 4])
def test_reduce_prompt_asks_the_expanded_query_or_the_question(version: int) -> None:
    claim = Claim(text="The tide rises twice a day.", chunks=[0], subquery=0, community=0)
    asked, _ = _reduce_prompt(version, [claim])
    asked = asked.split("Question: ")[1]
    if version == 2:  # the method as first built: the expanded query only
        assert asked.startswith("How often does the tide rise each day?") and "How often?\n" not in asked
    elif version == 3:
        assert asked.startswith("How often?\n") and "spelled out: How often does the tide rise" in asked
    else:  # the user's question leads; the expanded query says what to cover
        assert asked.startswith("How often?\n") and "covers: How often does the tide rise" in asked


def test_each_claim_is_shown_beside_the_sentences_it_came_from() -> None:
    claim = Claim(text="The tide rises at noon", chunks=[0], subquery=0, community=0)
    item = Evidence(0, "Tides\nThe tide rises twice a day. It never rises at noon.", [claim])
    prompt, answer = _reduce_prompt(4, [item])
    fact = prompt.split('<fact id="1">', 1)[1].split("</fact>", 1)[0]
    # the source sentences first (with the negation the claim lost), then the claim
    assert fact.index("It never rises at noon.") < fact.index("Claims drawn from it: The tide rises at noon.")
    assert answer.sentences[0].chunk_ids == ["c0000"]


def test_a_global_question_gets_a_report_one_theme_at_a_time() -> None:
    snap = TinyIndex(
        texts=["The tide rises twice a day.", "Storms break walls.", "Gulls nest here."]
    ).snapshot()
    items = [
        Evidence(0, "Tides\nThe tide rises twice a day.", theme=3),
        Evidence(1, "Storms\nStorms break walls.", theme=5),
        Evidence(2, "Gulls\nGulls nest here.", theme=3),
    ]
    items = [items[0], items[2], items[1]]  # the context keeps each theme's sources together
    replies = {
        "The tide rises": '{"title": "Tides", "sentences": [{"text": "The tide rises twice.", "facts": [1]},'
        ' {"text": "Gulls nest.", "facts": [2]}]}',
        "Storms break": '{"title": "Storms.", "sentences": [{"text": "Storms break walls.", "facts": [1]}]}',
    }
    llm = FakeLLM()
    prompts: list[str] = []

    def per_theme(messages, **kwargs):
        user = messages[-1]["content"]
        prompts.append(user)
        reply = next(r for key, r in replies.items() if key in user)
        return ChatResult(text=reply, prompt_tokens=10, completion_tokens=10, seconds=0.0)

    llm._chat = per_theme
    answer = reduce_answer("What happens on this coast?", items, snap, llm, QuerySettings(), scope="global")
    # one call per theme, each reading its own sources numbered from 1
    assert len(prompts) == 2 and '<fact id="2">Gulls' in prompts[0] and '<fact id="1">Storms' in prompts[1]
    assert answer.themes == ["Tides", "Storms"]
    assert answer.text.splitlines() == [
        "Tides: The tide rises twice. [Data: Sources (c0000)] Gulls nest. [Data: Sources (c0002)]",
        "Storms: Storms break walls. [Data: Sources (c0001)]",
    ]
    # a theme whose sources say nothing is left out; with none left the report says so
    replies = {
        "The tide rises": '{"title": "x", "sentences": []}',
        "Storms break": '{"title": "y", "sentences": []}',
    }
    empty = reduce_answer("What happens?", items, snap, llm, QuerySettings(), scope="global")
    assert empty.text == NO_REPORT and empty.themes == []


def test_a_report_spreads_over_themes_before_reading_a_theme_twice() -> None:
    groups = [list("abcdefgh"), list("ij"), list("klmnop"), list("q")]
    # every theme's first part of at most 4 sources, then the second parts, at most 5 parts, in theme order
    assert _theme_parts(groups, 4, 5) == [list("abcd"), list("efgh"), list("ij"), list("klmn"), list("q")]
    assert _theme_parts(groups, 4, 3) == [list("abcd"), list("ij"), list("klmn")]


def test_a_theme_titled_with_the_question_is_titled_with_its_topics() -> None:
    question = "What are the main themes and tensions in Port Ellery's debate about the array?"
    assert _echoes("Port Ellery's debate about the array", question)
    assert not _echoes("Flood damage in the harbour", question)
