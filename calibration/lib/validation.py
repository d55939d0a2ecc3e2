"""The live run of the simulator check, shared by ``validate`` and ``live``: pinned requests
through the gateway, one per (problem, configuration), recorded in resumable chunks.

For each problem (up to ``limit``) and each configuration, one request goes through the gateway
with the official ``openai`` SDK, pinned (``ttc`` extension) to the request that runs the
configuration (:func:`evaluation.pricing.live_records.gateway_pin`; a configuration it cannot
map is refused before anything is sent), with the pools' temperature and token caps. The reply
is checked as the pools check theirs (:mod:`~.replies`); an infrastructure error is recorded as
such and never counted wrong. Records go in chunks (:mod:`~.records`), so a run stopped at any
point resumes with the pairs no record holds. Without ``base_url`` it starts ``ttc stack`` on
the pools' model (:mod:`~.stack`) and takes the shared model lock (``/tmp/ttc-model.lock``) per
chunk. ``live`` subclasses :class:`Validation` with its own configurations and subset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from calibration.lib.gateway_run import GatewayRun, run_then_report
from calibration.lib.grading import CodeGrader
from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS, relative_to_root
from calibration.lib.pool_run import model_sha256
from calibration.lib.records import REPORT, LiveRunError, read_records, write_records
from calibration.lib.replies import checked, gave_up, reply_fields
from calibration.lib.stack import start_stack
from evaluation.heldout.simulator_check import markdown, report
from evaluation.pools.provenance import git_describe, load_average
from evaluation.pools.store import ProblemPool, iter_chunks, read_pools
from evaluation.pricing.live_records import GatewayPin, LiveRecord, Unmappable, gateway_pin, latest_records
from evaluation.pricing.pricer import Config, Estimate, Pricer
from evaluation.pricing.table import default_configs, fit_latency
from evaluation.problems.datasets import Problem, split_key, split_name
from loadtests.client import Reply, request_kwargs, send
from loadtests.grid import Cell
from loadtests.runner import request_seed
from services.search.strategies.stopping import should_stop

DEFAULT_CONFIGS = "pot@1,sc@4,pot@4"


def pool_settings(directory: Path, split: str) -> tuple[dict[str, Any], str]:
    """The draw settings and model sha256 every chunk of ``split`` shares (pools drawn with
    other settings or models do not price one configuration)."""
    chunks = list(iter_chunks(directory, split))
    if not chunks:
        raise LiveRunError(f"no {split} pools under {directory}")
    settings = {json.dumps(c.header.get("settings"), sort_keys=True) for c in chunks}
    shas = {str(c.header.get("model_sha256")) for c in chunks}
    if len(settings) > 1 or len(shas) > 1:
        raise LiveRunError(f"{directory}: chunks of {split} differ in draw settings or model ({len(settings)} "
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
            raise LiveRunError(f"configuration {name!r} is not priced from pools of k={k}")
        try:
            chosen[name] = (known[name], gateway_pin(known[name], settings, confidence=confidence))
        except Unmappable as err:
            raise LiveRunError(str(err)) from err
    if not chosen:
        raise LiveRunError("no configurations to validate")
    return chosen


def chosen_pools(pools: Sequence[ProblemPool], configs: Sequence[Config], limit: int) -> list[ProblemPool]:
    """The first ``limit`` pools (0: all) that every configuration prices, in draw order (the
    draw interleaves families, so a prefix covers them all)."""
    usable = [p for p in pools if all(c.applies(p) for c in configs)]
    return usable[:limit] if limit else usable


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


# ------------------------------------------------------------------------------- the run
@dataclass(kw_only=True)
class Validation(GatewayRun):
    split: str
    configs: list[str]
    limit: int = 60
    effort: str = "medium"
    confidence: float = 0.9

    def pools(self) -> tuple[list[ProblemPool], dict[str, Any], str]:
        """The split's pools, their draw settings and model sha256 (refused for another model)."""
        settings, sha = pool_settings(self.pools_dir, self.split)
        if sha != (mine := model_sha256(self.model)):
            raise LiveRunError(f"{self.pools_dir} was drawn from model sha256 {sha}, {self.model} is {mine}")
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
                raise LiveRunError(f"{self.out} holds records of another model or pools; use another --out")
            for name, pin in (h.get("settings", {}).get("pins") or {}).items():
                if name in wanted["pins"] and pin != wanted["pins"][name]:
                    raise LiveRunError(f"{self.out}: {name} was sent as {pin}, now {wanted['pins'][name]}")
        latest = {(r["problem_id"], r["config"]): r for r in records}
        todo = [(p, name) for p in pools for name in configs
                if (p.id, name) not in latest or (self.retry_errors and latest[(p.id, name)].get("error"))]  # fmt: skip
        self.log(f"{self.model} {split_name(self.split)}: {len(pools)} problems x {len(configs)} configurations; "
                 f"{len(latest)} recorded, {len(todo)} to send; code {git_describe()}")  # fmt: skip
        return await self.send_chunks(
            todo,
            max(1, self.chunk_size * len(configs)),
            seq,
            lambda batch, deadline, done: self._send_batch(batch, configs, deadline, done),
            lambda seq, done, wall, waited: self._write(seq, sha, wanted, done, wall, waited),
        )

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
        client = self.client(url)
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
    """The flags ``validate`` and ``live`` share."""
    p.add_argument("--model", default=DEFAULT_MODEL, help="the pools' model, as the gateway serves it")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--split", choices=["calibration", "development"], default="calibration")
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


def run_validation(a: argparse.Namespace, kind: type[Validation], default_out: Path) -> int:
    """Run ``kind`` (``validate``'s :class:`Validation`, ``live``'s subclass) as ``a`` asks, then report."""
    validation = kind(
        model=a.model, split=split_key(a.split), pools_dir=a.pools or DEFAULT_POOLS / a.model,
        out=a.out or default_out / a.model, configs=[c for c in a.configs.split(",") if c.strip()],
        limit=a.limit, base_url=a.base_url, hours=a.hours, chunk_size=a.chunk_size, effort=a.effort, seed=a.seed,
        confidence=a.confidence, timeout_s=a.timeout_s, retry_errors=a.retry_errors, api_key=a.api_key,
        lock=a.lock,
    )  # fmt: skip

    def send() -> None:
        if not a.report_only:
            asyncio.run(validation.run())

    return run_then_report(validation, send, lambda: validation.write_report(seed=a.seed))
