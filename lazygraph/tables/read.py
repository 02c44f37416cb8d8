"""Reading a table's rows without Spark, with a missing or corrupt data file reported as one line.

A Delta table's log names its Parquet files; when one is gone (deleted by hand, a bucket lifecycle rule,
a vacuum run by another tool with a short retention) or is not Parquet any more (truncated by a full
disk, overwritten), pyarrow raises deep in its scanner. ``read_table`` and ``count_rows`` turn that into
``IndexFileError`` naming the table, its version, the file and what to do; the Spark stages get the
same message from ``spark_read_failure`` (``run_context.readable_error``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lazygraph.errors import IndexFileError, LazyGraphError

if TYPE_CHECKING:
    import pyarrow as pa

    from lazygraph.tables import StorageSource

_PARQUET_FILE = re.compile(
    r"((?:[a-z][a-z0-9+.-]*:)?/[^\s'\"\]\[,]*?)/([A-Za-z0-9_]+)/([^/\s'\"\]\[,]+\.parquet)"
)
_MISSING = ("FileNotFound", "No such file", "does not exist", "FILE_NOT_EXIST", "NoSuchKey", "Not Found")
_CORRUPT = ("magic bytes", "not a parquet file", "magic number", "cannot_read_file_footer", "corrupt")


def read_table(
    table: Any, settings: StorageSource = None, *, columns: list[str] | None = None, filter: Any = None
) -> pa.Table:
    """The rows of a deltalake table handle (its version) as an Arrow table."""
    from lazygraph.tables import arrow_dataset

    with reading(table):
        return arrow_dataset(table, settings).to_table(columns=columns, filter=filter)


def count_rows(table: Any, settings: StorageSource = None) -> int:
    from lazygraph.tables import arrow_dataset

    with reading(table):
        return arrow_dataset(table, settings).count_rows()


@contextmanager
def reading(table: Any) -> Iterator[None]:
    """pyarrow's errors on a table's data files become one ``IndexFileError``."""
    import pyarrow as pa

    try:
        yield
    except LazyGraphError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(str(table.table_uri), _version(table), exc) from exc


def _version(table: Any) -> int | None:
    try:
        return int(table.version())
    except Exception:  # noqa: BLE001 - the message is still useful without it
        return None


def unreadable(table_uri: str, version: int | None, exc: BaseException) -> IndexFileError:
    """The one-line error for a data file of ``table_uri`` (at ``version``) that cannot be read."""
    text = str(exc)
    found = _PARQUET_FILE.search(text)
    file = found.group(3) if found else None
    name = table_uri.rstrip("/").rsplit("/", 1)[-1]
    index = table_uri.rstrip("/")[: -len(name) - 1] if "/" in table_uri else table_uri
    return IndexFileError(_message(index, name, version, file, text, exc))


def spark_read_failure(text: str) -> IndexFileError | None:
    """The one-line error for a Spark failure that reads as a missing or corrupt data file of an index
    table (None for any other failure)."""
    if ".parquet" not in text:
        return None
    corrupt = any(marker in text.lower() for marker in _CORRUPT)
    missing = not corrupt and any(marker in text for marker in _MISSING)
    if not (missing or corrupt):
        return None
    found = _PARQUET_FILE.search(text)
    if found is None:
        return None
    index, name, file = found.groups()
    problem = "is missing" if missing else "is not a readable Parquet file"
    return IndexFileError(_advice(index, name, None, f"its data file {file} {problem}"))


def _message(
    index: str, name: str, version: int | None, file: str | None, text: str, exc: BaseException
) -> str:
    lowered = text.lower()
    if any(marker in lowered for marker in _CORRUPT):
        problem = f"its data file {file} is not a readable Parquet file" if file else "a data file is corrupt"
    elif isinstance(exc, FileNotFoundError) or any(marker.lower() in lowered for marker in _MISSING):
        problem = f"its data file {file} is missing" if file else "a data file is missing"
    else:
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
        problem = f"{type(exc).__name__}: {first[:300]}"
    return _advice(index, name, version, problem)


def _advice(index: str, name: str, version: int | None, problem: str) -> str:
    at = f" at version {version}" if version is not None else ""
    return (
        f"table {name} of the index {index}{at} cannot be read: {problem}. The index's files were changed "
        "outside lazygraph: restore the file from a backup, or rebuild the index with "
        f"`lazygraph index --input DOCS --index NEW_DIR`"
    )
