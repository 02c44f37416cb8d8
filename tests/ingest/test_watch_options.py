"""`index --watch`: what is refused before Spark starts, and where the stream keeps its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazygraph.cli import app
from lazygraph.errors import InputError
from lazygraph.ingest.watch import check_source, default_checkpoint


def test_a_landing_folder_is_accepted_and_normalised(tmp_path: Path) -> None:
    assert check_source(str(tmp_path)) == tmp_path.as_uri()


@pytest.mark.parametrize("make", ["file", "missing"])
def test_a_file_or_a_missing_folder_is_refused_with_what_to_do(tmp_path: Path, make: str) -> None:
    source = tmp_path / "landing.jsonl"
    if make == "file":
        source.write_text('{"doc_id": "a", "text": "x"}\n')
    with pytest.raises(InputError, match="landing folder or a Delta table") as raised:
        check_source(str(source))
    assert ("a file" if make == "file" else "not there") in str(raised.value)


def test_each_source_has_its_own_checkpoint_inside_the_index() -> None:
    a = default_checkpoint("file:///data/index", "file:///landing/a")
    assert a.startswith("file:///data/index/_watch/")
    assert a == default_checkpoint("file:///data/index/", "file:///landing/a")  # stable
    assert a != default_checkpoint("file:///data/index", "file:///landing/b")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "x", "--once"], "--once goes with --watch"),
        (["--watch"], "--watch needs --input"),
        (["--watch", "--input", "x", "--delete", "ids.txt"], "--watch needs --input"),
    ],
)
def test_watch_options_that_do_not_go_together_are_refused(tmp_path: Path, args, message) -> None:
    result = CliRunner().invoke(app, ["index", "--index", str(tmp_path / "index"), *args])
    assert isinstance(result.exception, InputError)  # main() prints it as one line, exit status 2
    assert message in str(result.exception)
    assert not (tmp_path / "index").exists()  # refused before anything was written
