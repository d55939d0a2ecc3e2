"""A trained adapter into a GGUF the llama.cpp engine serves: merged into the base checkpoint in
float32, saved as a Hugging Face checkpoint, converted by llama.cpp's own
``convert_hf_to_gguf.py``.

The converter ships in the source distribution of ``llama-cpp-python`` (``vendor/llama.cpp/``),
not in the installed package, and nowhere else on these machines. It is fetched once with pip
(``pip download --no-deps --no-binary :all: llama-cpp-python==<installed version>``, the
version that will serve the file) and its three parts (the script, its ``conversion`` package,
its ``gguf-py``) are unpacked into a cache folder (``build/llama.cpp-<version>/``).

The output type is ``q8_0`` by default: an adapter's change to a weight is small, and the
coarser the grid the more of it rounding erases (``f16`` keeps more, at twice the size and
memory traffic). Merging in float32 rounds once, at the conversion.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CONVERTER = "convert_hf_to_gguf.py"
#: what the converter needs from the source distribution's vendor/llama.cpp/
CONVERTER_PARTS = (CONVERTER, "conversion/", "gguf-py/")
OUTTYPES = ("q8_0", "f16", "bf16", "f32")
CACHE = Path("build")


def engine_version() -> str:
    """The installed llama-cpp-python's version: the converter must match the engine that serves."""
    return importlib.metadata.version("llama_cpp_python")


def unpack_converter(archive: Path, folder: Path) -> Path:
    """Extract :data:`CONVERTER_PARTS` from a llama-cpp-python source archive into ``folder``
    (staged beside it, then renamed); returns the script's path."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                top, _, rest = member.name.partition("/vendor/llama.cpp/")
                if "/" in top or not rest or not any(rest == p or rest.startswith(p) for p in CONVERTER_PARTS):
                    continue
                member.name = rest
                tar.extract(member, staging, filter="data")
        if not (staging / CONVERTER).is_file():
            raise RuntimeError(f"{archive} holds no vendor/llama.cpp/{CONVERTER}")
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / CONVERTER


def converter(cache: Path = CACHE, version: str | None = None) -> Path:
    """The path of ``convert_hf_to_gguf.py`` for ``version`` (default: the installed engine's),
    fetched into ``cache`` the first time (module docstring)."""
    version = version or engine_version()
    folder = cache / f"llama.cpp-{version}"
    if (folder / CONVERTER).is_file():
        return folder / CONVERTER
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        f"llama-cpp-python=={version}", "-d", tmp], check=True)  # fmt: skip
        archives = sorted(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if not archives:
            raise RuntimeError(f"pip downloaded no source archive of llama-cpp-python=={version}")
        return unpack_converter(archives[0], folder)


def merge_adapter(base_dir: Path, adapter_dir: Path | None, out_dir: Path) -> None:
    """The base checkpoint with the adapter merged into its weights (``None``: the base alone,
    the same-format control), saved in float32 with the base's tokenizer into ``out_dir``."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out_dir)


def convert(script: Path, hf_dir: Path, out: Path, outtype: str) -> Path:
    """Run the converter on ``hf_dir`` into ``out`` (written under a temporary name, then renamed)."""
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype {outtype!r}: one of {', '.join(OUTTYPES)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the script's own gguf-py
    subprocess.run([sys.executable, str(script), str(hf_dir), "--outfile", str(partial), "--outtype", outtype],
                   check=True, env=env)  # fmt: skip
    partial.replace(out)
    return out


def build_gguf(base_dir: Path, adapter_dir: Path | None, out: Path, outtype: str, script: Path) -> Path:
    """Merge (:func:`merge_adapter`) into a temporary checkpoint beside ``out``, convert it, and
    remove the checkpoint. The checkpoint's folder is named after ``out``: the converter writes
    the folder's name into the GGUF's metadata, and the same adapter must give the same file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.stem}-", dir=out.parent) as tmp:
        checkpoint = Path(tmp) / out.stem
        merge_adapter(base_dir, adapter_dir, checkpoint)
        return convert(script, checkpoint, out, outtype)
