"""Raw, length-bounded lines of a JSON Lines file, read by byte range so that Spark tasks share the work.

Spark's own line readers cannot do what validation needs, which is the exact bytes of every line,
its line number, and a record of any line that was too long to read:

- ``textFile`` and ``newAPIHadoopFile`` hand Python a decoded string in which undecodable bytes are
  already U+FFFD, so a document that really contains U+FFFD looks like a broken one;
- the DataFrame text source keeps the bytes (its string column casts to binary unchanged) but gives
  no position, and Hadoop's ``mapreduce.input.linerecordreader.line.maxlength`` drops an over-long
  line silently (``newAPIHadoopFile`` even reports the dropped line's offset as the next line's key),
  so the rejection could not be recorded against the right line.

So each task opens the file itself (a local or shared path with ``open``; a file in an object store or
HDFS through the ``opener`` the reader passes, a pyarrow filesystem built from the storage settings)
and reads its byte range with bounded ``readline`` calls: a line longer than the
limit is consumed block by block and never held whole. Hadoop's rule decides which task reads which
line: a range [start, end) owns the lines that *start* in it, so a task skips the line running into
its start and reads past its end to finish its last line. Lines end at ``\\n`` (a ``\\r`` before it
is dropped); a UTF-8 byte order mark at the start of the file is dropped, as Hadoop does.

Line numbers are global: a first, cheap pass counts the ``\\n`` bytes of every range (one integer
per range reaches the driver), and each range numbers its lines from the sum of the ranges before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple

READ_BLOCK = 1 << 20  # bytes read at a time when counting or skipping
MIN_SPLIT_BYTES = 8 << 20  # smaller files are one range: a task per few lines costs more than it saves
MAX_SPLIT_BYTES = 128 << 20  # Spark's default partition size for files
BOM = b"\xef\xbb\xbf"

# Opens a file for binary reading by its path or URI; the default reads local files.
Opener = Callable[[str], BinaryIO]


def open_local(path: str) -> BinaryIO:
    return open(path, "rb")  # noqa: SIM115 - the callers own the handle in a with block


class Line(NamedTuple):
    number: int  # 1-based line number in the file
    raw: bytes | None  # the line without its line break; None when longer than the limit
    size: int  # bytes of the line without its line break (also when it was not kept)


def plan_splits(size: int, parallelism: int) -> list[tuple[int, int]]:
    """Byte ranges covering ``size`` bytes: about one per core, within [MIN, MAX]_SPLIT_BYTES each."""
    if size <= 0:
        return []
    target = -(-size // max(1, parallelism))
    step = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, target))
    return [(start, min(start + step, size)) for start in range(0, size, step)]


def count_line_breaks(path: str, start: int, end: int, opener: Opener = open_local) -> int:
    """The ``\\n`` bytes in [start, end), read in blocks."""
    count = 0
    with opener(path) as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            block = handle.read(min(READ_BLOCK, left))
            if not block:
                break
            count += block.count(b"\n")
            left -= len(block)
    return count


def first_line_numbers(counts: list[int]) -> list[int]:
    """The number of the first line of each range, from the line breaks counted in each range."""
    numbers, breaks = [], 0
    for count in counts:
        numbers.append(breaks + 1)
        breaks += count
    return numbers


def read_lines(
    path: str, start: int, end: int, first_number: int, max_line_bytes: int, opener: Opener = open_local
) -> Iterator[Line]:
    """The lines that start in [start, end); ``first_number`` is the number of the line at ``start``
    (the line holding byte ``start``, whether or not it starts there)."""
    number = first_number
    with opener(path) as handle:
        pos = start
        if start > 0:
            handle.seek(start - 1)
            if handle.read(1) != b"\n":  # the line running into this range belongs to the previous one
                consumed, _ = _consume_line(handle, b"")
                pos += consumed
                number += 1
        while pos < end:
            raw, consumed, size = _read_line(handle, max_line_bytes, strip_bom=pos == 0)
            if consumed == 0:
                break
            yield Line(number, raw, size)
            pos += consumed
            number += 1


def _read_line(handle: BinaryIO, limit: int, strip_bom: bool) -> tuple[bytes | None, int, int]:
    """(line or None if over ``limit``, bytes consumed including the break, line size without it)."""
    # Room for the limit, a "\r\n" and, on the first line, a byte order mark: a line within the limit
    # always arrives whole, and a longer one is never read past this many bytes at once.
    head = handle.readline(limit + 2 + (len(BOM) if strip_bom else 0))
    bom = len(BOM) if strip_bom and head.startswith(BOM) else 0
    if head and not head.endswith(b"\n"):
        consumed, ended = _consume_line(handle, head)
    else:
        consumed, ended = len(head), head.endswith(b"\n")
    size = consumed - bom - (1 if ended else 0)
    if consumed != len(head):  # the line went on past what was read: too long, not kept
        return None, consumed, size
    line = head[bom : len(head) - (1 if ended else 0)]
    if line.endswith(b"\r"):
        line = line[:-1]
        size -= 1
    return (line if len(line) <= limit else None), consumed, size


def _consume_line(handle: BinaryIO, head: bytes) -> tuple[int, bool]:
    """Read to the end of the current line without keeping it: (bytes consumed, ended with a break)."""
    consumed = len(head)
    while True:
        part = handle.readline(READ_BLOCK)
        consumed += len(part)
        if not part:
            return consumed, False
        if part.endswith(b"\n"):
            return consumed, True
