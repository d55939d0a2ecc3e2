"""Chaos suite (``make chaos``): the embedded-model stack under faults and under overload, in figures.

**Fault run.** Traffic (plain, streaming and background chat completions, small ``max_tokens``,
effort none or low) runs while the orchestrator worker is SIGKILLed again and again and the
policy, the verifier and Redis (with its append-only file) are restarted; ``ttc stack``
restarts each. It counts the requests that succeeded and keeps every other one with its reason
(``failures``), lost jobs (a request that never ends; a job record in Redis, found by scanning
every ``ttc:job:*`` record, that is not final or has no result once traffic stops; an id a
client received with no record), duplicated results (more than one result event on a job's
stream), 5xx answers (those of requests in flight during a policy restart apart), truncated
streams (no ``[DONE]`` or no finish reason), malformed answers, the workers' policy retries
(``ttc_orchestrator_policy_retries_total``, read after each policy restart) and the recovery time
of each fault (fault to the first successful request after it).

**Overload run.** The sustainable rate is measured first (closed loop at the worker's
concurrency); then requests arrive at ``--overload-factor`` times that rate for
``--overload-seconds``. It counts 5xx, checks that every rejection is a 429 with Retry-After,
that brownout shows (``ttc.degraded_by`` in answers, and the degradation and shed counters in
the gateway's metrics), and reports the p99 latency of admitted requests.

Traffic goes only to 127.0.0.1; every loop is bounded in count and in time. Progress goes to
``<out>/chaos.log``, figures to ``<out>/chaos.json`` and stdout.

    python -m loadtests.chaos --out reports/chaos            # the full run
    python -m loadtests.chaos --short --out reports/chaos    # a few requests and faults
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from loadtests.chaos_records import RecordScan, count_result_events, scan_records
from loadtests.chaos_stack import ROOT, LocalStack
from loadtests.chaos_traffic import Outcome, Traffic


@dataclass
class Config:
    model: str = "smollm2-135m"
    requests: int = 200
    worker_kills: int = 20
    policy_restarts: int = 2
    verifier_restarts: int = 2
    redis_restarts: int = 2
    clients: int = 3
    gap_s: float = 10.0  # after a fault recovered: longer than the stack's backoff reset (10 s)
    overload_factor: float = 10.0
    overload_seconds: float = 60.0
    calibrate_seconds: float = 20.0
    max_minutes: float = 40.0
    concurrency: int = 4


SHORT = Config(
    requests=12,
    worker_kills=2,
    policy_restarts=1,
    verifier_restarts=1,
    redis_restarts=1,
    clients=2,
    gap_s=2.0,
    overload_seconds=8.0,
    calibrate_seconds=6.0,
    max_minutes=8.0,
)


class Log:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the run
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        line = f"[{time.monotonic() - self.start:7.1f}s] {message}"
        print(line, flush=True)
        self.file.write(line + "\n")


def schedule(config: Config) -> list[str]:
    """The faults in order: worker kills with the restarts spread evenly among them."""
    others = (
        ["policy"] * config.policy_restarts
        + ["verifier"] * config.verifier_restarts
        + ["redis"] * config.redis_restarts
    )
    faults = ["orchestrator"] * config.worker_kills
    for i, name in enumerate(others):
        faults.insert(round((i + 1) * len(faults) / (len(others) + 1)) + i, name)
    return faults


@dataclass
class FaultFigures:
    faults: dict[str, int] = field(default_factory=dict)
    recovery_s: list[tuple[str, float]] = field(default_factory=list)
    # (service, fault time, first success after it), time.monotonic()
    windows: list[tuple[str, float, float]] = field(default_factory=list)
    restarts_logged: int = 0
    policy_retries: float = 0.0  # the worker's retry counter, summed over the policy restarts


async def _inject(stack: LocalStack, traffic: Traffic, config: Config, log: Log, figures: FaultFigures) -> None:
    deadline = time.monotonic() + config.max_minutes * 60
    for i, service in enumerate(schedule(config)):
        if time.monotonic() > deadline:
            log(f"fault budget of {config.max_minutes} min spent; {i} faults done")
            break
        await asyncio.sleep(config.gap_s)
        pid = stack.fault(service)
        hit = time.monotonic()
        figures.faults[service] = figures.faults.get(service, 0) + 1
        restarted = await asyncio.to_thread(stack.wait_restarted, service, pid)
        recovered = await traffic.probe_until_ok(since=hit, deadline=hit + 300)
        figures.recovery_s.append((service, recovered))
        figures.windows.append((service, hit, hit + recovered))
        if service == "policy":  # read before a later worker kill resets the counter
            figures.policy_retries += await _worker_metric(stack, "ttc_orchestrator_policy_retries_total")
        log(
            f"fault {i + 1}: {service} pid {pid} ({stack_signal(service)}); restarted after {restarted:.1f}s, "
            f"first success after {recovered:.1f}s"
        )


async def _worker_metric(stack: LocalStack, name: str) -> float:
    url = f"http://127.0.0.1:{stack.ports['orchestrator_metrics']}/metrics"
    async with httpx.AsyncClient() as client:
        return _metric((await client.get(url, timeout=10)).text, name)


def stack_signal(service: str) -> str:
    from loadtests.chaos_stack import FAULT_SIGNALS

    return FAULT_SIGNALS[service].name


async def fault_run(stack: LocalStack, config: Config, log: Log) -> dict[str, Any]:
    traffic = Traffic(stack.url, config.model, log)
    figures = FaultFigures()
    started = time.monotonic()
    async with traffic:
        faults = asyncio.create_task(_inject(stack, traffic, config, log, figures))
        outcomes = await traffic.run(
            config.requests,
            config.clients,
            until=faults,
            hard_cap=config.requests * 4,
            deadline=started + config.max_minutes * 60,
        )
        await faults
        scan = await scan_records(stack.redis_url, traffic.job_ids, wait_s=240, log=log)
    figures.restarts_logged = stack.restarts_logged()
    duplicates = count_result_events(stack.redis_url, scan.ids)
    probes: dict[str, Any] = {"requests": len(traffic.probe_statuses) + len(traffic.probe_errors)}
    probes |= {"http_5xx": sum(s >= 500 for s in traffic.probe_statuses), "transport_errors": traffic.probe_errors}
    return _fault_figures(outcomes, figures, scan, duplicates, probes, time.monotonic() - started)


def _fault_figures(
    outcomes: list[Outcome],
    figures: FaultFigures,
    scan: RecordScan,
    duplicates: dict[str, int],
    probes: dict[str, Any],
    seconds: float,
) -> dict[str, Any]:
    by_kind: dict[str, int] = {}
    for o in outcomes:
        by_kind[o.kind] = by_kind.get(o.kind, 0) + 1
    problems: dict[str, int] = {}
    for o in outcomes:
        if o.problem:
            problems[o.problem] = problems.get(o.problem, 0) + 1
    by_reason: dict[str, int] = {}
    for o in outcomes:
        by_reason[o.reason or "succeeded"] = by_reason.get(o.reason or "succeeded", 0) + 1
    policy = [(start, end) for name, start, end in figures.windows if name == "policy"]
    during = [o for o in outcomes if any(o.overlaps(start, end) for start, end in policy)]
    recoveries = [r for _, r in figures.recovery_s]
    return {
        "seconds": round(seconds, 1),
        "requests": len(outcomes),
        "by_kind": by_kind,
        "succeeded": sum(o.ok for o in outcomes),
        "failed": sum(not o.ok for o in outcomes),
        "outcomes": by_reason,
        # Every request that did not succeed, with its reason.
        "failures": [
            {"kind": o.kind, "reason": o.reason, "statuses": o.statuses, "job_id": o.job_id}
            for o in outcomes
            if not o.ok
        ],
        "faults": figures.faults,
        "restarts_logged_by_stack": figures.restarts_logged,
        "lost": sum(o.problem == "lost" for o in outcomes) + scan.lost,
        "job_records": scan.figures(),
        "duplicated_results": sum(1 for n in duplicates.values() if n > 1),
        "jobs_checked_for_duplicates": len(duplicates),
        "http_5xx": sum(s >= 500 for o in outcomes for s in o.statuses),
        "requests_with_5xx": sum(any(s >= 500 for s in o.statuses) for o in outcomes),
        "in_flight_during_policy_restarts": len(during),
        "succeeded_during_policy_restarts": sum(o.ok for o in during),
        "http_5xx_during_policy_restarts": sum(s >= 500 for o in during for s in o.statuses),
        "policy_retries": figures.policy_retries,
        "probes": probes,
        "truncated": sum(o.problem == "truncated" for o in outcomes),
        "malformed": sum(o.problem.startswith("malformed") for o in outcomes),
        "problems": problems,
        "recovery_s_max": round(max(recoveries), 2) if recoveries else None,
        "recovery_s_p50": round(statistics.median(recoveries), 2) if recoveries else None,
        "recovery_s_by_fault": _max_by(figures.recovery_s),
        "latency_s_p50": _pct([o.latency_s for o in outcomes if o.ok], 50),
        "latency_s_p99": _pct([o.latency_s for o in outcomes if o.ok], 99),
    }


def _max_by(pairs: list[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in pairs:
        out[name] = round(max(out.get(name, 0.0), value), 2)
    return out


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1)], 3)


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line.split("{")[0].split(" ")[0] == name:
            total += float(line.rpartition(" ")[2])
    return total


async def overload_run(stack: LocalStack, config: Config, log: Log) -> dict[str, Any]:
    traffic = Traffic(stack.url, config.model, log)
    async with traffic:
        rate = await traffic.sustainable_rate(config.concurrency, config.calibrate_seconds)
        offered = rate * config.overload_factor
        log(f"overload: sustainable {rate:.2f} req/s; offering {offered:.2f} req/s for {config.overload_seconds:.0f}s")
        before = (await traffic.http.get(f"{stack.url}/metrics", timeout=10)).text
        outcomes = await traffic.open_loop(offered, config.overload_seconds, deadline_s=config.overload_seconds + 300)
        after = (await traffic.http.get(f"{stack.url}/metrics", timeout=10)).text
        scan = await scan_records(stack.redis_url, traffic.job_ids, wait_s=120, log=log)  # both runs' records
    admitted = [o for o in outcomes if o.final_status == 200]
    rejected = [o for o in outcomes if o.final_status not in (200, None)]
    bad_rejections = [o for o in rejected if o.final_status != 429 or not o.retry_after]
    deltas = {
        name: _metric(after, name) - _metric(before, name)
        for name in ("ttc_gateway_effort_degradations_total", "ttc_gateway_shed_total")
    }
    return {
        "sustainable_rps": round(rate, 3),
        "offered_rps": round(offered, 3),
        "seconds": config.overload_seconds,
        "requests": len(outcomes),
        "admitted": len(admitted),
        "rejected_429": sum(o.final_status == 429 for o in outcomes),
        "rejections_not_429_with_retry_after": len(bad_rejections),
        "http_5xx": sum(s >= 500 for o in outcomes for s in o.statuses),
        "no_answer": sum(o.final_status is None for o in outcomes),
        "lost": sum(o.problem == "lost" for o in outcomes) + scan.lost,
        "job_records": scan.figures(),
        "malformed": sum(o.problem.startswith("malformed") for o in admitted),
        "degraded_answers": sum(bool(o.degraded_by) for o in admitted),
        "degraded_by": sorted({d for o in admitted for d in o.degraded_by}),
        "metric_deltas": deltas,
        "admitted_latency_s_p50": _pct([o.latency_s for o in admitted], 50),
        "admitted_latency_s_p99": _pct([o.latency_s for o in admitted], 99),
    }


def verdict(fault: dict[str, Any], overload: dict[str, Any]) -> list[str]:
    """What missed its target (empty: all met)."""
    missed = [
        f"{k}={fault[k]}"
        for k in ("failed", "lost", "duplicated_results", "http_5xx", "truncated", "malformed")
        if fault[k]
    ]
    if fault["probes"]["http_5xx"]:
        missed.append(f"probes http_5xx={fault['probes']['http_5xx']}")
    missed += [
        f"overload {k}={overload[k]}"
        for k in ("http_5xx", "rejections_not_429_with_retry_after", "no_answer", "lost")
        if overload[k]
    ]
    if not overload["degraded_answers"] or not overload["metric_deltas"]["ttc_gateway_effort_degradations_total"]:
        missed.append("overload: no brownout seen")
    return missed


def provenance(model: str) -> dict[str, Any]:
    """What produced a report: the code (``git describe --dirty``), the model file, the host."""
    from services.policy.models import REGISTRY

    git = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True)
    spec = REGISTRY.get(model)
    return {
        "git_describe": git.stdout.strip() or git.stderr.strip(),
        "model_sha256": spec.sha256 if spec else None,
        "cpus": os.cpu_count(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_start": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.chaos", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--short", action="store_true", help="a few requests and faults (what make test runs)")
    parser.add_argument("--out", default="reports/chaos", help="directory of chaos.log and chaos.json")
    defaults = Config()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=None)
    args = parser.parse_args(argv)
    base = SHORT if args.short else defaults
    config = Config(**{k: v if getattr(args, k) is None else getattr(args, k) for k, v in asdict(base).items()})
    out = Path(args.out)
    log = Log(out / "chaos.log")
    started = provenance(config.model)
    log(f"chaos: {json.dumps(asdict(config))}; {json.dumps(started)}")
    stack = LocalStack(model=config.model, concurrency=config.concurrency)
    try:
        log(f"starting ttc stack in {stack.run_dir}")
        stack.start()
        log(f"stack up at {stack.url}")
        fault = asyncio.run(fault_run(stack, config, log))
        log("fault run: " + json.dumps(fault))
        overload = asyncio.run(overload_run(stack, config, log))
        log("overload run: " + json.dumps(overload))
    except BaseException:
        log("stack log tail:\n" + stack.log())
        raise
    finally:
        stack.stop()
    missed = verdict(fault, overload)
    report = {
        "config": asdict(config),
        **started,
        "load_average_end": os.getloadavg(),
        "seconds": round(time.monotonic() - log.start, 1),
        "fault": fault,
        "overload": overload,
        "missed": missed,
        "command": " ".join(sys.argv),
    }
    (out / "chaos.json").write_text(json.dumps(report, indent=2) + "\n")
    log(f"targets missed: {missed}" if missed else "all targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
