"""``python -m loadtests.pools validate``: the pool simulator against live runs through the
gateway (issue 21, "Validate the simulator"). The comparison itself is pure:
:mod:`evaluation.simulator_check`.

For each problem that has a pool (up to ``--limit``) and each configuration (default
``pot@1,sc@4,pot@4``), one request goes through the gateway with the official ``openai`` SDK,
pinned (``ttc`` extension) to the strategy that configuration prices, with the same ``n``, the
pools' temperature and token caps (:func:`~evaluation.simulator_check.gateway_pin`; a
configuration it cannot map is refused before anything is sent). The answer is checked as the
pools check theirs (``extract_answer`` then :func:`~evaluation.problemset.answer_correct`; code
by its hidden tests in the runner's grading sandbox, :mod:`loadtests.pools.grading`); a
failed request, a search that ended without an answer or a failed check is an infrastructure
error, recorded as such and excluded from the report, never counted wrong.

Records are appended in chunks under ``docs/data/calibration/validation/<model>/``
(``<split>-NNNNN.jsonl``: a header with ``git describe --dirty``, the model's sha256, the
pools' draw settings and the request settings, then one line per request), each written whole
(a chunk cut short by a signal or by ``--hours`` is written with the requests it finished), so
a run stopped at any point resumes with the pairs no record holds.
Without ``--base-url`` it starts ``ttc stack`` on the pools' model on free ports (the chaos
suite's :class:`~loadtests.chaos_stack.LocalStack`) and takes the shared model lock
(``/tmp/ttc-model.lock``) per chunk. The report (printed, and ``report.json`` beside the
records) is built from every record so far.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import openai

from evaluation.checkers import check_code
from evaluation.datasets import Problem
from evaluation.pools import ProblemPool, chunk_name, iter_chunks, read_pools
from evaluation.pricing import Config, Estimate, Pricer
from evaluation.pricing_table import default_configs, fit_latency
from evaluation.problemset import answer_correct
from evaluation.provenance import git_describe, load_average
from evaluation.simulator_check import GatewayPin, LiveRecord, Unmappable, gateway_pin, latest_records, markdown, report
from loadtests.client import Reply, request_kwargs, send
from loadtests.grid import Cell
from loadtests.pools.grading import CodeGrader
from loadtests.pools.run import DEFAULT_POOLS, model_sha256
from loadtests.pools.services import ROOT, model_lock, relative_to_root
from loadtests.runner import GAVE_UP, request_seed
from services.common.answers import extract_answer
from services.search.strategies.stopping import should_stop

DEFAULT_VALIDATION = ROOT / "docs" / "data" / "calibration" / "validation"
DEFAULT_CONFIGS = "pot@1,sc@4,pot@4"
SCHEMA = 1
REPORT = "report.json"


class ValidationError(RuntimeError):
    """The validation cannot run as asked; nothing has been sent. The message says why."""


# ------------------------------------------------------------------------------- inputs
def pool_settings(directory: Path, split: str) -> tuple[dict[str, Any], str]:
    """The draw settings and model sha256 every chunk of ``split`` shares (pools drawn with
    other settings or models do not price one configuration)."""
    chunks = list(iter_chunks(directory, split))
    if not chunks:
        raise ValidationError(f"no {split} pools under {directory}")
    settings = {json.dumps(c.header.get("settings"), sort_keys=True) for c in chunks}
    shas = {str(c.header.get("model_sha256")) for c in chunks}
    if len(settings) > 1 or len(shas) > 1:
        raise ValidationError(f"{directory}: chunks of {split} differ in draw settings or model ({len(settings)} "
                              f"settings, {len(shas)} models); validate one kind at a time")  # fmt: skip
    return dict(chunks[0].header.get("settings") or {}), shas.pop()


def resolve_configs(
    names: Sequence[str], k: int, settings: dict[str, Any], confidence: float
) -> dict[str, tuple[Config, GatewayPin]]:
    """Each priced configuration and the pinned request that runs it; refuses unknown names and
    configurations no request maps to."""
    known = {c.name: c for c in default_configs(k)}
    chosen: dict[str, tuple[Config, GatewayPin]] = {}
    for name in names:
        if name not in known:
            raise ValidationError(f"configuration {name!r} is not priced from pools of k={k}")
        try:
            chosen[name] = (known[name], gateway_pin(known[name], settings, confidence=confidence))
        except Unmappable as err:
            raise ValidationError(str(err)) from err
    if not chosen:
        raise ValidationError("no configurations to validate")
    return chosen


def chosen_pools(pools: Sequence[ProblemPool], configs: Sequence[Config], limit: int) -> list[ProblemPool]:
    """The first ``limit`` pools (0: all) that every configuration prices, in draw order (the
    draw interleaves families, so a prefix covers them all)."""
    usable = [p for p in pools if all(c.applies(p) for c in configs)]
    return usable[:limit] if limit else usable


# ------------------------------------------------------------------------------- records
def chunk_paths(directory: Path) -> list[Path]:
    """The record chunks under ``directory``, in sequence order."""
    return sorted(directory.glob("*-[0-9][0-9][0-9][0-9][0-9].jsonl")) if directory.is_dir() else []


def read_chunk(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One chunk's header and records; a torn chunk (its header's count not met) is refused."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("type") != "header" or lines[0].get("records") != len(lines) - 1:
        raise ValidationError(f"{path}: not a whole validation chunk (header, then its records)")
    return lines[0], lines[1:]


def read_records(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Every record and chunk header so far (chunks in sequence order), and the next chunk number."""
    records, headers, seq = [], [], 0
    for path in chunk_paths(directory):
        header, chunk = read_chunk(path)
        headers.append(header)
        records += chunk
        seq = max(seq, int(path.stem.rsplit("-", 1)[1]))
    return records, headers, seq + 1


def write_records(
    directory: Path, split: str, seq: int, header: dict[str, Any], records: Sequence[dict[str, Any]]
) -> Path:
    """One chunk, atomically (temporary file then rename): a crash leaves it whole or absent."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / chunk_name(split, seq)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as out:
        out.write(
            json.dumps({"type": "header", "schema": SCHEMA, **header, "records": len(records)}, sort_keys=True) + "\n"
        )
        for record in records:
            out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    return path


async def regrade(directory: Path, pools: Mapping[str, ProblemPool], grader: CodeGrader) -> int:
    """Re-check every record that kept its content with today's :func:`checked`, chunk by chunk,
    each rewritten whole with ``regraded_by`` (``git describe``) in its header; records with an
    infrastructure error stay as they are. A sandbox failure stops it with that chunk untouched.
    Returns how many verdicts changed."""
    changed = 0
    for path in chunk_paths(directory):
        header, records = read_chunk(path)
        again = []
        for record in records:
            if record.get("error") or "content" not in record:
                again.append(record)
                continue
            fresh = await checked(record | {"correct": None, "answer": ""}, pools[record["problem_id"]],
                                  record["content"], grader)  # fmt: skip
            if fresh.get("error"):
                raise ValidationError(f"{path.name}: {record['problem_id']} could not be re-checked: {fresh['error']}")
            changed += fresh["correct"] != record.get("correct")
            again.append(fresh)
        split, seq = path.stem.rsplit("-", 1)
        kept = {k: v for k, v in header.items() if k not in ("type", "schema", "records")}
        kept |= {"regraded_by": git_describe(), "regraded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_records(directory, split, int(seq), kept, again)
    return changed


def reply_fields(reply: Reply) -> dict[str, Any]:
    """What every live record keeps of a reply: usage, latency, what the search reported, the
    served ``ttc.confidence`` (with the verdict, a check that live confidence is calibrated)."""
    ext = reply.ext
    return {
        "completion_tokens": reply.completion_tokens, "prompt_tokens": reply.prompt_tokens,
        "cached_tokens": reply.cached_tokens, "latency_s": round(reply.latency_s, 4),
        "strategy": str(ext.get("strategy") or ""), "termination": str(ext.get("termination") or ""),
        "finish_reason": reply.finish_reason, "trace_id": str(ext.get("trace_id") or ""),
        "error": reply.error, "error_kind": reply.error_kind, "confidence": ext.get("confidence"),
    }  # fmt: skip


def gave_up(record: dict[str, Any], reply: Reply) -> dict[str, Any] | None:
    """The record as an infrastructure error when the search ended without an answer, else None."""
    if not reply.text.strip() and record["termination"] in GAVE_UP:
        return record | {"error": f"search ended by {record['termination']} without an answer",
                         "error_kind": "termination"}  # fmt: skip
    return None


async def checked(record: dict[str, Any], pool: ProblemPool, text: str, grader: CodeGrader) -> dict[str, Any]:
    """The record with the answer checked as the pools check theirs, and the content kept (so a
    record can be re-checked). Code runs on the problem's hidden tests in the sandbox, as the
    pools score code (a sandbox that cannot judge it is an infrastructure error, never wrong).
    Otherwise the gateway renders the answer in the form the question asks: when the whole
    content is that answer (a list shaped as the question's example, a bare ``True``), it is the
    answer; a number or stated answer pulled out of it otherwise."""
    problem = Problem.from_dict(pool.problem)
    if problem.check == "code":
        verdict = await check_code(problem, text, await grader.runner())
        if verdict.correct is None:
            return record | {"error": verdict.error, "error_kind": "sandbox", "content": text}
        return record | {"answer": "", "correct": verdict.correct, "content": text}
    return record | await asyncio.to_thread(text_verdict, problem, text)


def text_verdict(problem: Problem, text: str) -> dict[str, Any]:
    """``answer``, ``correct`` and ``content`` of a reply that is not code (see :func:`checked`)."""
    content = text.strip()
    answer = extract_answer(text)
    correct = answer_correct(problem, answer)
    if not correct and "\n" not in content and answer_correct(problem, content):
        answer, correct = content, True
    return {"answer": answer or "", "correct": correct, "content": text}


async def to_record(
    pool: ProblemPool, config: str, pin: GatewayPin, seed: int, reply: Reply, grader: CodeGrader
) -> dict[str, Any]:
    """One request's record: verdict by the pools' checker, usage, latency, what the gateway ran;
    an infrastructure failure sets ``error`` and leaves ``correct`` unset."""
    record: dict[str, Any] = {
        "type": "record", "problem_id": pool.id, "config": config, "family": pool.family, "kind": pool.kind,
        "ttc": pin.extension(), "seed": seed, "correct": None, "answer": "", **reply_fields(reply),
        "candidates": int(reply.ext.get("candidates_generated") or 0),
    }  # fmt: skip
    if reply.error:
        return record
    if (ended := gave_up(record, reply)) is not None:
        return ended
    if record["strategy"] and record["strategy"] != pin.strategy:
        return record | {"error": f"the gateway ran {record['strategy']!r}, not the pinned {pin.strategy!r}",
                         "error_kind": "strategy"}  # fmt: skip
    return await checked(record, pool, reply.text, grader)


def start_stack(model: str, timeout_s: float, log: Any, env: dict[str, str] | None = None,
                serving: str = "on free ports") -> tuple[Any, str]:  # fmt: skip
    """``ttc stack`` on ``model`` (the chaos suite's LocalStack), the job timeout at ``timeout_s``
    plus ``env``; returns the stack and its /v1 URL. Call it inside the model lock."""
    from loadtests.chaos_stack import LocalStack

    stack = LocalStack(model=model, concurrency=1,
                       extra_env={**(env or {}), "TTC_GATEWAY_JOB_TIMEOUT_S": str(int(timeout_s))})  # fmt: skip
    log(f"starting ttc stack with {model} {serving} (log {stack.log_path})")
    stack.start(timeout=900)
    return stack, f"{stack.url}/v1"


# ------------------------------------------------------------------------------- the run
@dataclass
class Validation:
    model: str
    split: str
    pools_dir: Path
    out: Path
    configs: list[str]
    limit: int = 60
    base_url: str = ""
    hours: float = 0.0
    chunk_size: int = 5
    effort: str = "medium"
    seed: int = 0
    confidence: float = 0.9
    timeout_s: float = 1800.0
    retry_errors: bool = False
    api_key: str = "none"
    # Take the shared model lock per chunk; None: only when this run starts its own stack (a
    # gateway elsewhere is someone else's model), False: the caller holds it (under ``flock``).
    lock: bool | None = None
    grader: CodeGrader = field(default_factory=CodeGrader)
    _stack: Any = None
    _url: str = ""

    def log(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)

    def pools(self) -> tuple[list[ProblemPool], dict[str, Any], str]:
        """The split's pools, their draw settings and model sha256 (refused for another model)."""
        settings, sha = pool_settings(self.pools_dir, self.split)
        if sha != (mine := model_sha256(self.model)):
            raise ValidationError(f"{self.pools_dir} was drawn from model sha256 {sha}, {self.model} is {mine}")
        return read_pools(self.pools_dir, self.split), settings, sha

    def prepare(self) -> tuple[list[ProblemPool], Mapping[str, tuple[Config | None, GatewayPin]], dict[str, Any], str]:
        pools, settings, sha = self.pools()
        k = min(len(d.sampled) for p in pools for d in p.draws.values())
        configs = resolve_configs(self.configs, k, settings, self.confidence)
        return chosen_pools(pools, [c for c, _ in configs.values()], self.limit), configs, settings, sha

    def settings_header(
        self, settings: dict[str, Any], configs: Mapping[str, tuple[Config | None, GatewayPin]]
    ) -> dict[str, Any]:
        return {
            "pool_settings": settings, "effort": self.effort, "seed": self.seed, "confidence": self.confidence,
            "pins": {name: asdict(pin) for name, (_, pin) in configs.items()},
        }  # fmt: skip

    async def run(self) -> int:
        """Send every pending (problem, configuration) request; returns how many were sent."""
        pools, configs, settings, sha = self.prepare()
        records, headers, seq = read_records(self.out)
        wanted = self.settings_header(settings, configs)
        for h in headers:
            if h.get("model_sha256") != sha or h.get("settings", {}).get("pool_settings") != settings:
                raise ValidationError(f"{self.out} holds records of another model or pools; use another --out")
            for name, pin in (h.get("settings", {}).get("pins") or {}).items():
                if name in wanted["pins"] and pin != wanted["pins"][name]:
                    raise ValidationError(f"{self.out}: {name} was sent as {pin}, now {wanted['pins'][name]}")
        latest = {(r["problem_id"], r["config"]): r for r in records}
        todo = [(p, name) for p in pools for name in configs
                if (p.id, name) not in latest or (self.retry_errors and latest[(p.id, name)].get("error"))]  # fmt: skip
        self.log(f"{self.model} {self.split}: {len(pools)} problems x {len(configs)} configurations; "
                 f"{len(latest)} recorded, {len(todo)} to send; code {git_describe()}")  # fmt: skip
        deadline = time.monotonic() + self.hours * 3600 if self.hours else None
        per_chunk = max(1, self.chunk_size * len(configs))
        sent = 0
        try:
            for start in range(0, len(todo), per_chunk):
                if deadline is not None and time.monotonic() > deadline:
                    self.log("time limit reached")
                    break
                batch = todo[start : start + per_chunk]
                done: list[dict[str, Any]] = []
                locked = self.lock if self.lock is not None else not self.base_url
                with model_lock() if locked else nullcontext(0.0) as waited:
                    began = time.monotonic()
                    try:
                        await self._send_batch(batch, configs, deadline, done)
                    finally:  # an interrupted chunk keeps the requests it finished
                        if done:
                            path = self._write(seq, sha, wanted, done, time.monotonic() - began, waited)
                            seq, sent = seq + 1, sent + len(done)
                            errors = sum(1 for r in done if r["error"])
                            self.log(f"{path.name}: {len(done)} requests in {time.monotonic() - began:.0f}s (waited "
                                     f"{waited:.0f}s for the lock), {errors} infrastructure error(s); "
                                     f"{sent}/{len(todo)} this run")  # fmt: skip
                if len(done) < len(batch):
                    self.log("time limit reached inside a chunk: the rest is sent on the next run")
                    break
        finally:
            self.grader.stop()
            if self._stack is not None:
                self._stack.stop()
        return sent

    def _write(self, seq: int, sha: str, wanted: dict[str, Any], done: Sequence[dict[str, Any]], wall: float,
               waited: float) -> Path:  # fmt: skip
        header = {
            "git_describe": git_describe(), "model": self.model, "model_sha256": sha,
            "pools": relative_to_root(self.pools_dir), "split": self.split, "settings": wanted,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(wall, 1), "lock_wait_s": round(waited, 1), "loadavg": load_average(), "base_url": self._url,
        }  # fmt: skip
        return write_records(self.out, self.split, seq, header, done)

    async def _send_batch(self, batch: Sequence[tuple[ProblemPool, str]], configs: Mapping[str, tuple[Any, GatewayPin]],
                          deadline: float | None, done: list[dict[str, Any]]) -> None:  # fmt: skip
        """One after another, so each latency is the request's own (as the pools' calls are);
        each finished record is appended to ``done`` at once."""
        url = await asyncio.to_thread(self._gateway)
        client = openai.AsyncOpenAI(base_url=url, api_key=self.api_key, timeout=self.timeout_s, max_retries=0)
        try:
            for pool, name in batch:
                if deadline is not None and time.monotonic() > deadline:
                    break
                pin = configs[name][1]
                seed = request_seed(pool.id, 0, self.seed)
                cell = Cell(self.effort, pin.strategy, pin.n, pin.token_budget, params=tuple(pin.params.items()))
                problem = Problem.from_dict(pool.problem)
                kwargs = request_kwargs(self.model, problem.messages(), cell, temperature=pin.temperature,
                                        max_tokens=pin.max_tokens, seed=seed)  # fmt: skip
                reply = await send(client, kwargs, stream=False)
                record = await to_record(pool, name, pin, seed, reply, self.grader)
                done.append(record)
                verdict = record["error_kind"] or ("right" if record["correct"] else "wrong")
                self.log(f"  {pool.id} {name}: {verdict} ({record['completion_tokens']} tok, {reply.latency_s:.1f}s)")
        finally:
            await client.close()

    def _gateway(self) -> str:
        """The gateway's OpenAI base URL, starting the local stack on first use (inside the lock:
        loading the model is a model workload)."""
        if self._url:
            return self._url
        if self.base_url:
            self._url = self.base_url.rstrip("/")
            return self._url
        self._stack, self._url = start_stack(self.model, self.timeout_s, self.log)
        self.log(f"gateway at {self._url}")
        return self._url

    # --------------------------------------------------------------------------- report
    def write_report(self, seed: int = 0, limit: int = 128) -> dict[str, Any]:
        """Price the configurations on the problems recorded and compare; ``report.json`` beside
        the records."""
        all_pools = read_pools(self.pools_dir, self.split)
        records, headers, _ = read_records(self.out)
        settings, sha = pool_settings(self.pools_dir, self.split)
        k = min(len(d.sampled) for p in all_pools for d in p.draws.values())
        configs = resolve_configs(self.configs, k, settings, self.confidence)

        def stop(votes: Any, remaining: float) -> bool:
            return should_stop(votes, remaining, self.confidence).stop

        pricer = Pricer(fit_latency(all_pools), stop, limit=limit, seed=seed)
        recorded = {r["problem_id"] for r in records}
        priced: dict[str, dict[str, Estimate]] = {}
        for name, (config, _) in configs.items():
            for pool in all_pools:
                if pool.id in recorded:
                    estimate = pricer.estimate(pool, config)
                    if estimate is not None:
                        priced.setdefault(name, {})[pool.id] = estimate
        live = [LiveRecord.from_dict(r) for r in records if r["config"] in configs]
        checks = report(list(configs), priced, live, seed=seed)
        newest = latest_records(live)
        provenance = {
            "git_describe": git_describe(),
            "model": self.model,
            "model_sha256": sha,
            "pools": relative_to_root(self.pools_dir),
            "split": self.split,
            "pool_settings": settings,
            "records": len(records),
            "chunks": len(headers),
            "chunk_code": sorted({str(h.get("git_describe")) for h in headers}),
            "latency_model": asdict(pricer.latency),
            "test": "agrees: the live accuracy lies inside the priced 95% interval "
            "(bootstrap over problems, widened to Wilson)",
        }
        per_problem: dict[str, dict[str, dict[str, Any]]] = {}
        for name, per in priced.items():
            for pid, e in per.items():
                mine = newest.get((pid, name))
                per_problem.setdefault(name, {})[pid] = {"priced": e.accuracy, "live": mine.correct if mine else None}
        body = {
            "provenance": provenance,
            "checks": [c.as_dict() for c in checks],
            "per_problem": per_problem,
            "markdown": markdown(checks),
        }
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / REPORT).write_text(json.dumps(body, indent=1) + "\n")
        return body


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="the pools' model, as the gateway serves it")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--split", choices=["calibration", "heldout"], default="calibration")
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="priced configurations to run live (comma-separated)")
    p.add_argument("--limit", type=int, default=60, help="problems (0: every pool the configurations price)")
    p.add_argument("--base-url", default="", help="a running gateway's /v1 URL (default: start ttc stack)")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    p.add_argument("--hours", type=float, default=0.0, help="stop sending after this long (0: no limit)")
    p.add_argument("--chunk-size", type=int, default=5, help="problems per chunk file")
    p.add_argument("--effort", default="medium", help="reasoning_effort label of the pinned requests")
    p.add_argument("--seed", type=int, default=0, help="request seed and bootstrap seed")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence (:es configurations)")
    p.add_argument("--timeout-s", type=float, default=1800.0, help="client and job timeout per request")
    p.add_argument(
        "--retry-errors", action="store_true", help="re-send requests whose record is an infrastructure error"
    )
    p.add_argument("--lock", action=argparse.BooleanOptionalAction, default=None,
                   help="take the model lock per chunk (default: when it starts its own stack)")  # fmt: skip
    p.add_argument("--report-only", action="store_true", help="send nothing; report from the records so far")
    p.add_argument(
        "--out", type=Path, default=None, help="records folder (default docs/data/calibration/validation/<model>)"
    )


def run(a: argparse.Namespace, kind: type[Validation] | None = None, default_out: Path = DEFAULT_VALIDATION) -> int:
    """The ``validate`` command; ``kind``/``default_out``: a subclass's run (``live``) through the same door."""
    validation = (kind or Validation)(
        model=a.model, split=a.split, pools_dir=a.pools or DEFAULT_POOLS / a.model,
        out=a.out or default_out / a.model, configs=[c for c in a.configs.split(",") if c.strip()],
        limit=a.limit, base_url=a.base_url, hours=a.hours, chunk_size=a.chunk_size, effort=a.effort, seed=a.seed,
        confidence=a.confidence, timeout_s=a.timeout_s, retry_errors=a.retry_errors, api_key=a.api_key,
        lock=a.lock,
    )  # fmt: skip
    # SIGTERM unwinds through ``finally`` so a stack this command started stops too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if not a.report_only:
            asyncio.run(validation.run())
        body = validation.write_report(seed=a.seed)
    except ValidationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(body["markdown"])
    print(f"report: {validation.out / REPORT}")
    return 0
