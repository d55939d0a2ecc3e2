"""``train``: close the loop on the embedded model. Rejection-sampling fine-tuning of
Qwen2.5-Coder-0.5B with LoRA on the CPU, on the verified trajectories of the calibration split
(an export's ``sft.jsonl``); its merge into a GGUF the stack serves as a model of its own; and the
before/after evaluation on the development and sealed splits (docs/training.md).

    python -m services.policy.models prepare --vllm --model qwen2.5-coder-0.5b   # the base, as HF
    python -m calibration train [--run-id qwen2.5-coder-0.5b-rft] [--limit-minutes 60]
    python -m calibration train --resume qwen2.5-coder-0.5b-rft [--limit-minutes 60]
    python -m calibration train merge qwen2.5-coder-0.5b-rft [--control]
    python -m calibration train served [qwen2.5-coder-0.5b-rft]    # served beside the base, asked via the SDK
    python -m calibration train eval --model qwen2.5-coder-0.5b-rft --split development
    python -m calibration train report --split development --tuned <eval folder> --base <pools or eval folder>

Training refuses a file with any development or sealed problem (the export's check), checkpoints
every few optimizer steps into ``docs/data/training/runs/<run-id>/`` and resumes there with the
same result; the evaluation draws in resumable chunks. Each holds the shared model lock while it
computes (between checkpoints, per chunk).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from calibration.lib.drawer import DrawSettings
from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS, relative_to_root
from calibration.lib.services import model_lock, running
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import read_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.problems.sealed import SEALED_PATH
from evaluation.training.before_after import KINDS, compare
from evaluation.training.eval_sets import EVAL_SPLITS, development_problems, sealed_problems
from evaluation.training.gguf_export import OUTTYPES
from evaluation.training.run_state import RUNS, RunFolder, RunSpec, TrainSettings, write_json
from evaluation.training.sft_data import WithheldRows, batches, read_rows, refuse_withheld, tokenize
from evaluation.training.withheld import withheld_of
from services.policy.models import REGISTRY, TUNED, ModelError, gguf_path, hf_dir, model_id, sha256_of, tuned_gguf

NAME = "train"
HELP = "fine-tune the 0.5B with LoRA on an export's verified trajectories; merge; evaluate before/after"
TUNED_NAME = "qwen2.5-coder-0.5b-rft"
DATA = Path("docs/data/training/export-20261207T080906Z/sft.jsonl")
POOLS = (DEFAULT_POOLS / DEFAULT_MODEL, DEFAULT_POOLS / "qwen2.5-coder-1.5b")
#: the storage key each evaluation split's chunks are written under (the pools' for development)
CHUNK_SPLIT = {"development": DEVELOPMENT_KEY, "sealed": "sealed"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    defaults = TrainSettings()
    start = p.add_mutually_exclusive_group()
    start.add_argument("--run-id", default=TUNED_NAME, help="a new run's id (its folder under docs/data/training/runs)")
    start.add_argument("--resume", default="", metavar="RUN_ID", help="continue a run from its latest checkpoint")
    p.add_argument("--data", type=Path, default=DATA, help="an export's sft.jsonl")
    p.add_argument("--pools", type=Path, action="append", default=None,
                   help="pool folders whose development problems no row may be (default: 0.5B and 1.5B)")  # fmt: skip
    p.add_argument("--sealed", type=Path, default=SEALED_PATH, help="the sealed split (no row may be one)")
    p.add_argument("--base", default="", help="registry name of the base (default: the tuned name's, else the 0.5B)")
    p.add_argument("--models-dir", type=Path, default=None, help="default: TTC_POLICY_MODELS_DIR or ./models")
    for name in ("epochs", "batch", "learning_rate", "lora_r", "lora_alpha", "checkpoint_every", "seed"):
        value = getattr(defaults, name)
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    p.add_argument("--limit-minutes", type=float, default=0.0, help="stop at a checkpoint after this long (0: none)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    p.add_argument("--no-lock", action="store_true", help="do not take the shared model lock")
    p.set_defaults(action=fit)
    actions = p.add_subparsers(dest="action_name", metavar="action")
    merge_p = actions.add_parser("merge", help="merge a run's adapter into its base and convert to GGUF")
    merge_p.add_argument("run_id")
    merge_p.add_argument("--outtype", default=OUTTYPES[0], choices=OUTTYPES)
    merge_p.add_argument("--control", action="store_true",
                         help="convert the base without the adapter the same way (a same-format control)")  # fmt: skip
    merge_p.add_argument("--cache", type=Path, default=Path("build"), help="where llama.cpp's converter is kept")
    merge_p.set_defaults(action=merge)
    eval_p = actions.add_parser("eval", help="draw a model's greedy (and sampled) answers on an evaluation split")
    eval_p.add_argument("--model", required=True, help="registry or tuned name, or a .gguf path")
    eval_p.add_argument("--split", choices=EVAL_SPLITS, required=True)
    eval_p.add_argument("--out", type=Path, default=None, help="default docs/data/training/eval/<model>/<split>")
    eval_p.add_argument("--samples", type=int, default=0, help="sampled answers per kind besides the greedy one")
    eval_p.add_argument("--base-pools", type=Path, default=DEFAULT_POOLS / DEFAULT_MODEL,
                        help="the pool folder whose development problems are drawn")  # fmt: skip
    eval_p.add_argument("--chunk-size", type=int, default=5)
    eval_p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: none)")
    eval_p.add_argument("--policy-target", default="", help="a running policy service (default: start one)")
    eval_p.add_argument("--sandbox-target", default="", help="a running sandbox service (default: start one)")
    eval_p.set_defaults(action=evaluate)
    report_p = actions.add_parser("report", help="compare the tuned model with the base, paired, budget-matched")
    report_p.add_argument("--split", choices=EVAL_SPLITS, required=True)
    report_p.add_argument("--tuned", type=Path, required=True, help="the tuned model's eval folder")
    report_p.add_argument("--base", type=Path, required=True, help="the base's eval or pool folder")
    report_p.add_argument("--vote", type=Path, default=None, help="the base's folder with samples (default: --base)")
    report_p.add_argument("--out", type=Path, default=None, help="also write the comparison as JSON here")
    report_p.set_defaults(action=report)
    served_p = actions.add_parser("served", help="serve the tuned model beside the base and ask it through the SDK")
    served_p.add_argument("model", nargs="?", default=TUNED_NAME, help="the tuned model (default: %(default)s)")
    served_p.add_argument("--out", type=Path, default=Path("docs/data/training"), help="folder of served-<UTC>.json")
    served_p.set_defaults(action=served)
    for sub in (merge_p, eval_p):
        sub.add_argument("--models-dir", type=Path, default=None, help="default: TTC_POLICY_MODELS_DIR or ./models")
        sub.add_argument("--no-lock", action="store_true", help="do not take the shared model lock")


def run(a: argparse.Namespace) -> int:
    return int(a.action(a))


def models_dir(a: argparse.Namespace) -> Path:
    from services.policy.settings import PolicySettings

    return Path(a.models_dir or PolicySettings().models_dir)


def hold(a: argparse.Namespace) -> Any:
    """The shared model lock (a factory of it), or nothing with ``--no-lock``."""
    return contextlib.nullcontext if a.no_lock else model_lock


def base_checkpoint(base: str, folder: Path) -> tuple[Path, dict[str, Any]]:
    """The base's Hugging Face checkpoint and its conversion record; raises ``ModelError`` when
    it is not prepared."""
    from services.policy.convert import MARKER, is_complete

    path = hf_dir(base, folder)
    if not is_complete(path):
        raise ModelError(f"{path} is not a converted checkpoint: python -m services.policy.models prepare "
                         f"--vllm --model {base}")  # fmt: skip
    return path, dict(json.loads((path / MARKER).read_text()))


def fit(a: argparse.Namespace) -> int:
    """Train a new run, or resume one (its settings and data from its ``run.json``)."""
    import hashlib

    from transformers import AutoTokenizer

    from evaluation.training.finetune import train

    run_id = a.resume or a.run_id
    folder = RunFolder(RUNS / run_id)
    if a.resume:
        if not folder.spec.is_file():
            print(f"{folder.path} holds no run")
            return 2
        if folder.adapter.is_dir():
            print(f"{run_id} has finished: its adapter is in {folder.adapter}")
            return 0
        recorded = folder.read_spec()
        settings, data, base = TrainSettings.from_dict(recorded["settings"]), Path(recorded["data"]), recorded["base"]
    else:
        if folder.spec.exists():
            print(f"{folder.path} exists: pass --resume {run_id}, or another --run-id")
            return 2
        settings = TrainSettings(**{k: getattr(a, k) for k in ("epochs", "batch", "learning_rate", "lora_r",
                                                                "lora_alpha", "checkpoint_every", "seed")})  # fmt: skip
        data, base = a.data, a.base or (TUNED[run_id].base if run_id in TUNED else DEFAULT_MODEL)
    rows = read_rows(data)
    try:
        refuse_withheld(rows, withheld_of(a.pools or POOLS, a.sealed))
    except WithheldRows as err:
        print(f"refused: {err}")
        return 2
    try:
        base_dir, conversion = base_checkpoint(base, models_dir(a))
    except ModelError as err:
        print(f"error: {err}")
        return 2
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    examples = [tokenize(row, tokenizer) for row in rows]
    kept = [e for e in examples if len(e.input_ids) <= settings.max_tokens]
    left_out = {"longer than max_tokens": len(examples) - len(kept)} if len(kept) < len(examples) else {}
    spec = RunSpec(base=base, base_fingerprint=conversion.get("fingerprint", {}), data=relative_to_root(data),
                   data_sha256=hashlib.sha256(data.read_bytes()).hexdigest(), settings=settings, rows=len(kept),
                   left_out=left_out, steps=[list(s) for s in batches(len(kept), settings.epochs, settings.seed,
                                                                      settings.batch)],
                   revision=git_describe(), started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))  # fmt: skip
    if a.resume:
        if differs := spec.differs_from(recorded):
            print(f"{folder.spec} differs from this run in {', '.join(differs)}: resume with the same data and base")
            return 2
    else:
        folder.write_spec(spec.to_dict())
    import torch

    torch.set_num_threads(a.threads)
    deadline = time.monotonic() + a.limit_minutes * 60 if a.limit_minutes else None
    trained = sum(e.trained_tokens for e in kept)
    print(f"{run_id}: {len(kept)} rows ({trained} trained tokens), {len(spec.steps)} optimizer steps, "
          f"from step {folder.checkpoint_step()}; log {folder.log_path}", flush=True)  # fmt: skip
    step = train(folder, base_dir, base, kept, spec.steps, settings, hold=hold(a),
                 stop=lambda _: deadline is not None and time.monotonic() > deadline)  # fmt: skip
    done = step == len(spec.steps)
    print(f"{run_id}: {'done, adapter in ' + str(folder.adapter) if done else f'stopped at step {step}; --resume'}")
    return 0


def merge(a: argparse.Namespace) -> int:
    """Merge a finished run's adapter into its base (or, with ``--control``, the base alone),
    convert it, record the GGUF's sha256 in the run's ``merge.json``."""
    from evaluation.training.gguf_export import build_gguf, converter, engine_version

    folder = RunFolder(RUNS / a.run_id)
    if not (folder.adapter / "adapter_config.json").is_file():
        print(f"{folder.adapter} holds no adapter: the run has not finished (python -m calibration train --resume)")
        return 2
    base = folder.read_spec()["base"]
    where = models_dir(a)
    try:
        base_dir, conversion = base_checkpoint(base, where)
    except ModelError as err:
        print(f"error: {err}")
        return 2
    out = where / "tuned" / f"{base}-{a.outtype}.gguf" if a.control else tuned_gguf(a.run_id, where)
    script = converter(a.cache)
    with hold(a)():
        build_gguf(base_dir, None if a.control else folder.adapter, out, a.outtype, script)
    record = dict(json.loads(folder.merge_record.read_text())) if folder.merge_record.is_file() else {}
    record["control" if a.control else "tuned"] = {
        "gguf": str(out), "sha256": sha256_of(out), "bytes": out.stat().st_size, "outtype": a.outtype,
        "converter": f"llama-cpp-python=={engine_version()} vendor/llama.cpp/convert_hf_to_gguf.py",
        "adapter_sha256": None if a.control else sha256_of(folder.adapter / "adapter_model.safetensors"),
        "base": base, "base_fingerprint": conversion.get("fingerprint", {}), "revision": git_describe(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    write_json(folder.merge_record, record)
    print(f"{out}: sha256 {record['control' if a.control else 'tuned']['sha256']} (recorded in {folder.merge_record})")
    return 0


def evaluate(a: argparse.Namespace) -> int:
    """Draw one model's answers on one evaluation split, resumably (:mod:`evaluation.training.eval_run`)."""
    from evaluation.problems.checkers import sandbox_runner
    from evaluation.training.eval_draw import EvalDrawer, EvalDrawSettings
    from evaluation.training.eval_run import MixedRun, draw_chunks
    from services.common.grpc_client import insecure_channel
    from services.orchestrator.clients import GrpcExecutor, GrpcPolicy

    try:
        path = gguf_path(a.model, models_dir(a))
    except ModelError as err:
        print(f"error: {err}")
        return 2
    problems = development_problems(a.base_pools) if a.split == "development" else sealed_problems()
    pools = DrawSettings()
    settings = EvalDrawSettings(cot_max_tokens=pools.cot_max_tokens, program_max_tokens=pools.program_max_tokens,
                                code_max_tokens=pools.code_max_tokens, program_timeout_s=pools.program_timeout_s,
                                samples=a.samples, temperature=pools.temperature)  # fmt: skip
    sha256 = REGISTRY[a.model].sha256 if a.model in REGISTRY else sha256_of(path)
    provenance = {"model": model_id(a.model), "model_sha256": sha256, "settings": settings.as_dict(),
                  "git_describe": git_describe(), "eval_split": a.split}  # fmt: skip
    out = a.out or Path("docs/data/training/eval") / model_id(a.model) / a.split
    deadline = time.monotonic() + a.hours * 3600 if a.hours else None

    async def draw(policy_target: str, sandbox_target: str) -> None:
        # The gRPC channels belong to the loop that uses them: made inside it.
        drawer = EvalDrawer(GrpcPolicy(insecure_channel(policy_target), "", timeout=1800.0),
                            GrpcExecutor(insecure_channel(sandbox_target)), sandbox_runner(sandbox_target),
                            settings)  # fmt: skip
        await draw_chunks(drawer, problems, out, CHUNK_SPLIT[a.split], provenance,
                          chunk_size=a.chunk_size, deadline=deadline, hold=hold(a))  # fmt: skip

    with running(str(path), policy_target=a.policy_target, sandbox_target=a.sandbox_target,
                 hold=hold(a)) as (policy_target, sandbox_target):  # fmt: skip
        try:
            asyncio.run(draw(policy_target, sandbox_target))
        except MixedRun as err:
            print(f"error: {err}")
            return 2
    return 0


# What the served check asks the tuned model (each at effort none and low): a product, a count in a
# word and a transformed string, one per kind of answer its training rows hold.
SERVED_PROMPTS = ("What is 48 * 27?", "How many times does the letter 'e' appear in 'excellence'?",
                  "Spell the word 'stressed' backwards.")  # fmt: skip


def served(a: argparse.Namespace) -> int:
    """``ttc stack`` serving the tuned model beside the base (``TTC_STACK_TUNED_MODEL``), asked through
    the gateway with the official ``openai`` SDK: the model list names it, and it answers each prompt
    at ``none`` and ``low``. The replies are recorded (``served-<UTC>.json``) with the GGUF's sha256."""
    import openai

    from calibration.lib.stack import start_stack
    from services.common.ports import free_port

    try:
        path = gguf_path(a.model, Path(os.environ.get("TTC_POLICY_MODELS_DIR", "models")))
    except ModelError as err:
        print(f"error: {err}")
        return 2
    from services.gateway.model_tables import shipped_path
    from services.gateway.settings import GatewaySettings

    default_table = shipped_path(str(GatewaySettings.model_fields["routing_table"].default)).resolve()
    env = {"TTC_STACK_TUNED_MODEL": a.model, "TTC_STACK_TUNED_MODEL_PORT": str(free_port()),
           "TTC_STACK_TUNED_MODEL_METRICS_PORT": str(free_port()),
           # routed as `make run` routes a model without a table of its own: the shipped default table
           "TTC_GATEWAY_ROUTING_TABLE": str(default_table)}  # fmt: skip
    records: list[dict[str, Any]] = []
    with model_lock():
        stack, url = start_stack(DEFAULT_MODEL, 600.0, print, env, serving=f"and {a.model} on free ports")
        try:
            client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
            listed = sorted(m.id for m in client.models.list())
            for prompt in SERVED_PROMPTS:
                for effort in ("none", "low"):
                    began = time.monotonic()
                    reply = client.chat.completions.create(model=model_id(a.model), reasoning_effort=effort,
                                                           messages=[{"role": "user", "content": prompt}])  # fmt: skip
                    ttc = (reply.model_extra or {}).get("ttc") or {}
                    records.append({"prompt": prompt, "effort": effort, "model": reply.model,
                                    "content": reply.choices[0].message.content, "strategy": ttc.get("strategy"),
                                    "completion_tokens": reply.usage.completion_tokens if reply.usage else None,
                                    "seconds": round(time.monotonic() - began, 2)})  # fmt: skip
                    print(f"{effort:>4} {prompt!r}: {reply.choices[0].message.content!r}")
        finally:
            stack.stop()
    out = a.out / f"served-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    write_json(out, {"model": model_id(a.model), "gguf_sha256": sha256_of(path), "listed_models": listed,
                     "git_describe": git_describe(), "replies": records})  # fmt: skip
    print(f"wrote {relative_to_root(out)}: {model_id(a.model)} listed and answered {len(records)} request(s)")
    return 0 if model_id(a.model) in listed and all(r["content"] for r in records) else 1


def report(a: argparse.Namespace) -> int:
    """The tuned model's answers against the base's, per kind (:mod:`evaluation.training.before_after`)."""
    split = CHUNK_SPLIT[a.split]
    tuned, base = read_pools(a.tuned, split), read_pools(a.base, split)
    vote = read_pools(a.vote, split) if a.vote else base
    found = [c for kind in KINDS if (c := compare(tuned, base, kind, vote)) is not None]
    print(f"| {a.split} | problems | tuned | base | tuned - base [95%] | base vote at tuned tokens (n) | "
          "tuned - vote [95%] |\n|---|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    for c in found:
        g = c.greedy
        vote_cells = "| - | -"
        if c.vote is not None and c.matched is not None:
            v, m = c.vote, c.matched
            vote_cells = (f"| {v.b:.3f} ({m.low}-{m.high}, {m.generated:.0f} tok) | {v.difference:+.3f} "
                          f"[{v.interval[0]:+.3f}, {v.interval[1]:+.3f}]")  # fmt: skip
        print(f"| {c.kind} greedy ({c.tuned_tokens:.0f} vs {c.base_tokens:.0f} tok) | {g.n} | {g.a:.3f} | {g.b:.3f} "
              f"| {g.difference:+.3f} [{g.interval[0]:+.3f}, {g.interval[1]:+.3f}] {vote_cells} |")  # fmt: skip
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        sources = {"tuned": str(a.tuned), "base": str(a.base), "vote": str(a.vote or a.base)}
        a.out.write_text(json.dumps({"split": a.split, **sources, "kinds": [c.to_dict() for c in found]},
                                    indent=2) + "\n")  # fmt: skip
    return 0
