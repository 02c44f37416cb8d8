"""The budgeted search: z-rule, deepening, depth-1 trees, batching and the budget invariant."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakes import FakeLLM, TinyIndex, two_level_tree

from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import CommunityRanking
from lazygraph.query.search.lazy.match import search_subquery
from lazygraph.settings import QuerySettings


def _search(snapshot, sims, llm, budget, **query):
    qs = QuerySettings(**query)
    ranking = CommunityRanking(snapshot, np.asarray(sims, dtype=np.float32), qs.community_rank_k)
    recorder = CostRecorder(trace_enabled=True)
    result = search_subquery(snapshot, ranking, "question", budget, llm, qs, recorder, "sq")
    return result, recorder


def _names(snapshot, communities):
    return [str(snapshot.community_ids[c]) for c in communities]


def test_communities_are_ranked_by_their_best_chunks() -> None:
    index, members = two_level_tree(n_roots=3, children=1, chunks_per_leaf=3)
    snap = index.snapshot()
    sims = np.zeros(snap.n_chunks)
    sims[members["R2"][0]] = 1.0  # R2 holds the best chunk
    sims[members["R0"][1]] = 0.9
    sims[members["R0"][2]] = 0.8  # R0 holds the 2nd and 3rd
    ranking = CommunityRanking(snap, sims.astype(np.float32), k=2)
    assert _names(snap, ranking.rank(snap.roots())) == ["R2", "R0", "R1"]


def test_z_successive_misses_trigger_deepening_into_relevant_communities_only() -> None:
    index, members = two_level_tree(n_roots=5, children=2, chunks_per_leaf=3)
    for i in members["R0.1"]:
        index.texts[i] += " REL"
    snap = index.snapshot()
    # Roots ranked R0 > R1 > ... by similarity; inside R0 the non-relevant leaf ranks first.
    sims = np.zeros(snap.n_chunks)
    for r in range(5):
        sims[members[f"R{r}"]] = 1.0 - r * 0.1
    sims[members["R0.0"]] += 0.05
    llm = FakeLLM(is_relevant=lambda q, p: "REL" in p)
    result, recorder = _search(
        snap, sims, llm, budget=100, z_successive_misses=2, top_k_chunks_per_community=3
    )
    tested = _names(snap, result.communities_tested)
    # R0 misses (its top 3 chunks are in R0.0), R1 misses: z=2 reached, no relevant community -> stop.
    assert tested == ["R0", "R1"]
    assert result.relevant == []

    # Now R0's top chunks include relevant ones: R0 hits, R1 and R2 miss -> deepen into R0's leaves.
    sims[members["R0.1"]] += 0.1
    llm = FakeLLM(is_relevant=lambda q, p: "REL" in p)
    result, recorder = _search(
        snap, sims, llm, budget=100, z_successive_misses=2, top_k_chunks_per_community=3
    )
    tested = _names(snap, result.communities_tested)
    assert tested[:3] == ["R0", "R1", "R2"]
    assert "R3" not in tested and "R4" not in tested  # never reached: z misses came first
    assert set(tested[3:]) <= {"R0.0", "R0.1"} and tested[3:]  # deepened into R0's sub-communities only
    assert sorted(result.relevant) == sorted(members["R0.1"])
    assert any("deepen" in line for line in recorder.trace)
    assert recorder.communities_visited[0] == 3 and recorder.communities_visited[1] >= 1


def test_each_step_is_one_batch_of_at_most_z_communities() -> None:
    index, members = two_level_tree(n_roots=6, children=1, chunks_per_leaf=2)
    snap = index.snapshot()
    sims = -np.arange(snap.n_chunks, dtype=np.float32)
    llm = FakeLLM(is_relevant=lambda q, p: False)
    result, _ = _search(
        snap,
        sims,
        llm,
        budget=100,
        z_successive_misses=3,
        top_k_chunks_per_community=2,
        relevance_batch_size=16,
    )
    assert llm.relevance_batches == [6]  # 3 communities x 2 chunks in one batch, then z misses: stop
    assert result.tests == 6


def test_tree_of_depth_one_keeps_searching_relevant_leaves(fake_llm) -> None:
    index = TinyIndex(texts=[f"chunk {i}" + (" REL" if i < 7 else "") for i in range(12)])
    index.communities = {"A": (0, None), "B": (0, None)}
    index.memberships = [(i, 0, "A") for i in range(8)] + [(i, 0, "B") for i in range(8, 12)]
    snap = index.snapshot()
    sims = -np.arange(12, dtype=np.float32)
    result, recorder = _search(
        snap, sims, fake_llm, budget=50, z_successive_misses=1, top_k_chunks_per_community=2
    )
    # A (a leaf) stays in the search while it yields relevant chunks; B misses once and is dropped.
    assert sorted(result.relevant) == list(range(7))
    assert snap.n_levels == 1
    assert result.tests <= 50
    assert any("stop" in line for line in recorder.trace)


def test_budget_cuts_a_batch_short(fake_llm) -> None:
    index, _ = two_level_tree(n_roots=4, children=2, chunks_per_leaf=3)
    for i in range(len(index.texts)):
        index.texts[i] += " REL"
    snap = index.snapshot()
    result, _ = _search(snap, -np.arange(snap.n_chunks, dtype=np.float32), fake_llm, budget=5)
    assert result.tests == 5 and sum(fake_llm.relevance_batches) == 5


def test_zero_budget_makes_no_test(fake_llm) -> None:
    index, _ = two_level_tree(n_roots=2, children=1, chunks_per_leaf=2)
    result, _ = _search(index.snapshot(), np.zeros(4, np.float32), fake_llm, budget=0)
    assert result.tests == 0 and fake_llm.relevance_batches == []


@st.composite
def random_search(draw):
    """A random community tree (1-3 levels), chunks placed in random leaves (some in none), random
    similarity order, random relevance, random budget and parameters."""
    n_chunks = draw(st.integers(1, 40))
    levels = draw(st.integers(1, 3))
    index = TinyIndex(texts=[f"chunk {i}" for i in range(n_chunks)])
    frontier = []
    for r in range(draw(st.integers(1, 4))):
        index.communities[f"L0-{r}"] = (0, None)
        frontier.append(f"L0-{r}")
    for level in range(1, levels):
        nxt = []
        for parent in frontier:
            for c in range(draw(st.integers(1, 3))):
                cid = f"L{level}-{parent}-{c}"
                index.communities[cid] = (level, parent)
                nxt.append(cid)
        frontier = nxt
    leaves = frontier
    parent_of = {c: p for c, (_, p) in index.communities.items()}
    for i in range(n_chunks):
        # a chunk may sit in one or two leaves, or in none (then it goes to the synthetic community)
        for leaf in draw(st.lists(st.sampled_from(leaves), max_size=2, unique=True)):
            node, level = leaf, levels - 1
            while node is not None:
                if (i, level, node) not in index.memberships:
                    index.memberships.append((i, level, node))
                node, level = parent_of[node], level - 1
    relevant = draw(st.lists(st.booleans(), min_size=n_chunks, max_size=n_chunks))
    for i, rel in enumerate(relevant):
        if rel:
            index.texts[i] += " REL"
    sims = np.asarray(draw(st.permutations(list(range(n_chunks)))), dtype=np.float32)
    params = {
        "z_successive_misses": draw(st.integers(1, 4)),
        "top_k_chunks_per_community": draw(st.integers(1, 4)),
        "relevance_batch_size": draw(st.integers(1, 10)),
    }
    return index, sims, draw(st.integers(0, 45)), params


@settings(max_examples=150, deadline=None)
@given(random_search())
def test_relevance_tests_never_exceed_the_budget(case) -> None:
    index, sims, budget, params = case
    snap = index.snapshot()
    llm = FakeLLM()
    result, recorder = _search(snap, sims, llm, budget, **params)
    assert result.tests <= budget
    assert sum(llm.relevance_batches) == result.tests == recorder.relevance_tests
    assert len(result.tested) == result.tests  # no chunk is tested twice for one subquery
    assert all(
        b <= max(params["relevance_batch_size"], params["top_k_chunks_per_community"])
        for b in llm.relevance_batches
    )
    # every relevant chunk found was really relevant, and the search found at least one when a
    # relevant chunk is the best-ranked one and the budget allows a test
    assert all("REL" in index.texts[c] for c in result.relevant)
    best = int(np.argmax(sims))
    if budget > 0 and "REL" in index.texts[best]:
        assert best in result.relevant
