"""OptiLLM side by side with our efforts, on the same engine and problems.

Both columns of the table answer the same problems, checked by the same checkers, through the
official ``openai`` SDK. ``--split development`` (the default): problems of the development split
(``evaluation/problems/problemset.py``; looked at while the ladder was built, so these are
development figures, not held-out ones), checked by ``answer_correct`` on the extracted answer and
HumanEval by its hidden tests in the sandbox. ``--split sealed``: the sealed test split
(``docs/data/sealed/sealed_split.json``, families round-robin, so any prefix covers them all; the
question as the only user message), graded by reasoning-gym's own checker
(:mod:`evaluation.heldout.sealed_grade`), records under ``docs/data/optillm/<label>`` as always:

- ``ttc:<effort>``: our gateway with ``reasoning_effort=<effort>``, routed as a user's request is;
- ``optillm:<approach>``: the OptiLLM proxy (its own venv, ``loadtests/optillm/processes.py``)
  with ``extra_body={"optillm_approach": ...}``, whose upstream is our gateway pinned to one
  plain llama.cpp call per request (``loadtests/optillm/upstream.py``): the same engine and
  GGUF, no search of ours added.

Generated tokens are what the engine decoded: our gateway's usage for an effort; for OptiLLM the
gateway's usage of every upstream call it made (the pinned upstream's ledger), with the usage
OptiLLM itself reports kept beside it. Records are appended (fsync'd) to
``<out>/records.jsonl``; a rerun resumes, skipping what is recorded; ``--limit-s`` stops before
the next request once spent. The summary (accuracy with 95% Wilson intervals, mean generated
and prompt tokens, p50 latency, per task kind and overall, over the problems every
configuration has answered) goes to ``<out>/optillm-<UTC>.json`` via ``write_raw``.

    flock /tmp/ttc-model.lock nice .venv/bin/python -m loadtests.optillm_compare \\
        --problems 200 --efforts all --approaches all --label full --limit-s 3600
    nice .venv/bin/python -m loadtests.optillm_compare --split sealed --problems 250 \\
        --efforts low,high --approaches all --label sealed --limit-s 3600
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

from evaluation.heldout.sealed_grade import grade
from evaluation.heldout.sealed_plan import check_split, interleaved
from evaluation.pools.provenance import DATA, git_describe, provenance, write_raw
from evaluation.problems.checkers import CodeRunner, check_code, sandbox_runner
from evaluation.problems.datasets import DEVELOPMENT_KEY, Problem
from evaluation.problems.problemset import FAMILIES, answer_correct, build_problem_set, family_of
from evaluation.problems.sealed import SEALED_PATH, SealedProblem, load_sealed, sealed_hashes
from loadtests.gateway_stack import Stack, healthy
from loadtests.optillm.configs import Config, build_configs, split_names
from loadtests.optillm.processes import DEFAULT_OPTILLM_PYTHON, Child, optillm_child, upstream_child
from loadtests.optillm.scoring import common_problems, markdown, summarize, verdict
from services.common.answers import extract_answer

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
TEXT_KEPT = 4_000


def select_problems(count: int, families: Sequence[str], seed: int) -> list[Problem]:
    """The first ``count`` development problems, families interleaved (any prefix covers them all)."""
    names = list(families) or [f.name for f in FAMILIES]
    per_family = max(1, math.ceil(count / len(names)))
    return build_problem_set(DEVELOPMENT_KEY, per_family=per_family, seed=seed, families=names)[:count]


def select_sealed(count: int) -> list[SealedProblem]:
    """The first ``count`` problems of the sealed split, families round-robin; refuses a split
    whose question hashes are not the committed list."""
    problems = load_sealed(SEALED_PATH)
    check_split(problems, sealed_hashes(SEALED_PATH))
    return interleaved(problems)[:count]


Compared = Problem | SealedProblem


def messages_of(problem: Compared) -> list[dict[str, str]]:
    """What is sent: a development problem's own messages; a sealed question as the only user message."""
    if isinstance(problem, SealedProblem):
        return [{"role": "user", "content": problem.question}]
    return list(problem.messages())


def record_fields(problem: Compared) -> dict[str, Any]:
    """The record's family, task kind and level (a sealed problem's kind is its family: no
    calibration kind names it)."""
    if isinstance(problem, SealedProblem):
        return {"family": problem.family, "kind": problem.family, "level": 0}
    return {"family": problem.dataset, "kind": family_of(problem).kind, "level": problem.level}


async def judge(problem: Compared, text: str, runner: CodeRunner | None) -> tuple[str, str, str]:
    """(outcome, answer, error) with the checkers the pools and ladder use (reasoning-gym's own
    for a sealed problem: right only at a grade of 1.0)."""
    if isinstance(problem, SealedProblem):
        graded = grade(problem, text)
        return ("correct" if graded.correct else "wrong"), graded.answer, ""
    if problem.check == "code":
        verdict_ = await check_code(problem, text, runner)
        if verdict_.correct is None:
            return "error", "", verdict_.error
        return ("correct" if verdict_.correct else "wrong"), "", ""
    answer = extract_answer(text) or ""
    return ("correct" if answer_correct(problem, answer) else "wrong"), answer, ""


@dataclass
class Endpoints:
    gateway: openai.OpenAI
    optillm: openai.OpenAI | None
    ledger_url: str
    model: str
    max_tokens: int


def ledger(url: str) -> dict[str, Any]:
    data = httpx.get(url, timeout=10.0).json()
    return data if isinstance(data, dict) else {}


def ask(config: Config, problem: Compared, ends: Endpoints) -> dict[str, Any]:
    """One request, measured; a failure is an ``error`` record with its message, never a crash."""
    fields: dict[str, Any] = {}
    before = ledger(ends.ledger_url) if config.system == "optillm" else {}
    start = time.perf_counter()
    try:
        kwargs: dict[str, Any] = {"model": ends.model, "messages": messages_of(problem), "max_tokens": ends.max_tokens}
        if config.system == "ttc":
            reply = ends.gateway.chat.completions.create(**{**kwargs, "reasoning_effort": config.name})
        else:
            assert ends.optillm is not None
            reply = ends.optillm.chat.completions.create(**{**kwargs, "extra_body": {"optillm_approach": config.name}})
        fields["text"] = (reply.choices[0].message.content or "") if reply.choices else ""
        usage = reply.usage
        fields["reported_completion_tokens"] = int(usage.completion_tokens or 0) if usage else 0
        fields["reported_prompt_tokens"] = int(usage.prompt_tokens or 0) if usage else 0
        ext = (reply.model_extra or {}).get("ttc")
        if isinstance(ext, dict):
            fields["strategy"] = ext.get("strategy")
            fields["effort_applied"] = ext.get("effort_applied") or ext.get("effort")
    except (openai.OpenAIError, httpx.HTTPError) as exc:
        fields["error"] = f"{type(exc).__name__}: {exc}"[:500]
    fields["latency_s"] = round(time.perf_counter() - start, 3)
    if config.system == "ttc":
        fields["generated_tokens"] = fields.get("reported_completion_tokens", 0)
        fields["prompt_tokens"] = fields.get("reported_prompt_tokens", 0)
    else:
        after = ledger(ends.ledger_url)
        fields["generated_tokens"] = after["completion_tokens"] - before.get("completion_tokens", 0)
        fields["prompt_tokens"] = after["prompt_tokens"] - before.get("prompt_tokens", 0)
        fields["upstream_calls"] = after["calls"] - before.get("calls", 0)
        fields["upstream_rejected"] = after["rejected"] - before.get("rejected", 0)
        fields["upstream_samples"] = after["samples"] - before.get("samples", 0)
        fields["upstream_rejections"] = [r for r in after["rejections"] if r["call"] > before.get("calls", 0)]
    return fields


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run(a: argparse.Namespace, configs: list[Config], problems: Sequence[Compared], out: Path) -> list[dict[str, Any]]:
    records_path = out / "records.jsonl"
    records = read_records(records_path)
    done = {(r["config"], r["problem_id"]) for r in records}
    describe = git_describe()
    code = any(isinstance(p, Problem) and p.check == "code" for p in problems)
    runner = sandbox_runner(a.sandbox_target) if code else None
    children: list[Child] = []
    try:
        ends = start_endpoints(a, configs, out, children)
        deadline = time.monotonic() + a.limit_s if a.limit_s else None
        for problem in problems:  # problem-major: a stopped run leaves whole rows to compare
            for config in configs:
                if (config.label, problem.id) in done:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    print(f"--limit-s {a.limit_s} spent: stopping; rerun to resume", file=sys.stderr)
                    return records
                fields = ask(config, problem, ends)
                if "error" in fields:
                    outcome, answer, error = "error", "", fields["error"]
                else:
                    outcome, answer, error = asyncio.run(judge(problem, fields["text"], runner))
                record = {
                    "config": config.label, "system": config.system, "name": config.name,
                    "problem_id": problem.id, **record_fields(problem), "outcome": outcome, "answer": answer, **fields,
                    "text": str(fields.get("text", ""))[-TEXT_KEPT:], "error": error or fields.get("error", ""),
                    "max_tokens": a.max_tokens, "git_describe": describe, "label": a.label,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }  # fmt: skip
                append(records_path, record)
                records.append(record)
                print(f"{config.label:<24} {problem.id[:40]:<40} {outcome:<7} {record['generated_tokens']:>6} tok "
                      f"{record['latency_s']:>7.1f}s", flush=True)  # fmt: skip
    finally:
        for child in reversed(children):
            child.stop()
    return records


def start_endpoints(a: argparse.Namespace, configs: list[Config], out: Path, children: list[Child]) -> Endpoints:
    gateway = openai.OpenAI(base_url=a.base_url, api_key=a.api_key, timeout=a.timeout_s, max_retries=0)
    optillm, ledger_url = None, ""
    if any(c.system == "optillm" for c in configs):
        logs = Path(a.log_dir) / a.label
        upstream, upstream_base = upstream_child(a.base_url, a.api_key, a.max_tokens, logs / "upstream.log")
        upstream.start()
        children.append(upstream)
        ledger_url = f"{upstream_base}/ledger"
        optillm_url = a.optillm_url
        if not optillm_url:
            proxy, optillm_url = optillm_child(Path(a.optillm_python), f"{upstream_base}/v1", a.api_key,
                                               logs / "optillm.log")  # fmt: skip
            proxy.start()
            children.append(proxy)
        optillm = openai.OpenAI(base_url=optillm_url, api_key=a.api_key, timeout=a.timeout_s, max_retries=0)
    return Endpoints(gateway, optillm, ledger_url, a.model, a.max_tokens)


def summary(records: list[dict[str, Any]], configs: list[Config]) -> dict[str, Any]:
    labels = [c.label for c in configs]
    shared = common_problems(records, labels)
    rows = summarize(shared, labels)
    rejections = [r for rec in records for r in rec.get("upstream_rejections") or []]
    return {
        "configs": labels,
        "problems_compared": len({r["problem_id"] for r in shared}),
        "records": len(records),
        "rows": [r.as_dict() for r in rows],
        "rows_all_records": [r.as_dict() for r in summarize(records, labels)],
        "verdict": verdict(rows),
        "upstream_rejections": rejections[:50],
        "markdown": markdown(rows),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("development", "sealed"), default="development", help="whose problems")
    p.add_argument("--problems", type=int, default=200, help="problems (families interleaved)")
    p.add_argument(
        "--families", default="", help="comma-separated subset of evaluation/problems/problemset.py's families"
    )
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--efforts", default="all", help="our efforts, comma-separated, or all (none..xhigh)")
    p.add_argument("--approaches", default="all", help="OptiLLM approaches, comma-separated, or all")
    p.add_argument("--max-tokens", type=int, default=512, help="answer tokens per call, for both systems")
    p.add_argument("--limit-s", type=float, default=0.0, help="stop before the next request after this long")
    p.add_argument("--label", default="run", help="the run's name: records under docs/data/optillm/<label>/")
    p.add_argument("--out", default="", help="records folder (default docs/data/optillm/<label>)")
    p.add_argument("--base-url", default=DEFAULT_BASE_URL, help="our gateway's OpenAI base URL")
    p.add_argument("--api-key", default="none")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--optillm-python", default=str(DEFAULT_OPTILLM_PYTHON), help="Python of OptiLLM's venv")
    p.add_argument("--optillm-url", default="", help="a running OptiLLM proxy (its upstream must be ours, pinned)")
    p.add_argument("--sandbox-target", default="127.0.0.1:50053", help="sandbox gRPC target for HumanEval")
    p.add_argument("--log-dir", default="reports/optillm", help="logs of the children and the stack")
    p.add_argument("--timeout-s", type=float, default=1800.0, help="client timeout per request")
    p.add_argument("--no-start-stack", action="store_true", help="fail rather than start `ttc stack`")
    p.add_argument("--report-only", action="store_true", help="send nothing: summarize the records so far")
    return p.parse_args(argv)


def send(
    a: argparse.Namespace, configs: list[Config], problems: Sequence[Compared], out: Path
) -> list[dict[str, Any]] | None:
    """Run the comparison (starting ``ttc stack`` when no gateway answers); ``None`` when there
    is no gateway and starting one is not allowed."""
    stack: Stack | None = None
    if not healthy(a.base_url):
        if a.no_start_stack:
            print(f"no gateway at {a.base_url}; start it with `make run`", file=sys.stderr)
            return None
        print(f"no gateway at {a.base_url}: starting `ttc stack` with {a.model}", flush=True)
        stack = Stack(a.model, a.base_url, Path(a.log_dir) / a.label / "stack.log")
        stack.start()
    try:
        return run(a, configs, problems, out)
    finally:
        if stack is not None:
            stack.stop()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    configs = build_configs(a.efforts, a.approaches)
    out = Path(a.out) if a.out else DATA / "optillm" / a.label
    out.mkdir(parents=True, exist_ok=True)
    if a.split == "sealed":
        if a.families:
            print("--families names development families; the sealed split is taken whole", file=sys.stderr)
            return 2
        problems: Sequence[Compared] = select_sealed(a.problems)
    else:
        problems = select_problems(a.problems, split_names(a.families), a.seed)
    started = provenance(a.model, label=a.label, problems=len(problems), seed=a.seed, split=a.split)
    records = read_records(out / "records.jsonl") if a.report_only else send(a, configs, problems, out)
    if records is None:
        return 2
    result = summary(records, configs)
    path = write_raw("optillm", result, model=a.model, started=started, out_dir=out, argv=sys.argv)
    print(result["markdown"])
    print(json.dumps(result["verdict"]))
    print(f"summary: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
