"""Cutting a DataFrame's lineage where a run must: reliable checkpoints on a cluster, local ones on local[*].

Iterative stages (label propagation, the pending documents, the count deltas) cut their lineage with a
checkpoint, so that a plan does not grow with every iteration and a table write does not re-evaluate
what was read before it. A *local* checkpoint keeps the rows in the executors' block managers: an
executor lost mid-run (a node gone, a spot instance reclaimed, dynamic allocation releasing it) takes
its blocks with it, and the run fails. A *reliable* checkpoint writes them to ``spark.checkpoint_dir``
(HDFS, S3, a shared file system), where any executor reads them again.

``spark.checkpoint``: "auto" (the default) checkpoints reliably on any master but ``local[...]``, where
one process holds every executor and a local checkpoint costs no write; "local" or "reliable" force one.
"""

from __future__ import annotations

import gc
from typing import Any

# The session property get_spark sets from ``spark.checkpoint`` (a runtime property, so a session that
# lazygraph did not build can be given it too).
MODE_KEY = "spark.lazygraph.checkpoint"


def checkpoint(df: Any) -> Any:
    """``df`` computed now and cut from its lineage, reliably or locally as the session is configured.

    Always eager: a lazy checkpoint is cut only by a job Spark runs with ``runJob``, and under adaptive
    execution the first action on it is usually a shuffle-map stage, which leaves the whole lineage
    (and its shuffle files) in place."""
    if checkpoint_mode(df.sparkSession) == "reliable":
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True)


def checkpoint_mode(session: Any) -> str:
    """ "reliable" or "local" for this session."""
    mode = session.conf.get(MODE_KEY, "auto")
    if mode in ("local", "reliable"):
        return mode
    master = session.sparkContext.master
    return "local" if master == "local" or master.startswith("local[") else "reliable"


def release_unreferenced(session: Any) -> None:
    """Ask the JVM for a garbage collection, so that Spark's cleaner removes the shuffle files and
    checkpoint blocks of DataFrames no longer referenced.

    Spark deletes them only once the JVM's collector has found their RDDs unreachable; a large heap
    may go many minutes without the full collection that finds them (Spark forces one only every
    ``spark.cleaner.periodicGC.interval``), while an iterative job writes gigabytes of shuffle files
    a minute. Python's own references are dropped first, since they keep the JVM objects alive."""
    gc.collect()
    session.sparkContext._jvm.System.gc()
