"""``export``: pools (and the served traces of API keys that opted in) as training data.

Writes ``sft.jsonl`` (per prompt, the best verified trajectory in the OpenAI fine-tuning chat
format), ``preferences.jsonl`` (verified-right against verified-wrong answers of one prompt),
``outcomes.jsonl`` (an outcome label per candidate), ``manifest.json`` (counts, what was left out
and why, the code revision, each pool's model sha256 and seeds) and the rows' JSON schemas under
``schemas/``. Only independent checks verify; no development or sealed problem is
ever exported (:mod:`evaluation.training`; docs/training.md).

    python -m calibration export --pools docs/data/calibration/pools/qwen2.5-coder-0.5b \\
        --pools docs/data/calibration/pools/qwen2.5-coder-1.5b --out docs/data/training/export-<UTC time>
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from calibration.lib.paths import relative_to_root
from calibration.lib.served_traces import read_opted_in
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import iter_chunks, latest_pools
from evaluation.problems.datasets import Problem
from evaluation.problems.sealed import SEALED_PATH, load_sealed, sealed_hashes, text_hash
from evaluation.training.export import export, manifest, pool_source
from evaluation.training.formats import schemas
from evaluation.training.served import served_trajectories
from evaluation.training.trajectories import pool_trajectories
from evaluation.training.withheld import Withheld

NAME = "export"
HELP = "export pools (and opted-in served traces) as fine-tuning, preference and outcome data"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pools", type=Path, action="append", required=True,
                   help="a model's pool folder (calibration and development chunks); repeat for several")  # fmt: skip
    p.add_argument("--out", type=Path, required=True, help="folder to write the files into")
    p.add_argument("--redis-url", default="", help="where served traces are (needed with --served-keys)")
    p.add_argument("--served-keys", default="",
                   help="comma-separated API key names that opted in; only their own traces are read")  # fmt: skip
    p.add_argument("--sealed", type=Path, default=SEALED_PATH, help="the sealed split (never exported)")


def run(a: argparse.Namespace) -> int:
    keys = sorted({k.strip() for k in a.served_keys.split(",") if k.strip()})
    if keys and not a.redis_url:
        print("--served-keys needs --redis-url")
        return 2
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    chunks = {folder: list(iter_chunks(folder)) for folder in a.pools}
    pairs = [(pool, str(chunk.header.get("model", folder.name)))
             for folder, found in chunks.items() for pool, chunk in latest_pools(found).values()]  # fmt: skip
    withheld = Withheld.build(
        (pool for pool, _ in pairs if pool.split != "calibration"),
        sealed_hashes(a.sealed),
        (p.question for p in load_sealed(a.sealed)),
    )
    left_out: collections.Counter[str] = collections.Counter()
    trajectories = pool_trajectories(pairs, withheld, left_out)
    if keys:
        calibration = [Problem.from_dict(p.problem) for p, _ in pairs if p.split == "calibration"]
        known = {text_hash(p.question): p for p in calibration}
        traces = read_opted_in(a.redis_url, keys)
        trajectories += served_trajectories(traces, keys, withheld, known, left_out)
    exported = export(trajectories, left_out)
    sources = [pool_source(relative_to_root(folder), found) for folder, found in chunks.items()]
    summary = manifest(exported, revision=git_describe(), exported_at=started, pools=sources, served_keys=keys)
    a.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("sft", exported.sft), ("preferences", exported.preferences), ("outcomes", exported.outcomes)):
        with (a.out / f"{name}.jsonl").open("w") as out:
            out.writelines(row.model_dump_json() + "\n" for row in rows)
    (a.out / "manifest.json").write_text(summary.model_dump_json(indent=2) + "\n")
    (a.out / "schemas").mkdir(exist_ok=True)
    for name, schema in schemas().items():
        path = a.out / "schemas" / f"{name.split('.')[0]}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    files = summary.files
    print(f"{a.out}: {exported.prompts} prompts; " + ", ".join(f"{n} {c.rows}" for n, c in files.items()))
    print("left out: " + (", ".join(f"{why} {n}" for why, n in summary.left_out.items()) or "nothing"))
    return 0
