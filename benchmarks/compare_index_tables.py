"""Two indexes of the same documents, table by table: are the derived tables equal row by row?

Meant for an index built by appends (or deletes) against a fresh build of the same final corpus. Each
table is read as of its index's last complete run, sorted by its key, and compared on the key and on
every numeric column (floats to 1e-9); text columns and list columns are left out, since the numbers
are what a wrong update would move. Communities are left out on purpose: an append moves them locally,
and their quality is measured against a full detection instead (BENCHMARKS.md, "A living index").

    python benchmarks/compare_index_tables.py APPENDED FRESH      # one JSON object; exit 1 if any differ
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd

from lazygraph import api

KEYS = {
    "chunks": ["chunk_id"],
    "mentions": ["chunk_id", "concept_id"],
    "concept_counts": ["concept_id"],
    "pair_counts": ["src", "dst"],
    "concepts": ["concept_id"],
    "edges": ["src", "dst"],
}


def compared_columns(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    numeric = [c for c in frame.columns if c not in keys and pd.api.types.is_numeric_dtype(frame[c])]
    return keys + numeric


def tables_equal(left: pd.DataFrame, right: pd.DataFrame, keys: list[str]) -> bool:
    if len(left) != len(right):
        return False
    left = left.sort_values(keys).reset_index(drop=True)
    right = right.sort_values(keys).reset_index(drop=True)
    for column in compared_columns(left, keys):
        a, b = left[column], right[column]
        if pd.api.types.is_float_dtype(a):
            if not np.allclose(a.to_numpy(), b.to_numpy(), rtol=0, atol=1e-9, equal_nan=True):
                return False
        elif not a.equals(b):
            return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    first, second = (api.open_index(location) for location in argv)
    report = {}
    try:
        for name, keys in KEYS.items():
            left, right = first.table(name), second.table(name)
            report[name] = {"rows": [len(left), len(right)], "equal": tables_equal(left, right, keys)}
    except api.LazyGraphError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0 if all(entry["equal"] for entry in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
