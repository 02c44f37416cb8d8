"""The concept co-occurrence graph: statistics, NPMI-weighted edges, pruning and index statistics."""
