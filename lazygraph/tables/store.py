"""Spark's door to an index's Delta tables: every read, MERGE, overwrite and append goes through here.

Stages ask for a table by name and hand back DataFrames; the store knows where the table lives, its
declared columns and key (``schemas``), and how each write is one Delta transaction. Writes select
the declared columns in their declared order, so a stage cannot add or reorder columns by accident.
"""

from __future__ import annotations

from typing import Any

from lazygraph import tables
from lazygraph.runtime import storage
from lazygraph.tables import schemas

# The Spark property whose value Delta writes into every commit's commitInfo.userMetadata.
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def commit_tag(run_id: str) -> str:
    """The ``userMetadata`` every Delta commit of run ``run_id`` carries (``tables.commits``)."""
    return f"lazygraph:{run_id}"


def commit_author(table: Any) -> str | None:
    """The ``userMetadata`` of a deltalake table handle's latest commit (None when untagged)."""
    try:
        history = table.history(1)
    except Exception:  # noqa: BLE001 - a log deltalake cannot summarise: the author is unknown
        return None
    return history[0].get("userMetadata") if history else None


class IndexStore:
    """The Delta tables of one index, for the Spark stages of a run.

    It remembers the version of each table's last commit made through it (``written``: what the run's
    manifest records, ``tables.commits``), and, once it knows the run (``run_id``), checks that the
    commit is the run's own.
    """

    def __init__(
        self,
        spark: Any,
        index_uri: str,
        run_id: str | None = None,
        settings: tables.StorageSource = None,
    ) -> None:
        self.spark = spark
        self.index_uri = tables.normalise_index_uri(index_uri)
        self.run_id = run_id
        self.settings = settings  # how the deltalake reads of the tables' logs reach the storage
        self.written: dict[str, int] = {}

    def note(self, name: str) -> int:
        """Record the table's version after a write of this run (every write method calls it; call it
        after writing a table through Delta's own API). IndexStateError when the latest commit is not
        this run's: another process wrote the table meanwhile."""
        from lazygraph.errors import IndexStateError

        table = tables.open_delta(self.uri(name), settings=self.settings)
        if table is None:
            raise IndexStateError(f"table {name} of {self.index_uri} vanished while this run wrote it")
        if self.run_id is not None:
            author = commit_author(table)
            if author != commit_tag(self.run_id):
                raise IndexStateError(
                    f"table {name} of {self.index_uri} was written by {author or 'another process'} while "
                    f"run {self.run_id} wrote it; nothing was published. Run the same command again"
                )
        self.written[name] = table.version()
        return self.written[name]

    def restore(self, name: str, version: int) -> int:
        """Make ``version`` the table's content again (Delta RESTORE, one commit); the new version."""
        from delta.tables import DeltaTable

        DeltaTable.forPath(self.spark, self.spark_uri(name)).restoreToVersion(version)
        return self._latest(name)

    def truncate(self, name: str) -> int:
        """Remove every row (one commit); the new version."""
        empty = self.spark.createDataFrame([], schemas.spark_schema(name))
        empty.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
            self.spark_uri(name)
        )
        return self._latest(name)

    def _latest(self, name: str) -> int:
        table = tables.open_delta(self.uri(name), settings=self.settings)
        assert table is not None
        return table.version()

    def uri(self, name: str) -> str:
        return tables.table_uri(self.index_uri, name)

    def spark_uri(self, name: str) -> str:
        """The table's location as Spark reads and writes it (``storage.spark_uri``)."""
        return storage.spark_uri(self.uri(name))

    def exists(self, name: str) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.spark_uri(name))

    def read(self, name: str) -> Any | None:
        """The table's latest version as a DataFrame, or None before its first write."""
        return self.spark.read.format("delta").load(self.spark_uri(name)) if self.exists(name) else None

    def load(self, name: str) -> Any:
        """Like ``read``, for a table the run has already written."""
        return self.spark.read.format("delta").load(self.spark_uri(name))

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
            rows.write.format("delta").mode("append").save(self.spark_uri(name))
            self.note(name)
            return
        source = rows.withColumn("_delete", F.lit(False))
        if deletes is not None:
            source = source.unionByName(
                deletes.select(*keys).withColumn("_delete", F.lit(True)), allowMissingColumns=True
            )
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        values = {f"`{c}`": f"s.`{c}`" for c in rows.columns}
        merge = (
            DeltaTable.forPath(self.spark, self.spark_uri(name))
            .alias("t")
            .merge(source.alias("s"), condition)
        )
        if deletes is not None:
            merge = merge.whenMatchedDelete(condition="s._delete")
        if update:
            changed = " OR ".join(f"NOT (t.`{c}` <=> s.`{c}`)" for c in rows.columns if c not in keys)
            merge = merge.whenMatchedUpdate(condition=f"NOT s._delete AND ({changed})", set=values)
        before = self._latest(name)
        merge.whenNotMatchedInsert(condition="NOT s._delete", values=values).execute()
        self._note_if_committed(name, before)

    def merge_chunk_rows(self, name: str, rows: Any, replaced: Any | None) -> None:
        """Merge rows derived from chunks; the rows of ``replaced`` chunks (a frame of chunk_id) are
        deleted in the same transaction, so a replaced document never shows old and new rows.

        ``replaced`` None means that no document of the batch was in the index (``NewChunks.replaced``):
        chunk ids hash the document id, so every key is new and the rows are appended; a MERGE would
        only compare them with the whole table to find no match."""
        if replaced is None:
            self.append(name, rows)
            return
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
        before = self._latest(name)
        DeltaTable.forPath(self.spark, self.spark_uri(name)).alias("t").merge(
            source.alias("s"), condition
        ).whenMatchedDelete().execute()
        self._note_if_committed(name, before)

    def _note_if_committed(self, name: str, before: int) -> None:
        # Delta commits nothing for a MERGE that changes no row; the table then keeps its last
        # published version, which the manifest takes from the baseline.
        if self._latest(name) != before:
            self.note(name)

    def sync(self, name: str, rows: Any) -> None:
        """One Delta transaction making the table hold exactly ``rows`` (by the table's key): rows of
        new keys inserted, changed rows updated, rows whose key is gone deleted. A MERGE of the
        difference, not an overwrite: files holding only unchanged rows are kept, so a run that changed
        a few rows of a large derived table writes about what changed.

        The difference is computed first and MERGEd (a MERGE of every row with a not-matched-by-source
        delete would join the whole table and rewrite every file of it)."""
        rows = self._declared(name, rows)
        old = self.read(name)
        if old is None:
            self.overwrite(name, rows)
            return
        keys = list(schemas.SPECS[name].keys)
        changed = rows.exceptAll(self._declared(name, old))
        gone = old.select(*keys).join(rows.select(*keys), keys, "left_anti")
        self.merge(name, changed, deletes=gone, update=True)

    def overwrite(self, name: str, rows: Any) -> None:
        """Replace the whole table in one transaction (derived tables rebuilt from their sources)."""
        self._declared(name, rows).write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).save(self.spark_uri(name))
        self.note(name)

    def append(self, name: str, rows: Any) -> None:
        self._declared(name, rows).write.format("delta").mode("append").save(self.spark_uri(name))
        self.note(name)

    def append_rows(self, name: str, rows: list[tuple]) -> None:
        """Append Python rows (in declared column order), e.g. the manifest's one row per run."""
        self.append(name, self.spark.createDataFrame(rows, schemas.spark_schema(name)))

    def _declared(self, name: str, rows: Any) -> Any:
        return rows.select(*[f"`{c}`" for c in schemas.columns(name)])


def table_facts(
    uri: str, settings: tables.StorageSource = None, version: int | None = None
) -> tuple[int, int] | None:
    """(Delta version, row count) of the latest version (or ``version``) read from the log and Parquet
    footers, without Spark."""
    table = tables.open_delta(uri, version, settings=settings)
    if table is None:
        return None
    from lazygraph.tables.read import count_rows

    return table.version(), count_rows(table, settings)
