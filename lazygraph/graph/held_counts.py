"""A change of counts added to count tables held in one process: what the graph stage's two MERGEs do,
for count tables small enough to read whole (``graph.driver_max_pairs``).

A 1 % append to an index of a few thousand documents changes a few thousand pair rows, and its two
MERGEs each compare them with the whole table and rewrite every file they touch (the pair ids hash
across all of them): about half of the graph stage's seconds. Read whole, the tables take one Arrow
join each, and the stage derives concepts and edges from the same rows without reading them again.

The rules are the MERGEs' (``stage._merge_counts``): a key in both tables gets the sums, and is
deleted when its chunk count (``chunk_frequency``, ``cooccurrence``) reaches zero or below; a key only
in the change is inserted when that count is positive; a key only in the table is kept. A concept in
both keeps its name, and is an entity when either side says so.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

CONCEPT_SUMS = ("frequency", "chunk_frequency", "doc_frequency")


def add_concept_counts(table: pa.Table, change: pa.Table) -> pa.Table:
    """concept_counts after ``change`` (concept_id, name, kind and signed frequencies) is added."""
    names = ["concept_id", "name", "kind", *CONCEPT_SUMS]
    joined = _full_join(table.select(names), change.select(names), ["concept_id"])
    in_table, in_change = _sides(joined)
    sums = {c: pc.add(_zero(joined[c]), _zero(joined[f"{c}_change"])) for c in CONCEPT_SUMS}
    name = pc.if_else(in_table, joined["name"], joined["name_change"])
    entity = pc.fill_null(pc.equal(joined["kind_change"], "entity"), False)
    kind = pc.if_else(
        in_table, pc.if_else(entity, pa.scalar("entity"), joined["kind"]), joined["kind_change"]
    )
    rows = pa.table({"concept_id": joined["concept_id"], "name": name, "kind": kind, **sums})
    return rows.filter(_kept(in_table, in_change, sums["chunk_frequency"]))


def add_pair_counts(table: pa.Table, change: pa.Table) -> pa.Table:
    """pair_counts after ``change`` (src, dst and a signed cooccurrence) is added."""
    names = ["src", "dst", "cooccurrence"]
    joined = _full_join(table.select(names), change.select(names), ["src", "dst"])
    in_table, in_change = _sides(joined)
    total = pc.add(_zero(joined["cooccurrence"]), _zero(joined["cooccurrence_change"]))
    rows = pa.table({"src": joined["src"], "dst": joined["dst"], "cooccurrence": total})
    return rows.filter(_kept(in_table, in_change, total))


def _full_join(table: pa.Table, change: pa.Table, keys: list[str]) -> pa.Table:
    renamed = change.rename_columns([c if c in keys else f"{c}_change" for c in change.column_names])
    # A marker column per side: after a full join, a null marker is a side the key is missing from.
    table = table.append_column("_table", pa.array([True] * table.num_rows, pa.bool_()))
    renamed = renamed.append_column("_change", pa.array([True] * renamed.num_rows, pa.bool_()))
    return table.join(renamed, keys=keys, join_type="full outer", coalesce_keys=True)


def _sides(joined: pa.Table) -> tuple[pa.Array, pa.Array]:
    """Whether each joined row has a table side and a change side."""
    return pc.is_valid(joined["_table"]), pc.is_valid(joined["_change"])


def _zero(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.fill_null(column, 0)


def _kept(in_table: pa.Array, in_change: pa.Array, count: pa.Array) -> pa.Array:
    """Rows a MERGE leaves: the table's own untouched rows, and matched or new rows with a count
    above zero."""
    untouched = pc.and_(in_table, pc.invert(in_change))
    return pc.or_(untouched, pc.greater(count, 0))
