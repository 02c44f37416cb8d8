"""The approximate index itself: an IVF index with scalar-quantised codes (faiss), inner product.

Chunk embeddings are unit length, so inner product is cosine similarity. The index is trained once
(k-means of the list centroids and the per-dimension ranges of the scalar quantiser, on a sample);
encoding a vector (``encode``) is then independent of every other vector, which is what lets the index
job encode partitions in parallel and the query side add the stored codes back (``add_codes``)
without the raw vectors. Labels are the snapshot's chunk positions, so a search answers chunk
indices directly.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from lazygraph.errors import SetupError
from lazygraph.settings import VectorIndexSettings


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - the pinned requirement installs it
        raise SetupError(
            "the approximate vector index needs faiss-cpu; install requirements.txt into the environment"
        ) from exc
    return faiss


def default_nlist(n_vectors: int) -> int:
    """2 * sqrt(n) lists, a power of two, at least 1: lists of ~sqrt(n)/2 vectors each (2,048 lists
    at 1M vectors, 8,192 at 10M), few enough to train on a sample of 40 vectors per list."""
    if n_vectors <= 1:
        return 1
    return max(1, 2 ** round(math.log2(2 * math.sqrt(n_vectors))))


def factory_string(nlist: int, cfg: VectorIndexSettings) -> str:
    coarse = f"IVF{nlist}_HNSW32" if cfg.coarse == "hnsw" and nlist > 64 else f"IVF{nlist}"
    return f"{coarse},{cfg.codes}"


class VectorIndex:
    """A trained IVF-SQ index; empty after ``train``, filled by ``add`` or ``add_codes``. ``cfg`` holds
    the search parameters (nprobe, candidates) a query applies."""

    # Where the index was loaded from (its build's URI), which names its shared file's directory.
    origin: str | None = None

    def __init__(self, index: Any, cfg: VectorIndexSettings) -> None:
        self.index = index
        self.cfg = cfg
        self._direct_map = False
        self._configure()

    # ---- building -----------------------------------------------------------------------------------
    @classmethod
    def train(cls, sample: np.ndarray, n_vectors: int, cfg: VectorIndexSettings) -> VectorIndex:
        """Lists and quantiser ranges learnt from ``sample`` (unit vectors) for an index of ``n_vectors``."""
        faiss = _faiss()
        sample = _unit(sample)
        nlist = min(cfg.nlist or default_nlist(n_vectors), max(1, len(sample)))
        index = faiss.index_factory(sample.shape[1], factory_string(nlist, cfg), faiss.METRIC_INNER_PRODUCT)
        ivf = faiss.extract_index_ivf(index)
        ivf.cp.seed = cfg.seed
        # 10 rounds instead of faiss's 25: the lists only need to partition the space roughly (recall
        # comes from nprobe), and training is the costliest step of a build on few cores.
        ivf.cp.niter = 10
        # k-means needs ~40 points per centroid to be stable; faiss warns (not fails) with fewer.
        ivf.cp.max_points_per_centroid = max(256, math.ceil(len(sample) / nlist))
        index.train(sample)
        return cls(index, cfg)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    @property
    def nlist(self) -> int:
        return int(_faiss().extract_index_ivf(self.index).nlist)

    @property
    def code_size(self) -> int:
        """Bytes per encoded vector (its list number and its quantised components)."""
        return int(self.index.sa_code_size())

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """(n, code_size) uint8 codes of ``vectors`` (normalised here): list number plus quantised vector."""
        return self.index.sa_encode(_unit(vectors))

    def add_codes(self, codes: np.ndarray, labels: np.ndarray) -> None:
        """Add encoded vectors under ``labels`` (chunk positions)."""
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        if codes.ndim != 2 or codes.shape[1] != self.code_size:
            raise ValueError(f"codes of {codes.shape} do not match this index ({self.code_size} bytes each)")
        ivf = _faiss().extract_index_ivf(self.index)
        if ivf.direct_map.type != _faiss().DirectMap.NoMap:
            # faiss's array direct map refuses adds under given labels; it is rebuilt on next need.
            ivf.set_direct_map_type(_faiss().DirectMap.NoMap)
        self.index.add_sa_codes(codes, np.ascontiguousarray(labels, dtype=np.int64))
        self._direct_map = False

    def add(self, vectors: np.ndarray, labels: np.ndarray) -> None:
        self.add_codes(self.encode(vectors), labels)

    # ---- searching ----------------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest labels to one unit vector, best first, and their similarities (as decoded
        from the codes); fewer when the index holds fewer."""
        k = min(int(k), self.ntotal)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        scores, labels = self.index.search(q, k)
        found = labels[0] >= 0
        return labels[0][found], scores[0][found]

    def similarities(self, labels: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Similarity of the vectors under ``labels`` to ``query``, decoded from their codes."""
        labels = np.ascontiguousarray(labels, dtype=np.int64)
        if len(labels) == 0:
            return np.zeros(0, np.float32)
        self._ensure_direct_map()
        vectors = self.index.reconstruct_batch(labels)
        return vectors @ np.asarray(query, dtype=np.float32)

    def _ensure_direct_map(self) -> None:
        """Label -> code position, built on first need: an array (8 bytes a vector) when labels are
        0..n-1, else a hash table."""
        if self._direct_map:
            return
        faiss = _faiss()
        ivf = faiss.extract_index_ivf(self.index)
        try:
            ivf.make_direct_map(True)
        except RuntimeError:
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
        self._direct_map = True

    def set_nprobe(self, nprobe: int) -> None:
        """Search more lists (recall) or fewer (speed) from now on."""
        self.cfg = self.cfg.model_copy(update={"nprobe": nprobe})
        self._configure()

    def _configure(self) -> None:
        faiss = _faiss()
        ivf = faiss.extract_index_ivf(self.index)
        ivf.nprobe = max(1, min(self.cfg.nprobe, ivf.nlist))
        quantizer = faiss.downcast_index(ivf.quantizer)
        if hasattr(quantizer, "hnsw"):
            # The coarse search must return at least nprobe lists, with room to find the right ones.
            quantizer.hnsw.efSearch = max(2 * ivf.nprobe, 64)

    # ---- storing and sharing ------------------------------------------------------------------------
    def to_bytes(self) -> np.ndarray:
        """The whole index as a uint8 array (faiss's own format)."""
        return _faiss().serialize_index(self.index)

    @classmethod
    def from_bytes(cls, data: np.ndarray, cfg: VectorIndexSettings) -> VectorIndex:
        return cls(_faiss().deserialize_index(np.asarray(data, dtype=np.uint8)), cfg)

    def empty_copy(self) -> VectorIndex:
        """The trained lists and quantiser without vectors (what encoding needs)."""
        clone = VectorIndex.from_bytes(self.to_bytes(), self.cfg)
        clone.index.reset()
        return clone

    def memory_bytes(self) -> int:
        """Bytes held: codes and labels of every vector, centroids, and the direct map when built."""
        ivf = _faiss().extract_index_ivf(self.index)
        per_vector = ivf.code_size + 8 + (8 if self._direct_map else 0)
        return self.ntotal * per_vector + ivf.nlist * self.dim * 4

    def __getstate__(self) -> dict:
        # faiss objects do not pickle; their serialised bytes do (one buffer, no per-list objects). The
        # digest names the shared file a receiving process maps (see ``shared_file``).
        data = self.to_bytes()
        return {"data": data, "cfg": self.cfg, "digest": content_digest(data), "origin": self.origin}

    def __setstate__(self, state: dict) -> None:
        cfg: VectorIndexSettings = state["cfg"]
        if cfg.sharing == "mmap" and state.get("digest"):
            path = shared_file(state["data"], state["digest"], cfg, state.get("origin"))
            index = _faiss().read_index(str(path), _faiss().IO_FLAG_MMAP | _faiss().IO_FLAG_READ_ONLY)
        else:
            index = _faiss().deserialize_index(state["data"])
        self.__init__(index, cfg)
        self.origin = state.get("origin")

    @property
    def mapped(self) -> bool:
        """Whether the vectors are read from a memory-mapped file (shared with other processes)."""
        invlists = _faiss().downcast_InvertedLists(_faiss().extract_index_ivf(self.index).invlists)
        return type(invlists).__name__ == "OnDiskInvertedLists"


SHARED_SUFFIX = ".faiss"


def share_root(cfg: VectorIndexSettings) -> Path:
    """This user's private directory of shared index files: ``u<uid>`` under ``vectors.share_dir``
    (default ``<LAZYGRAPH_HOME>/vector-share``), created mode 0700. One that another user owns, or that
    others may write to, is refused: a process maps what it finds there."""
    from lazygraph.settings import default_home

    base = Path(cfg.share_dir) if cfg.share_dir is not None else default_home() / "vector-share"
    root = base / f"u{os.getuid()}"
    try:
        base.mkdir(parents=True, exist_ok=True)
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError as exc:
        raise SetupError(
            f"cannot create the shared vector index directory {root} ({exc}); set vectors.share_dir to a "
            "writable local directory with room for it, or vectors.sharing to 'private'"
        ) from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise SetupError(
            f"{root} must be a directory of this user that no one else can read or write (mode 0700); "
            "remove it, or set vectors.share_dir to another local directory"
        )
    return root


def shared_file(data: np.ndarray, digest: str, cfg: VectorIndexSettings, origin: str | None = None) -> Path:
    """The node-local file holding the serialised index ``data``, written once per machine and user.

    Every query process on a machine maps this one file, so the kernel's page cache holds the codes once
    (a Ray actor otherwise deserialises a private copy: 0.4 GB per million chunks). The file lives in a
    directory only this user can enter (``share_root``), one per index build (``origin``: the build's
    URI, which names the index and the embeddings version), and is named by its content digest; a file
    found there is used only when its content hashes to that digest, else it is written again. Writers
    race harmlessly: each writes a temporary file created exclusively under a random name and renames it
    into place, and a file already mapped stays valid when another rename replaces its name. Files not
    mapped for ``cfg.share_keep_hours`` are removed here, so nightly rebuilds do not fill the disk."""
    root = share_root(cfg)
    folder = root / _origin_folder(origin)
    path = folder / f"{digest}{SHARED_SUFFIX}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if not _holds(path, digest):
            fd, partial = tempfile.mkstemp(dir=folder, prefix=".", suffix=".partial")
            with os.fdopen(fd, "wb") as f:
                f.write(memoryview(np.ascontiguousarray(data, dtype=np.uint8)))
            os.replace(partial, path)
        os.utime(path)  # marks it in use for the clean-up below
    except OSError as exc:
        raise SetupError(
            f"cannot write the shared vector index under {folder} ({exc}); set vectors.share_dir to a "
            "writable local directory with room for it, or vectors.sharing to 'private'"
        ) from exc
    _remove_stale(root, keep=path, hours=cfg.share_keep_hours)
    return path


def content_digest(data: Any) -> str:
    """The digest shared files are named and verified by (BLAKE2b, 128 bits)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _origin_folder(origin: str | None) -> str:
    """``<hash of the index URI>-embeddings-v<version>`` for a build's URI; "unnamed" without one."""
    if not origin:
        return "unnamed"
    index, _, build = origin.rstrip("/").rpartition("/")
    digest = hashlib.sha256(index.encode()).hexdigest()[:16]
    name = "".join(c for c in build if c.isalnum() or c in "-_.")[:64] or "build"
    return f"{digest}-{name}"


def _holds(path: Path, digest: str) -> bool:
    """Whether ``path`` is a regular file (not a link) whose content has ``digest``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        path.unlink()
        return False
    hasher = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            hasher.update(block)
    return hasher.hexdigest() == digest


def _remove_stale(root: Path, keep: Path, hours: float) -> None:
    cutoff = time.time() - hours * 3600
    for other in root.glob(f"*/*{SHARED_SUFFIX}"):
        try:
            if other != keep and other.stat().st_mtime < cutoff:
                other.unlink()  # a process still mapping it keeps its pages
                other.parent.rmdir()  # once empty
        except OSError:
            pass  # another process removed it first, or the folder holds other files


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"expected a (n, dim) matrix of vectors, got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
