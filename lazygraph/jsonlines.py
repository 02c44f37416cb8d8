"""JSON Lines files given on the command line (questions, queries, sample corpora).

One reader, so that every command reports a bad file the same way: the file and line number, and
what to do about it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lazygraph.errors import InputError


def iter_json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for every non-blank line; InputError names a bad line."""
    try:
        with Path(path).open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
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
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text: {exc}") from exc
