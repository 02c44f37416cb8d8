"""The LLM cache is read by key through a bounded LRU: opening it reads nothing, a lookup reads only the
partition of its key, and tables written before the partitions keep answering."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lazygraph import tables
from lazygraph.llm.cache import BUCKET, LLMCache, Verdict, _digest, _row, bucket
from lazygraph.settings import Settings
from lazygraph.tables import open_delta
from lazygraph.tables.schemas import LLM_CACHE

MODEL = "llamacpp:model.gguf"


def _keys(n: int, tag: str = "k") -> list[str]:
    return [_digest([tag, i]) for i in range(n)]


def _stored(uri: str, keys: list[str]) -> None:
    """``keys`` written by another process, as verdicts of P(yes) 0.5, in one flush."""
    writer = LLMCache.open(uri)
    for key in keys:
        writer.put_verdict(key, MODEL, Verdict(0.5, 7))
    assert writer.flush() == len(keys)


def test_the_lru_holds_100k_entries_unless_set(tmp_path: Path) -> None:
    assert Settings().query.llm_cache.local_entries == 100_000
    with pytest.raises(ValueError, match="local_entries"):
        Settings(query={"llm_cache": {"local_entries": -1}})


def test_opening_the_cache_reads_no_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    _stored(uri, _keys(50))

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("opening the LLM cache read the table")

    monkeypatch.setattr(tables, "arrow_dataset", no_read)
    monkeypatch.setattr(tables, "open_delta", no_read)
    cache = LLMCache.open(uri)
    assert cache.stats()["stored"] == {"reads": 0, "files": 0, "rows": 0}
    assert cache.stats()["entries"] == 0


def test_a_lookup_reads_only_the_partition_of_its_key(tmp_path: Path) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    keys = _keys(600)
    _stored(uri, keys)
    table = open_delta(uri)
    assert table is not None and table.metadata().partition_columns == [BUCKET]
    buckets = {bucket(k) for k in keys}
    assert len(table.file_uris()) == len(buckets) > 200  # one file per partition the flush wrote

    cache = LLMCache.open(uri)
    assert cache.verdict(keys[0]) == Verdict(0.5, 7)
    assert cache.stats()["stored"] == {"reads": 1, "files": 1, "rows": 1}

    same_bucket = [k for k in keys[1:] if bucket(k) == bucket(keys[0])]
    other_bucket = next(k for k in keys if bucket(k) != bucket(keys[0]))
    assert all(cache.verdicts([*same_bucket, other_bucket]))  # a batch: one read of its two partitions
    assert cache.stats()["stored"] == {"reads": 2, "files": 1 + 2, "rows": 1 + len(same_bucket) + 1}


def test_the_lru_never_holds_more_than_its_size_and_reads_an_evicted_key_again(tmp_path: Path) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    keys = _keys(20)
    _stored(uri, keys)
    cache = LLMCache.open(uri, local_entries=5)
    for key in keys:
        assert cache.verdict(key) is not None
        assert cache.stats()["entries"] <= 5
    assert cache.stats()["stored"]["reads"] == 20

    assert cache.verdict(keys[-1]) is not None  # still held: no read
    assert cache.stats()["stored"]["reads"] == 20
    assert cache.verdict(keys[0]) == Verdict(0.5, 7)  # dropped long ago: read again
    assert cache.stats()["stored"]["reads"] == 21
    assert cache.stats()["verdict"] == {"hits": 22, "misses": 0, "hit_rate": 1.0}


def test_entries_made_here_hit_before_and_after_the_flush_even_past_the_lru(tmp_path: Path) -> None:
    cache = LLMCache.open((tmp_path / "llm_cache").as_uri(), local_entries=2)
    keys = _keys(6)
    for key in keys:
        cache.put_verdict(key, MODEL, Verdict(0.25, 3))
    assert cache.stats()["entries"] == 2 and cache.stats()["pending"] == 6
    assert all(cache.verdicts(keys)) and cache.stats()["stored"]["reads"] == 0  # from the unflushed
    assert cache.flush() == 6
    assert all(cache.verdicts(keys)) and cache.stats()["entries"] <= 2
    assert cache.stats()["verdict"]["misses"] == 0


def test_a_memory_only_cache_is_bounded_too() -> None:
    cache = LLMCache(local_entries=3)
    keys = _keys(10)
    for key in keys:
        cache.put_verdict(key, MODEL, Verdict(0.5, 1))
    assert cache.stats()["entries"] == 3 and cache.stats()["pending"] == 0
    assert cache.verdict(keys[-1]) is not None and cache.verdict(keys[0]) is None


def test_two_actors_on_one_table_see_each_others_flushed_entries(tmp_path: Path) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    first, second = LLMCache.open(uri), LLMCache.open(uri)
    a, b = _keys(1, "a")[0], _keys(1, "b")[0]
    first.put_verdict(a, MODEL, Verdict(0.9, 11))
    assert second.verdict(a) is None  # not flushed yet
    first.flush()
    assert second.verdict(a) == Verdict(0.9, 11)

    assert first.verdict(b) is None  # first has read the table: its handle must move on
    second.put_verdict(b, MODEL, Verdict(0.1, 12))
    second.flush()
    assert first.verdict(b) == Verdict(0.1, 12)


def _old_table(uri: str, keys: list[str]) -> None:
    """A cache table as indexes wrote it before the partitions: no bucket column, unpartitioned."""
    rows = [_row(k, "verdict", MODEL, p_yes=0.75, prompt_tokens=5, completion_tokens=1) for k in keys]
    data = pa.Table.from_pylist(rows, schema=LLM_CACHE.schema).drop_columns([BUCKET])
    write_deltalake(uri, data, mode="append")


def test_a_table_written_before_the_partitions_still_answers_and_grows_in_its_layout(
    tmp_path: Path,
) -> None:
    uri = (tmp_path / "llm_cache").as_uri()
    old_keys, new_key = _keys(30, "old"), _keys(1, "new")[0]
    _old_table(uri, old_keys)

    cache = LLMCache.open(uri)
    assert cache.verdicts(old_keys[:3]) == [Verdict(0.75, 5)] * 3
    cache.put_verdict(new_key, MODEL, Verdict(0.2, 4))
    assert cache.flush() == 1

    table = open_delta(uri)
    assert table is not None and table.metadata().partition_columns == []
    assert BUCKET not in table.schema().to_arrow().names
    later = LLMCache.open(uri)
    assert later.verdicts([old_keys[-1], new_key]) == [Verdict(0.75, 5), Verdict(0.2, 4)]
    assert later.stats()["stored"]["rows"] == 2


def test_a_partition_past_its_file_limit_is_compacted_alone_and_keeps_every_entry(tmp_path: Path) -> None:
    from lazygraph.llm import cache as cache_module

    uri = (tmp_path / "llm_cache").as_uri()
    cache = LLMCache.open(uri)
    hot = ["ab" + k[2:] for k in _keys(20, "hot")]
    cold = next(k for k in _keys(50, "cold") if bucket(k) != "ab")
    cache.put_verdict(cold, MODEL, Verdict(0.3, 2))
    for key in hot:  # one flush each: one more file in partition "ab" each time
        cache.put_verdict(key, MODEL, Verdict(0.6, 9))
        cache.flush()
    table = open_delta(uri)
    assert table is not None

    def files_in(part: str) -> int:
        return len(table.file_uris(file_pruning_predicate=[(BUCKET, "=", part)]))

    assert files_in("ab") <= cache_module._COMPACT_AFTER_FILES < len(hot)
    assert files_in(bucket(cold)) == 1  # a partition under the limit is left alone
    assert LLMCache.open(uri).verdicts([*hot, cold]) == [Verdict(0.6, 9)] * len(hot) + [Verdict(0.3, 2)]


def test_threads_of_one_actor_look_up_and_flush_at_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    uri = (tmp_path / "llm_cache").as_uri()
    _stored(uri, _keys(100, "stored"))
    cache = LLMCache.open(uri, local_entries=10)

    def query(n: int) -> bool:
        mine = _keys(20, f"thread{n}")
        for key in mine:
            cache.put_verdict(key, MODEL, Verdict(0.4, 1))
        cache.flush()
        return all(cache.verdicts(_keys(100, "stored"))) and all(cache.verdicts(mine))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(query, range(8)))
    assert LLMCache.open(uri).verdicts(_keys(20, "thread7")) == [Verdict(0.4, 1)] * 20
