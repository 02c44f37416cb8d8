"""Which checkpoints a run makes: reliable ones (written to spark.checkpoint_dir, surviving a lost executor)
on any cluster master, local ones on local[*], unless spark.checkpoint says otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lazygraph.runtime.checkpoint import MODE_KEY, checkpoint, checkpoint_mode


class Session:
    def __init__(self, master: str, mode: str | None = None) -> None:
        self.sparkContext = SimpleNamespace(master=master)
        self.conf = SimpleNamespace(
            get=lambda key, default=None: mode if key == MODE_KEY and mode else default
        )


class Frame:
    def __init__(self, session: Session) -> None:
        self.sparkSession = session
        self.calls: list[str] = []

    def checkpoint(self, eager: bool = True) -> str:
        return "reliable"

    def localCheckpoint(self, eager: bool = True) -> str:  # noqa: N802 - Spark's name
        return "local"


@pytest.mark.parametrize(
    ("master", "mode", "expected"),
    [
        ("local[*]", None, "local"),
        ("local[2]", "auto", "local"),
        ("local", None, "local"),
        ("spark://head:7077", None, "reliable"),
        ("yarn", None, "reliable"),
        ("k8s://https://api:6443", None, "reliable"),
        ("local-cluster[2,1,1024]", None, "reliable"),
        ("spark://head:7077", "local", "local"),
        ("local[2]", "reliable", "reliable"),
    ],
)
def test_checkpoints_are_reliable_wherever_executors_can_be_lost(
    master: str, mode: str | None, expected: str
) -> None:
    session = Session(master, mode)
    assert checkpoint_mode(session) == expected
    assert checkpoint(Frame(session)) == expected


def test_no_stage_makes_a_local_checkpoint_of_its_own() -> None:
    """Every lineage cut goes through runtime.checkpoint, so the setting governs all of them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "lazygraph"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "localCheckpoint(" in path.read_text() and path.name != "checkpoint.py"
    ]
    assert not offenders, offenders


def test_a_reliable_checkpoint_is_written_to_the_checkpoint_directory(spark, tmp_path) -> None:
    """On a real session: get_spark gives the running session the configured directory and mode, and a
    reliable checkpoint's rows are files there (which any executor reads again), not blocks in memory."""
    from lazygraph.runtime.spark import get_spark
    from lazygraph.settings import load_settings

    before_dir, before_mode = spark.sparkContext.getCheckpointDir(), spark.conf.get(MODE_KEY)
    assert checkpoint_mode(spark) == "local", "local[2] keeps checkpoints in memory"
    settings = load_settings(
        spark={"checkpoint_dir": str(tmp_path / "checkpoints"), "checkpoint": "reliable"}
    )
    try:
        session = get_spark(settings)
        assert session is spark and checkpoint_mode(session) == "reliable"
        rows = checkpoint(session.range(40).selectExpr("id", "id * id AS square"))
        assert rows.count() == 40 and rows.agg({"square": "sum"}).first()[0] == sum(i * i for i in range(40))
        written = [p for p in (tmp_path / "checkpoints").rglob("part-*") if p.is_file()]
        assert written, "the checkpoint's partitions are files in spark.checkpoint_dir"
    finally:
        spark.sparkContext.setCheckpointDir(before_dir)
        spark.conf.set(MODE_KEY, before_mode)
