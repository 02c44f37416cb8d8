"""Hierarchical concept communities (indexing step 5) and chunk <-> community links (step 6).

Algorithm choice: GraphFrames' ``labelPropagation`` / ``neighborhood_aware_cdlp`` would be the
natural building blocks, but its JVM jar is not available in every deployment (it is not on every
Maven mirror), so communities are computed with plain Spark DataFrame joins and aggregations: a
distributed, modularity-aware, weighted label propagation with Louvain-style coarsening
(``propagation``) for level 0, then Louvain inside each level-0 community, one community per Spark
task, for the deeper levels (``refine``, assembled in ``hierarchy``). The graph is never collected
to the driver. Quality is measured as modularity against single-machine Leiden
(``quality``).
"""

from lazygraph.communities.chunks import chunk_communities
from lazygraph.communities.hierarchy import CommunityTables, community_edge_weights, detect_communities
from lazygraph.communities.quality import leiden_modularity, leiden_partition, local_modularity, modularity

__all__ = [
    "CommunityTables",
    "chunk_communities",
    "community_edge_weights",
    "detect_communities",
    "leiden_modularity",
    "leiden_partition",
    "local_modularity",
    "modularity",
]
