"""llama.cpp's converter from a llama-cpp-python source archive: only the script, its
``conversion`` package and its ``gguf-py`` are unpacked, an archive without the script leaves
nothing behind, and a converter already in the cache is used without fetching."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from evaluation.training.gguf_export import CONVERTER, convert, converter, unpack_converter

TOP = "llama_cpp_python-9.9.9"


def archive(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            data = f"# {name}\n".encode()
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_only_the_converter_and_what_it_imports_are_unpacked(tmp_path: Path) -> None:
    source = archive(tmp_path / "src.tar.gz", [
        f"vendor/llama.cpp/{CONVERTER}", "vendor/llama.cpp/conversion/__init__.py",
        "vendor/llama.cpp/conversion/qwen.py", "vendor/llama.cpp/gguf-py/gguf/__init__.py",
        "vendor/llama.cpp/src/llama.cpp", "llama_cpp/llama.py", "vendor/llama.cpp/convert_lora_to_gguf.py",
    ])  # fmt: skip
    script = unpack_converter(source, tmp_path / "llama.cpp-9.9.9")
    found = {p.relative_to(script.parent).as_posix() for p in script.parent.rglob("*") if p.is_file()}
    assert found == {CONVERTER, "conversion/__init__.py", "conversion/qwen.py", "gguf-py/gguf/__init__.py"}


def test_an_archive_without_the_script_leaves_nothing(tmp_path: Path) -> None:
    source = archive(tmp_path / "src.tar.gz", ["vendor/llama.cpp/conversion/__init__.py"])
    with pytest.raises(RuntimeError, match=CONVERTER):
        unpack_converter(source, tmp_path / "llama.cpp-9.9.9")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.tar.gz"]


def test_a_cached_converter_is_used_as_is(tmp_path: Path) -> None:
    cached = tmp_path / "llama.cpp-9.9.9" / CONVERTER
    cached.parent.mkdir()
    cached.write_text("# converter\n")
    assert converter(tmp_path, "9.9.9") == cached


def test_an_unknown_output_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="q4_k_m"):
        convert(tmp_path / CONVERTER, tmp_path, tmp_path / "out.gguf", "q4_k_m")
