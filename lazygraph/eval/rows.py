"""Resumable JSON Lines row files of the judge-based evaluations (comparisons, question generation).

Each row is appended and flushed as soon as it is made, so a stopped run resumes where it was. A damaged
last line (the run was killed mid-write) is cut off with a warning; a damaged line before the last is not
a kill's trace, so the file is refused rather than guessed at. The answers evaluation keeps its own reader
(``answers.read_rows``) for its fixed key fields; this one takes the fields a row must have, and reads
every other evaluation's rows (retrieval grids, paired comparisons).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from lazygraph.errors import InputError


def read_row_file(
    path: Path, required: Iterable[str], console: Console, repair: bool = True, what: str = ""
) -> list[dict[str, Any]]:
    """The rows already written to ``path`` (none if it does not exist), each holding ``required``.

    A complete row of another kind (another command's file given as ``--out``) is refused, never cut off.
    With ``repair`` (a file about to be appended to) a damaged last line is cut off the file; without,
    it is only left out. ``what`` names a row in messages (default: a row of this evaluation).
    """
    path = Path(path)
    if not path.exists():
        return []
    wanted = set(required)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    rows: list[dict[str, Any]] = []
    good_end = offset = 0
    for number, line in enumerate(lines, start=1):
        end = offset + len(line)
        if line.strip():
            row = _parse(line)
            if row is not None and not wanted <= set(row):
                lacking = ", ".join(sorted(wanted - set(row)))
                raise InputError(
                    f"{path}:{number} is a row of another kind (it lacks {lacking}); write to another --out"
                )
            if row is None:
                if any(rest.strip() for rest in lines[number:]):
                    raise InputError(
                        f"{path}:{number} is not {what or 'a row of this evaluation'}; "
                        "fix or remove the line, or write to another --out"
                    )
                console.print(
                    f"[yellow]warning:[/] ignoring the damaged last line {number} of {escape(str(path))}"
                )
                break
            rows.append(row)
            good_end = end
        offset = end + 1
    wanted_bytes = raw[:good_end] + b"\n" if good_end else b""
    # Leave the file ending after its last good row, so that appends start a line.
    if repair and raw != wanted_bytes:
        path.write_bytes(wanted_bytes)
    return rows


def _parse(line: bytes) -> dict[str, Any] | None:
    """The line's JSON object, or None for a line that is not one (cut off by a kill, or garbage)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def append_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows and flush, so that a kill loses at most the row being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
        handle.flush()


def sibling(path: Path, suffix: str) -> Path:
    """``work/compare.jsonl`` + ``summary.json`` -> ``work/compare.summary.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{suffix}")
