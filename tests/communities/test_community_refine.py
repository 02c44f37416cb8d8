"""Deeper community levels (Louvain inside one level-0 community): pure logic, no Spark."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from lazygraph.communities.refine import RefineParams, refine_group, refine_levels


def _params(**overrides) -> RefineParams:
    values = {"levels": 2, "min_split_size": 4, "max_community_size": 10, "resolution": 1.0, "seed": 7}
    return RefineParams(**{**values, **overrides})


def _clique_edges(members: list[int]) -> list[tuple[int, int]]:
    return list(itertools.combinations(members, 2))


def _arrays(edges: list[tuple[int, int]], weight: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    return src, dst, np.full(len(edges), weight)


def _as_sets(parts: list[np.ndarray], nodes: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(int(n) for n in nodes[part]) for part in parts}


def test_every_level_partitions_all_nodes_and_nests() -> None:
    # Three 6-cliques joined by single edges, plus an isolated node.
    groups = [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]
    edges = [e for g in groups for e in _clique_edges(g)] + [(5, 6), (11, 12)]
    nodes = np.arange(19, dtype=np.int64) * 1000 - 5000  # ids need not be 0..n-1
    src, dst, w = _arrays([(nodes[a], nodes[b]) for a, b in edges])
    levels = refine_levels(nodes, src, dst, w, _params(levels=2, max_community_size=6))
    assert len(levels) == 2
    for parts in levels:
        flat = np.concatenate(parts)
        assert sorted(flat.tolist()) == list(range(19))
    level1 = _as_sets(levels[0], nodes)
    assert {frozenset(int(x) for x in nodes[g]) for g in groups} <= level1
    # Each level-2 part lies inside one level-1 part.
    for child in _as_sets(levels[1], nodes):
        assert any(child <= parent for parent in level1)


def test_leaves_are_capped_even_inside_a_clique() -> None:
    members = list(range(30))
    src, dst, w = _arrays(_clique_edges(members))
    nodes = np.arange(30, dtype=np.int64)
    levels = refine_levels(nodes, src, dst, w, _params(levels=1, max_community_size=7))
    sizes = [len(part) for part in levels[-1]]
    assert max(sizes) <= 7
    assert sum(sizes) == 30


def test_small_communities_are_carried_down_whole() -> None:
    src, dst, w = _arrays([(0, 1), (1, 2)])
    nodes = np.arange(3, dtype=np.int64)
    levels = refine_levels(nodes, src, dst, w, _params(levels=2, min_split_size=4))
    assert [len(parts) for parts in levels] == [1, 1]


def test_group_rows_are_labelled_by_their_smallest_member() -> None:
    big = 2**62  # 64-bit ids survive the pandas round trip untouched
    ids = [big + i for i in range(8)]
    edges = _clique_edges(ids[:4]) + _clique_edges(ids[4:]) + [(ids[3], ids[4])]
    rows = [{"part": ids[0], "src": n, "dst": n, "w": None} for n in ids]
    rows += [{"part": ids[0], "src": a, "dst": b, "w": 1.0} for a, b in edges]
    out = refine_group(pd.DataFrame(rows), _params(levels=1, max_community_size=4))
    assert set(out["node"]) == set(ids)
    labels = dict(zip(out["node"], out["label"], strict=True))
    assert {labels[n] for n in ids[:4]} == {ids[0]}
    assert {labels[n] for n in ids[4:]} == {ids[4]}
    assert set(out["level"]) == {1}
