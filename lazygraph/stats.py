"""Index statistics read straight from the Delta tables with ``deltalake`` (no JVM, no Spark).

``index_stats`` gives row counts per table, degree and weight distributions of the pruned graph,
kept/pruned concepts and edges, community counts and size distributions per level, and checks
that parent links and concept memberships are consistent.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from lazygraph import manifest, tables
from lazygraph.settings import Settings
from lazygraph.tables.read import count_rows, read_table


def _columns(table: Any, columns: list[str], settings: Settings) -> pa.Table:
    return read_table(table, settings, columns=columns)


def distribution(values: np.ndarray) -> dict[str, float]:
    """min / p50 / p90 / max / mean of a numeric array (zeros when empty)."""
    if values.size == 0:
        return {"n": 0, "min": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0, "mean": 0.0}
    values = values.astype(np.float64)
    return {
        "n": int(values.size),
        "min": round(float(values.min()), 4),
        "p50": round(float(np.percentile(values, 50)), 4),
        "p90": round(float(np.percentile(values, 90)), 4),
        "max": round(float(values.max()), 4),
        "mean": round(float(values.mean()), 4),
    }


def _graph_stats(concepts: pa.Table | None, edges: pa.Table | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if concepts is not None:
        kept = concepts.filter(pc.field("kept"))
        out["concepts_kept"] = kept.num_rows
        out["concepts_pruned"] = concepts.num_rows - kept.num_rows
        out["entities_kept"] = kept.filter(pc.field("kind") == "entity").num_rows
        out["degree"] = distribution(kept["degree"].to_numpy())
        out["concept_frequency"] = distribution(kept["frequency"].to_numpy())
    if edges is not None:
        kept_edges = edges.filter(pc.field("kept"))
        out["edges_kept"] = kept_edges.num_rows
        out["edges_pruned"] = edges.num_rows - kept_edges.num_rows
        out["edge_weight"] = distribution(kept_edges["weight"].to_numpy())
        out["edge_cooccurrence"] = distribution(kept_edges["cooccurrence"].to_numpy())
    return out


def community_levels(
    communities: pa.Table, memberships: pa.Table | None, kept_concepts: set[str]
) -> dict[str, Any]:
    """Per-level counts and size distributions, plus parent-link and membership checks."""
    rows = communities.to_pylist()
    ids_by_level: dict[int, set[str]] = {}
    for row in rows:
        ids_by_level.setdefault(row["level"], set()).add(row["community_id"])
    levels = []
    broken_parents = 0
    for level in sorted(ids_by_level):
        at_level = [r for r in rows if r["level"] == level]
        for row in at_level:
            parent = row["parent_id"]
            if (level == 0 and parent is not None) or (
                level > 0 and parent not in ids_by_level.get(level - 1, set())
            ):
                broken_parents += 1
        levels.append(
            {
                "level": level,
                "communities": len(at_level),
                "size": distribution(np.array([r["size"] for r in at_level])),
                "n_chunks": distribution(np.array([r["n_chunks"] for r in at_level])),
            }
        )
    report: dict[str, Any] = {
        "levels": levels,
        "parent_links_ok": broken_parents == 0,
        "broken_parent_links": broken_parents,
    }
    if memberships is not None:
        pairs = memberships.select(["concept_id", "level"]).to_pylist()
        per_level: dict[int, list[str]] = {}
        for pair in pairs:
            per_level.setdefault(pair["level"], []).append(pair["concept_id"])
        complete = all(len(ids) == len(set(ids)) and set(ids) == kept_concepts for ids in per_level.values())
        report["every_kept_concept_in_one_community_per_level"] = complete
    return report


def index_stats(settings: Settings, index: str) -> dict[str, Any]:
    """The statistics report of an index as of its last complete run (see module doc).

    IndexNotFoundError if there is no index, IndexStateError if its first build never completed.
    """
    index_uri = tables.normalise_index_uri(index)
    # Every table as of the last complete run, like the query side: a run in progress is not counted.
    last, versions = manifest.complete_versions(index_uri, settings)
    pinned = manifest.open_complete(index_uri, tables.ALL_TABLES, versions, settings)
    history = tables.open_delta(tables.table_uri(index_uri, tables.MANIFEST), settings=settings)
    opened = {name: pinned.get(name) for name in tables.ALL_TABLES if name != tables.MANIFEST}
    report: dict[str, Any] = {"index": index_uri}
    report["rows"] = {name: (count_rows(t, settings) if t is not None else 0) for name, t in opened.items()}
    report["rows"][tables.MANIFEST] = count_rows(history, settings)
    report["last_run"] = {
        "run_id": last["run_id"],
        "mode": last["mode"],
        "status": last["status"],
        "finished_at": str(last["finished_at"]),
        "timings": json.loads(last["timings_json"] or "{}"),
    }
    report["communities_update"] = manifest.community_record(last)
    concepts = opened[tables.CONCEPTS]
    edges = opened[tables.EDGES]
    concept_rows = (
        _columns(concepts, ["concept_id", "kind", "frequency", "degree", "kept"], settings)
        if concepts
        else None
    )
    edge_rows = _columns(edges, ["weight", "cooccurrence", "kept"], settings) if edges else None
    report["graph"] = _graph_stats(concept_rows, edge_rows)
    if opened[tables.COMMUNITIES] is not None:
        kept_ids = (
            set(concept_rows.filter(pc.field("kept"))["concept_id"].to_pylist())
            if concept_rows is not None
            else set()
        )
        memberships = opened[tables.CONCEPT_COMMUNITIES]
        report["communities"] = community_levels(
            read_table(opened[tables.COMMUNITIES], settings),
            _columns(memberships, ["concept_id", "level"], settings) if memberships is not None else None,
            kept_ids,
        )
    else:
        report["communities"] = {"levels": [], "parent_links_ok": True, "broken_parent_links": 0}
    rejected = opened[tables.REJECTED]
    if rejected is not None:
        reasons = _columns(rejected, ["reason"], settings)["reason"].value_counts().to_pylist()
        report["rejected_by_reason"] = {r["values"]: r["counts"] for r in reasons}
    return report


def render_stats(report: dict[str, Any], console: Console) -> None:
    """The report as rich tables."""
    rows = Table(title=f"lazygraph index {report['index']}")
    rows.add_column("table")
    rows.add_column("rows", justify="right")
    for name, count in report["rows"].items():
        rows.add_row(name, f"{count:,}")
    console.print(rows)
    graph = Table(title="graph (kept)")
    for column in ("measure", "n", "min", "p50", "p90", "max", "mean"):
        graph.add_column(column, justify="right" if column != "measure" else "left")
    for key in ("degree", "concept_frequency", "edge_weight", "edge_cooccurrence"):
        if key in report["graph"]:
            d = report["graph"][key]
            graph.add_row(key, *(str(d[k]) for k in ("n", "min", "p50", "p90", "max", "mean")))
    console.print(graph)
    g = report["graph"]
    console.print(
        f"concepts kept {g.get('concepts_kept', 0):,} / pruned {g.get('concepts_pruned', 0):,}; "
        f"edges kept {g.get('edges_kept', 0):,} / pruned {g.get('edges_pruned', 0):,}"
    )
    levels = Table(title="communities")
    for column in ("level", "communities", "size p50", "size p90", "size max", "chunks p50"):
        levels.add_column(column, justify="right")
    for level in report["communities"]["levels"]:
        levels.add_row(
            str(level["level"]),
            f"{level['communities']:,}",
            str(level["size"]["p50"]),
            str(level["size"]["p90"]),
            str(level["size"]["max"]),
            str(level["n_chunks"]["p50"]),
        )
    console.print(levels)
    console.print(f"parent links ok: {report['communities']['parent_links_ok']}")
    update = report.get("communities_update")
    if update:
        console.print(
            f"last community update: {update['update']}; drift since the last full detection "
            f"{update['drift']:.4f} (full detection above {update['threshold']})"
        )
