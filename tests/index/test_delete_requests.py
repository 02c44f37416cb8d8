"""`lazygraph index --delete` refuses requests it cannot carry out before Spark starts or anything is
written: combined with --append or --input, a file that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazygraph import pipeline
from lazygraph.cli import app, main
from lazygraph.errors import InputError
from lazygraph.ingest.deletion import check_ids_path
from lazygraph.settings import load_settings


@pytest.fixture()
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to start a run fails the test: every refusal must come first."""

    def started(*args, **kwargs):
        raise AssertionError("a refused request must not start a run")

    monkeypatch.setattr(pipeline, "build_index", started)
    monkeypatch.setattr("lazygraph.runtime.spark.get_spark", started)


@pytest.mark.parametrize(
    "extra", [["--append"], ["--input", "docs.jsonl"], ["--append", "--input", "docs.jsonl"]]
)
def test_delete_with_new_documents_is_refused(
    tmp_path: Path, extra: list[str], no_spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("a\n")
    args = ["index", "--index", str(tmp_path / "index"), "--delete", str(ids), *extra]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, InputError)
    assert "--delete cannot be combined with --append or --input" in str(result.exception)
    monkeypatch.setattr("sys.argv", ["lazygraph", *args])
    with pytest.raises(SystemExit) as stopped:  # the command line prints it as one error, status 2
        main()
    assert stopped.value.code == 2


def test_a_missing_ids_file_is_refused_before_spark(tmp_path: Path, no_spark) -> None:
    with pytest.raises(InputError, match="does not exist"):
        check_ids_path(str(tmp_path / "missing.txt"))
    with pytest.raises(InputError, match="does not exist"):
        pipeline.delete_documents(load_settings(), str(tmp_path / "missing.txt"), str(tmp_path / "i"), None)


def test_neither_input_nor_delete_is_refused(tmp_path: Path, no_spark) -> None:
    result = CliRunner().invoke(app, ["index", "--index", str(tmp_path / "index")])
    assert isinstance(result.exception, InputError) and "--delete IDS" in str(result.exception)
