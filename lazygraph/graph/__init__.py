"""The concept co-occurrence graph: statistics, NPMI-weighted edges and pruning."""
