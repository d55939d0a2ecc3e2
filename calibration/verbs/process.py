"""``process``: process labels per step for the chains of thought of the calibration pools.

For each chosen chain of thought (per problem at most one verified-right and one verified-wrong,
the calibration split only: no development or sealed problem, checked by content hash as the
export checks it), the policy continues each of at most ``--max-steps`` step prefixes
``--rollouts`` times; a step's ``value`` is the fraction of its rollouts that reach an answer the
problem's own checker accepts, ``reaches`` whether any does (Math-Shepherd). Records go in chunks
of ``--chunk-size`` candidates to ``--out`` (each with the code revision, the model's sha256, the
seeds and settings, load average, start and end time), each chunk under the shared model lock;
``--resume`` labels only what no record holds; ``--max-candidates`` and ``--hours`` bound a run.
At the end ``process.jsonl``, ``process_manifest.json`` and their schemas are written from every
record (:mod:`evaluation.training`; docs/training.md).

    python -m calibration process --pools docs/data/calibration/pools/qwen2.5-coder-0.5b \\
        --out docs/data/training/process/<run-id> --rollouts 4 --max-steps 4 --max-candidates 40 \\
        --chunk-size 4 --hours 1
    python -m calibration process --pools docs/data/calibration/pools/qwen2.5-coder-0.5b \\
        --out docs/data/training/process/<run-id> --resume --hours 1

Without ``--policy-target`` it starts its own policy service on the pools' model (started under
the model lock), and refuses when that model's sha256 is not the one that drew the pools.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import time
from pathlib import Path

from calibration.lib.paths import relative_to_root
from calibration.lib.process_run import label_chunks, refuse_mixed, utc_now
from calibration.lib.records import LiveRunError, read_records
from calibration.lib.services import model_lock, running
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import Chunk, iter_chunks, latest_pools
from evaluation.problems.sealed import SEALED_PATH, load_sealed, sealed_hashes
from evaluation.training.export import pool_source
from evaluation.training.formats import PROCESS_FILES, ProcessManifest, ProcessRow, schemas
from evaluation.training.process_choice import choose
from evaluation.training.process_labels import RolloutSettings, StepLabeller, pending
from evaluation.training.process_rows import process_manifest, process_rows
from evaluation.training.withheld import Withheld
from services.search.interfaces import Policy

NAME = "process"
HELP = "process labels per step: rollouts from each step of verified chains of thought (Math-Shepherd)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    defaults = RolloutSettings()
    p.add_argument("--pools", type=Path, required=True, help="one model's pool folder (calibration chunks are read)")
    p.add_argument("--out", type=Path, required=True, help="the run's folder: record chunks and the files")
    p.add_argument("--resume", action="store_true", help="go on with the records in --out (else it must hold none)")
    p.add_argument("--rollouts", type=int, default=defaults.rollouts, help="completions drawn per step prefix")
    p.add_argument("--max-steps", type=int, default=defaults.max_steps, help="step prefixes labelled per chain")
    p.add_argument("--temperature", type=float, default=defaults.temperature)
    p.add_argument("--seed", type=int, default=defaults.seed, help="mixed into every rollout's seed")
    p.add_argument("--max-candidates", type=int, default=0,
                   help="label at most the first N chosen chains in all, families round-robin (0: all)")  # fmt: skip
    p.add_argument("--chunk-size", type=int, default=4, help="candidates per records chunk (and per lock hold)")
    p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: none)")
    p.add_argument("--retry-errors", action="store_true", help="label again a candidate whose record graded nothing")
    p.add_argument("--policy-target", default="",
                   help="a running policy service of the pools' model (default: start one)")  # fmt: skip
    p.add_argument("--models-dir", type=Path, default=None, help="default: TTC_POLICY_MODELS_DIR or ./models")
    p.add_argument("--sealed", type=Path, default=SEALED_PATH, help="the sealed split (never labelled)")
    p.add_argument("--no-lock", action="store_true", help="do not take the shared model lock")


def policy_client(target: str) -> Policy:
    """The policy service at ``target`` (made inside the event loop that uses its channel)."""
    from services.common.grpc_client import insecure_channel
    from services.orchestrator.clients import GrpcPolicy

    return GrpcPolicy(insecure_channel(target), "", timeout=1800.0)


def cot_cap(chunk: Chunk) -> int | None:
    """The chain-of-thought token cap a pool chunk was drawn with, when its header says."""
    cap = chunk.header.get("settings", {}).get("cot_max_tokens")
    return int(cap) if cap else None


def served_model(model: str, pools_sha256: str, models_dir: Path | None) -> str:
    """The GGUF to start the policy on; raises ``ModelError`` when it is not the pools' model."""
    from services.policy.models import REGISTRY, ModelError, gguf_path, sha256_of
    from services.policy.settings import PolicySettings

    path = gguf_path(model, Path(models_dir or PolicySettings().models_dir))
    sha256 = REGISTRY[model].sha256 if model in REGISTRY else sha256_of(path)
    if sha256 != pools_sha256:
        raise ModelError(f"{path} has sha256 {sha256[:12]}, the pools were drawn by {pools_sha256[:12]}")
    return str(path)


def write_files(out: Path, rows: list[ProcessRow], manifest: ProcessManifest) -> None:
    """``process.jsonl``, ``process_manifest.json`` and their schemas under ``out``."""
    with (out / "process.jsonl").open("w") as f:
        f.writelines(row.model_dump_json() + "\n" for row in rows)
    (out / "process_manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n")
    (out / "schemas").mkdir(exist_ok=True)
    for name, schema in schemas(PROCESS_FILES).items():
        path = out / "schemas" / f"{name.split('.')[0]}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")


def run(a: argparse.Namespace) -> int:
    from services.policy.models import ModelError

    chunks = list(iter_chunks(a.pools))
    latest = list(latest_pools(chunks).values())
    models = {str(chunk.header.get("model", a.pools.name)) for _, chunk in latest}
    shas = {str(chunk.header.get("model_sha256", "")) for _, chunk in latest}
    if len(models) != 1 or len(shas) != 1:
        print(f"{a.pools}: one model's pools are labelled at a time; found {sorted(models)} ({len(shas)} sha256)")
        return 2
    (model,), (pools_sha256,) = models, shas
    withheld = Withheld.build(
        (pool for pool, _ in latest if pool.split != "calibration"),
        sealed_hashes(a.sealed),
        (p.question for p in load_sealed(a.sealed)),
    )
    left_out: collections.Counter[str] = collections.Counter()
    chosen = choose(((pool, model, cot_cap(chunk)) for pool, chunk in latest), withheld, left_out)
    selection = chosen[: a.max_candidates] if a.max_candidates else chosen
    settings = RolloutSettings(rollouts=a.rollouts, max_steps=a.max_steps, temperature=a.temperature, seed=a.seed)
    provenance = {"git_describe": git_describe(), "model": model, "model_sha256": pools_sha256,
                  "pools": relative_to_root(a.pools), "settings": settings.as_dict(),
                  "max_candidates": a.max_candidates, "policy_target": a.policy_target or "started here"}  # fmt: skip
    try:
        records, headers, seq = read_records(a.out)
        if records and not a.resume:
            raise LiveRunError(f"{a.out} holds {len(records)} records: pass --resume, or another --out")
        refuse_mixed(headers, provenance)
        todo = pending(selection, records, a.retry_errors)
        print(f"{a.out}: {len(chosen)} chains chosen, {len(selection)} in this run's budget, "
              f"{len(records)} recorded, {len(todo)} to label", flush=True)  # fmt: skip
        if todo:
            gguf = "" if a.policy_target else served_model(model, pools_sha256, a.models_dir)
            hold = contextlib.nullcontext if a.no_lock else model_lock
            deadline = time.monotonic() + a.hours * 3600 if a.hours else None

            async def label(policy_target: str) -> None:
                labeller = StepLabeller(policy_client(policy_target), settings)
                await label_chunks(labeller, todo, a.out, provenance, seq=seq, chunk_size=a.chunk_size,
                                   deadline=deadline, hold=hold)  # fmt: skip

            with running(gguf, policy_target=a.policy_target, sandbox_target=None, hold=hold) as (policy, _):
                asyncio.run(label(policy))
        records, headers, _ = read_records(a.out)
    except (LiveRunError, ModelError) as err:
        print(f"error: {err}")
        return 2
    rows = process_rows(chosen, records, left_out)
    manifest = process_manifest(rows, left_out, headers=headers, revision=git_describe(), written_at=utc_now(),
                                pool=pool_source(relative_to_root(a.pools), chunks))  # fmt: skip
    a.out.mkdir(parents=True, exist_ok=True)
    write_files(a.out, rows, manifest)
    counts = manifest.files["process.jsonl"]
    print(f"{a.out}: {counts.rows} chains, {counts.steps} labelled steps ({counts.by_label}); mean value of steps "
          f"{manifest.mean_value}")  # fmt: skip
    print("left out: " + (", ".join(f"{why} {n}" for why, n in manifest.left_out.items()) or "nothing"))
    return 0
