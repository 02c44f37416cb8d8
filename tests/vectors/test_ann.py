"""The IVF-SQ index: recall against exact search, codes added back, decoded similarities, pickling."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from lazygraph.errors import SetupError
from lazygraph.settings import VectorIndexSettings
from lazygraph.vectors.ann import VectorIndex, default_nlist
from lazygraph.vectors.synthetic import ClusteredVectors, exact_top

CFG = VectorIndexSettings(nlist=32, nprobe=8, train_sample=4_000, candidates=50)


@pytest.fixture(scope="module")
def corpus() -> ClusteredVectors:
    return ClusteredVectors(6_000, dim=48, n_centres=60, seed=3, block=2_500)


@pytest.fixture(scope="module")
def filled(corpus: ClusteredVectors) -> VectorIndex:
    index = VectorIndex.train(corpus.block_at(0), corpus.n, CFG)
    for start, vectors in corpus.blocks():
        index.add(vectors, np.arange(start, start + len(vectors)))
    return index


def test_candidates_hold_the_exact_neighbours(corpus, filled) -> None:
    queries = corpus.queries(20)
    truth, _ = exact_top(corpus, queries, 10)
    recalls = [
        len(np.intersect1d(filled.search(q, 50)[0][:10], t)) / 10 for q, t in zip(queries, truth, strict=True)
    ]
    assert np.mean(recalls) >= 0.9
    # one probed list of 32 finds far less: the recall comes from nprobe, not from a trivial corpus
    filled.set_nprobe(1)
    try:
        few = [
            len(np.intersect1d(filled.search(q, 50)[0][:10], t)) / 10
            for q, t in zip(queries, truth, strict=True)
        ]
    finally:
        filled.set_nprobe(CFG.nprobe)
    assert np.mean(few) < np.mean(recalls)


def test_stored_codes_added_back_search_like_the_vectors(corpus, filled) -> None:
    again = filled.empty_copy()
    assert again.ntotal == 0
    for start, vectors in corpus.blocks():
        codes = again.encode(vectors)
        assert codes.shape == (len(vectors), again.code_size) and codes.dtype == np.uint8
        again.add_codes(codes[::-1], np.arange(start, start + len(vectors))[::-1])  # any order
    q = corpus.queries(1)[0]
    assert np.array_equal(again.search(q, 20)[0], filled.search(q, 20)[0])
    with pytest.raises(ValueError, match="bytes each"):
        again.add_codes(np.zeros((2, 3), np.uint8), np.arange(2))


def test_decoded_similarities_are_close_to_exact(corpus, filled) -> None:
    q = corpus.queries(1)[0]
    labels = np.asarray([0, 17, 4_999, 5_999])
    exact = corpus.block_at(0)[labels[:2]] @ q
    decoded = filled.similarities(labels, q)
    assert decoded.shape == (4,)
    assert np.allclose(decoded[:2], exact, atol=0.02)
    found, scores = filled.search(q, 10)
    assert np.allclose(filled.similarities(found, q), scores, atol=1e-4)


def with_cfg(index: VectorIndex, **update) -> VectorIndex:
    return VectorIndex(index.index, index.cfg.model_copy(update=update))


def test_pickled_index_answers_the_same(corpus, filled) -> None:
    q = corpus.queries(2)[1]
    private = with_cfg(filled, sharing="private")
    copy = pickle.loads(pickle.dumps(private))
    assert copy.cfg == private.cfg and copy.ntotal == filled.ntotal
    assert not copy.mapped
    assert np.array_equal(copy.search(q, 30)[0], filled.search(q, 30)[0])


def _shared_files(share_dir: Path) -> list[Path]:
    return list(share_dir.glob(f"u{os.getuid()}/*/*.faiss"))


def test_receivers_on_one_machine_map_one_shared_file(corpus, filled, tmp_path) -> None:
    shared = with_cfg(filled, share_dir=tmp_path)
    payload = pickle.dumps(shared)
    first, second = pickle.loads(payload), pickle.loads(payload)
    files = _shared_files(tmp_path)
    assert len(files) == 1 and not list(tmp_path.rglob("*partial"))
    assert first.mapped and second.mapped
    # the codes are pages of that file, mapped shared: what the kernel counts once per machine
    maps = Path("/proc/self/maps")
    if maps.exists():
        assert any(str(files[0]) in line and " r--s " in line for line in maps.read_text().splitlines())
    q = corpus.queries(3)[2]
    for copy in (first, second):
        assert np.array_equal(copy.search(q, 30)[0], filled.search(q, 30)[0])
        found = copy.search(q, 5)[0]
        assert np.allclose(copy.similarities(found, q), filled.similarities(found, q))


def test_a_changed_index_gets_its_own_file_and_stale_ones_go(corpus, filled, tmp_path) -> None:
    stale = tmp_path / f"u{os.getuid()}" / "0123-embeddings-v000001" / "0123.faiss"
    stale.parent.parent.mkdir(mode=0o700)
    stale.parent.mkdir(mode=0o700)
    stale.write_bytes(b"old")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    smaller = with_cfg(filled.empty_copy(), share_dir=tmp_path, share_keep_hours=1)
    smaller.add(corpus.block_at(0)[:100], np.arange(100))
    pickle.loads(pickle.dumps(with_cfg(filled, share_dir=tmp_path, share_keep_hours=1)))
    copy = pickle.loads(pickle.dumps(smaller))
    assert copy.ntotal == 100
    assert len(_shared_files(tmp_path)) == 2 and not stale.exists() and not stale.parent.exists()


def test_the_shared_file_is_private_and_in_a_folder_per_index_build(filled, tmp_path) -> None:
    built = with_cfg(filled, share_dir=tmp_path)
    built.origin = "file:///data/indexes/corpus/vector_index/embeddings-v000007"
    copy = pickle.loads(pickle.dumps(built))
    [path] = _shared_files(tmp_path)
    assert path.parent.name.endswith("-embeddings-v000007") and copy.origin == built.origin
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    other = with_cfg(filled, share_dir=tmp_path)
    other.origin = "file:///data/indexes/other/vector_index/embeddings-v000007"
    pickle.loads(pickle.dumps(other))
    assert len({p.parent for p in _shared_files(tmp_path)}) == 2, "another index, another folder"


def test_a_tampered_file_of_the_same_size_is_never_mapped(corpus, filled, tmp_path) -> None:
    shared = with_cfg(filled, share_dir=tmp_path)
    payload = pickle.dumps(shared)
    pickle.loads(payload)
    [path] = _shared_files(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # same size, other content
    path.write_bytes(bytes(data))
    copy = pickle.loads(payload)
    q = corpus.queries(2)[0]
    assert np.array_equal(copy.search(q, 30)[0], filled.search(q, 30)[0])
    assert hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest() == path.stem


def test_links_planted_at_predictable_names_are_not_followed(filled, tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    payload = pickle.dumps(with_cfg(filled, share_dir=tmp_path / "share"))
    pickle.loads(payload)
    [path] = _shared_files(tmp_path / "share")
    path.unlink()
    path.symlink_to(victim)  # the final name, pointing elsewhere
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the old scheme's temporary names
        (path.parent / f".{path.name}.{pid}.partial").symlink_to(victim)
    copy = pickle.loads(payload)
    assert copy.mapped and victim.read_text() == "precious"
    assert not path.is_symlink()


def test_a_share_dir_others_can_write_is_refused(filled, tmp_path) -> None:
    root = tmp_path / f"u{os.getuid()}"
    root.mkdir(mode=0o700)
    root.chmod(0o777)
    with pytest.raises(SetupError, match="no one else can read or write"):
        pickle.loads(pickle.dumps(with_cfg(filled, share_dir=tmp_path)))


def test_an_unwritable_share_dir_says_what_to_set(filled, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SetupError, match="vectors.share_dir"):
        pickle.loads(pickle.dumps(with_cfg(filled, share_dir=blocker / "sub")))


def test_search_never_returns_more_than_it_holds() -> None:
    index = VectorIndex.train(np.eye(4, dtype=np.float32).repeat(10, axis=0), 3, CFG)
    index.add(np.eye(4, dtype=np.float32)[:3], np.arange(3))
    labels, scores = index.search(np.eye(4, dtype=np.float32)[1], 10)
    assert len(labels) <= 3 and labels[0] == 1 and scores[0] > 0.9


def test_default_lists_grow_with_the_square_root() -> None:
    assert default_nlist(1) == 1
    assert default_nlist(1_000_000) == 2048
    assert default_nlist(10_000_000) == 8192
