"""JSON Lines files given on the command line (questions, queries, sample corpora).

One reader, so that every command reports a bad file the same way: the file and line number, and
what to do about it. Lines are read with a size limit, so that a file holding one huge line is
refused with that line's number instead of filling the driver's memory.
"""

from __future__ import annotations

import codecs
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazygraph.errors import InputError

# Far above any question or query (a model's window is a few thousand tokens), and above the sample
# documents `lazygraph bench embedding` reads; a longer line is a mistake, not data.
MAX_LINE_BYTES = 16 << 20


def iter_lines(path: Path, max_line_bytes: int | None = None) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line break) of a UTF-8 text file, each line bounded
    by ``max_line_bytes`` (default MAX_LINE_BYTES)."""
    max_line_bytes = max_line_bytes or MAX_LINE_BYTES
    with Path(path).open("rb") as handle:
        for number in itertools.count(1):
            # readline stops at the limit: a line longer than the limit is refused, never read whole.
            raw = handle.readline(max_line_bytes + 2)  # room for the limit and a "\r\n"
            if not raw:
                return
            line = raw.removesuffix(b"\n").removesuffix(b"\r")
            if number == 1:
                line = line.removeprefix(codecs.BOM_UTF8)
            if len(line) > max_line_bytes:
                raise InputError(
                    f"{path}:{number} is longer than {max_line_bytes:,} bytes; "
                    "a question or record must fit on one short line"
                )
            try:
                yield number, line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"{path}:{number} is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
                ) from exc


def iter_json_objects(path: Path, max_line_bytes: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for every non-blank line; InputError names a bad line."""
    for number, line in iter_lines(path, max_line_bytes):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}:{number} is not valid JSON ({exc.msg}); fix or remove the line"
            ) from exc
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number} must be a JSON object, one per line")
        yield number, record
