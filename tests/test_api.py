"""The public API on a small index, with the fake LLM and embedder: typed answers and costs, the trace
of one query, reading tables and chunks, and the refusals that come before any run starts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph import api

TEXTS = [
    "The tide rises twice a day because the moon pulls the ocean water.",
    "Bread dough rises because yeast ferments sugar into gas.",
    "A volcano erupts when magma pressure breaks the crust.",
    "The tide turns at the harbour mouth in the evening.",
]


@pytest.fixture()
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> api.Index:
    """A four-chunk index with a documents table, answered by the fake LLM and embedder."""
    from deltalake import write_deltalake

    import lazygraph.embed
    import lazygraph.query.engine as engine_module

    index = TinyIndex(
        texts=TEXTS, doc_ids=["d1", "d2", "d3", "d1"], titles=["Tides", "Bread", "Lava", "Tides"]
    )
    index.communities = {"all": (0, None)}
    index.memberships = [(i, 0, "all") for i in range(len(TEXTS))]
    uri = index.write_delta(tmp_path / "idx", HashEmbedder())
    documents = {"doc_id": ["d1", "d2", "d3"], "title": ["Tides", "Bread", "Lava"], "source": ["a", "b", "c"]}
    write_deltalake(str(tmp_path / "idx" / "documents"), pa.table(documents))
    llm = FakeLLM(is_relevant=lambda q, p: "tide" in p.lower())
    monkeypatch.setenv("LAZYGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(llm))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: HashEmbedder())
    return api.open_index(uri, settings=api.load_settings())


def test_a_query_returns_a_typed_answer_whose_record_is_the_json_contract(tiny: api.Index) -> None:
    answer = tiny.query("Why does the tide rise?", budget=4)
    assert isinstance(answer, api.Answer) and isinstance(answer.cost, api.Cost)
    record = answer.to_json()
    assert record["answer"] == answer.text and "[Data: Sources (" in answer.text
    assert [s.text for s in answer.sentences] == [s["text"] for s in record["sentences"]]
    assert [s.chunk_id for s in answer.sources] == [s["chunk_id"] for s in record["sources"]]
    assert answer.cost.relevance_tests == record["cost"]["relevance_tests"] <= 4
    cost = record["cost"]
    assert (
        answer.cost.llm_tokens
        == cost["prompt_tokens"] + cost["completion_tokens"] + cost["llm_cached_tokens"]
    )
    assert json.loads(json.dumps(record))["method"] == "lazy"


def test_every_method_of_the_registry_answers(tiny: api.Index) -> None:
    assert api.methods() == ["lazy", "vector", "hybrid"]
    for method in api.methods():
        answer = tiny.query("When does the tide turn?", method=method, budget=2)
        assert answer.method == method and answer.sentences
        assert (answer.subqueries != []) == (method == "lazy")  # only the lazy search refines


def test_the_trace_keeps_every_step_of_one_query(tiny: api.Index) -> None:
    traced = tiny.trace("Why does the tide rise?", budget=4)
    assert traced.answer.budget == 4 and traced.answer.trace
    assert traced.judged and all(j.subquery >= 1 and j.chunk_id.startswith("c") for j in traced.judged)
    assert {j.chunk_id for j in traced.judged if j.passed} <= {"c0000", "c0003"}
    assert sum(len(s.communities_by_level) > 0 for s in traced.searches) >= 1
    kept = [claim.rank for claim in traced.ranked_claims if claim.kept]
    assert traced.claims_within(10**6) == [claim.rank for claim in traced.ranked_claims]
    assert set(kept) <= set(traced.claims_within(traced.context_limit))
    assert traced.context and sum(item.tokens for item in traced.context) <= traced.context_limit


def test_tables_and_chunks_are_read_as_of_the_last_complete_run(tiny: api.Index) -> None:
    chunks = tiny.table("chunks")
    assert list(chunks.chunk_id) == ["c0000", "c0001", "c0002", "c0003"]
    with pytest.raises(api.InputError, match="unknown table"):
        tiny.table("no_such_table")
    shown = tiny.show("d1")
    assert [c.chunk_id for c in shown] == ["c0000", "c0003"] and shown[0].chunks_in_document == 2
    assert "The tide rises twice a day" in api.format_chunks(shown)
    assert api.has_index(tiny.location, tiny.settings)


def test_an_empty_question_is_refused_before_the_index_is_read(tmp_path: Path) -> None:
    nowhere = api.open_index(str(tmp_path / "no-index"), settings=api.load_settings())
    with pytest.raises(api.InputError, match="the question is empty"):
        nowhere.query("   ")
    assert not api.has_index(str(tmp_path / "no-index"), nowhere.settings)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"once": True}, "--once goes with --watch"),
        ({"watch": True}, "--watch needs --input"),
        ({"delete": "ids.txt", "append": True}, "--delete cannot be combined"),
        ({}, "give --input DOCS"),
    ],
)
def test_index_refuses_what_it_cannot_run_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict, message: str
) -> None:
    monkeypatch.setattr("lazygraph.runtime.spark.get_spark", lambda *a, **k: pytest.fail("Spark started"))
    with pytest.raises(api.InputError, match=message):
        api.index(index=str(tmp_path / "index"), settings=api.load_settings(), **options)


def test_benchmarks_run_from_the_command_line_with_their_own_options() -> None:
    from typer.testing import CliRunner

    from lazygraph.cli import app

    assert {"query", "baselines", "embedding", "llm"} <= set(api.benchmarks())
    args = ["bench", "query", "--synthetic-chunks", "400", "--budgets", "3"]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "non-LLM search time per subquery, 400 chunks" in result.stdout
    with pytest.raises(api.ConfigError, match="unknown benchmark"):
        api.run_benchmark("no-such-benchmark", [], api.load_settings())
