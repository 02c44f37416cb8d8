"""The communities stage of an index run: the hierarchy over the kept graph, and chunk links.

Like the graph, the three community tables are replaced whole, each in one Delta transaction.
"""

from __future__ import annotations

from lazygraph.communities.chunks import chunk_communities
from lazygraph.communities.hierarchy import detect_communities
from lazygraph.graph.cooccurrence import GraphTables
from lazygraph.run_context import RunContext
from lazygraph.tables import CHUNK_COMMUNITIES, COMMUNITIES, CONCEPT_COMMUNITIES


def rebuild_communities(ctx: RunContext, graph: GraphTables) -> dict[str, int]:
    """Detect and write the communities; returns the number of communities per level."""
    concepts = graph.concepts.filter("kept")
    edges = graph.edges.filter("kept")
    result = detect_communities(
        ctx.spark,
        ctx.settings,
        concepts.select("concept_id", "name", "frequency"),
        edges.select("src", "dst", "weight", "cooccurrence"),
        mentions_df=graph.mentions.select("chunk_id", "concept_id"),
        console=ctx.console,
    )
    ctx.store.overwrite(COMMUNITIES, result.communities)
    ctx.store.overwrite(CONCEPT_COMMUNITIES, result.concept_communities)
    ctx.store.overwrite(CHUNK_COMMUNITIES, chunk_communities(graph.mentions, result.concept_communities))
    per_level = result.stats.get("communities_per_level", [])
    return {f"level_{i}": n for i, n in enumerate(per_level)}
