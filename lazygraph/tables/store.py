"""Spark's door to an index's Delta tables: every read, MERGE, overwrite and append goes through here.

Stages ask for a table by name and hand back DataFrames; the store knows where the table lives, its
declared columns and key (``schemas``), and how each write is one Delta transaction. Writes select
the declared columns in their declared order, so a stage cannot add or reorder columns by accident.
"""

from __future__ import annotations

from typing import Any

from lazygraph import tables
from lazygraph.tables import schemas


class IndexStore:
    """The Delta tables of one index, for the Spark stages of a run."""

    def __init__(self, spark: Any, index_uri: str) -> None:
        self.spark = spark
        self.index_uri = tables.normalise_index_uri(index_uri)

    def uri(self, name: str) -> str:
        return tables.table_uri(self.index_uri, name)

    def exists(self, name: str) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.uri(name))

    def read(self, name: str) -> Any | None:
        """The table's latest version as a DataFrame, or None before its first write."""
        return self.spark.read.format("delta").load(self.uri(name)) if self.exists(name) else None

    def load(self, name: str) -> Any:
        """Like ``read``, for a table the run has already written."""
        return self.spark.read.format("delta").load(self.uri(name))

    def merge(self, name: str, rows: Any, deletes: Any | None = None, update: bool = False) -> None:
        """One Delta transaction: insert new rows (by the table's key), optionally update matched ones,
        delete the keys in ``deletes``.

        Deletions ride in the same MERGE as rows flagged ``_delete``, so a replacement is atomic.
        """
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        keys = list(schemas.SPECS[name].keys)
        rows = self._declared(name, rows)
        if not self.exists(name):
            rows.write.format("delta").mode("append").save(self.uri(name))
            return
        source = rows.withColumn("_delete", F.lit(False))
        if deletes is not None:
            source = source.unionByName(
                deletes.select(*keys).withColumn("_delete", F.lit(True)), allowMissingColumns=True
            )
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        values = {f"`{c}`": f"s.`{c}`" for c in rows.columns}
        merge = DeltaTable.forPath(self.spark, self.uri(name)).alias("t").merge(source.alias("s"), condition)
        if deletes is not None:
            merge = merge.whenMatchedDelete(condition="s._delete")
        if update:
            changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in rows.columns if c not in keys)
            merge = merge.whenMatchedUpdate(condition=f"NOT s._delete AND ({changed})", set=values)
        merge.whenNotMatchedInsert(condition="NOT s._delete", values=values).execute()

    def merge_chunk_rows(self, name: str, rows: Any, replaced: Any | None) -> None:
        """Merge rows derived from chunks; the rows of ``replaced`` chunks (a frame of chunk_id) are
        deleted in the same transaction, so a replaced document never shows old and new rows."""
        deletes = None
        if replaced is not None:
            old = self.read(name)
            if old is not None:
                deletes = old.join(replaced, "chunk_id", "left_semi")
        self.merge(name, rows, deletes=deletes)

    def delete_matching(self, name: str, keys: Any, on: list[str]) -> None:
        """One Delta transaction deleting every row whose ``on`` columns match a row of ``keys``
        (distinct rows: several target rows may match one key, e.g. all mentions of a chunk)."""
        from delta.tables import DeltaTable

        if not self.exists(name):
            return
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in on)
        source = keys.select(*on).distinct()
        DeltaTable.forPath(self.spark, self.uri(name)).alias("t").merge(
            source.alias("s"), condition
        ).whenMatchedDelete().execute()

    def overwrite(self, name: str, rows: Any) -> None:
        """Replace the whole table in one transaction (derived tables rebuilt from their sources)."""
        self._declared(name, rows).write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).save(self.uri(name))

    def append(self, name: str, rows: Any) -> None:
        self._declared(name, rows).write.format("delta").mode("append").save(self.uri(name))

    def append_rows(self, name: str, rows: list[tuple]) -> None:
        """Append Python rows (in declared column order), e.g. the manifest's one row per run."""
        self.append(name, self.spark.createDataFrame(rows, schemas.spark_schema(name)))

    def _declared(self, name: str, rows: Any) -> Any:
        return rows.select(*[f"`{c}`" for c in schemas.columns(name)])


def table_facts(uri: str) -> tuple[int, int] | None:
    """(Delta version, row count) read from the log and Parquet footers, without Spark."""
    table = tables.open_delta(uri)
    if table is None:
        return None
    from lazygraph.tables.read import count_rows

    return table.version(), count_rows(table)
