"""``routed``: the development split's ladder measured through the gateway, routed by effort,
with the official ``openai`` SDK. Plan and report are pure: :mod:`evaluation.heldout.routed_plan`.

The table is the one ``calibrate`` fits from the calibration pools
(:func:`calibration.lib.fit.fit_pools`), written to ``<out>/routing.<model>.json``, or
``--table``. Without ``--base-url`` it starts ``ttc stack`` serving that table for the model
(``TTC_GATEWAY_ROUTING_TABLES``) under the model lock per chunk; with ``--base-url`` the ladder
card (``GET /v1/models/{model}/ladder``) must carry the table's provenance, or nothing is sent.
For each development pool (up to ``--limit``, in draw order) every effort's route is predicted as
the gateway routes (:func:`calibration.lib.gateway_routes.route_questions`), efforts with one
route share one unpinned request at their lowest effort, with the pools' temperature and
chain-of-thought cap. Records: chunks under ``docs/data/calibration/routed/<model>/``
(:mod:`calibration.lib.records`: resumable, whole or absent); the report (printed,
``report.json``: :mod:`calibration.lib.routed_report`) carries the Must-show checks
(:mod:`evaluation.heldout.checks`) and, when this run fitted the table, the offline-priced
ladder on the same problems beside it. The development split was looked at while the ladder
was built, so its figures are development figures, not held-out ones (``sealed`` runs the
held-out test split through the gateway).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from calibration.lib.fit import FittedPools, fit_pools
from calibration.lib.gateway_routes import LADDER_EFFORTS, route_questions
from calibration.lib.gateway_run import GatewayRun, run_then_report
from calibration.lib.grading import CodeGrader
from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS, DEFAULT_ROUTED, ROOT, safe_name
from calibration.lib.pool_run import model_sha256
from calibration.lib.records import REPORT, LiveRunError, read_records, write_records
from calibration.lib.replies import checked, gave_up, regrade, reply_fields
from calibration.lib.routed_report import report
from calibration.lib.stack import start_stack
from calibration.lib.validation import pool_settings
from evaluation.heldout.routed_plan import (
    PlannedRequest,
    adoptable,
    group_efforts,
    pending,
    provenance_hash,
    route_mismatch,
)
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import ProblemPool, read_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY, Problem
from loadtests.client import Reply, request_kwargs, send
from loadtests.grid import Cell
from loadtests.runner import request_seed
from services.common.ports import free_port
from services.gateway.routing import RoutingTable

NAME = "routed"
HELP = "the development split's ladder through the gateway, routed by effort (resumes)"
SPLIT = DEVELOPMENT_KEY


async def to_record(
    pool: ProblemPool, req: PlannedRequest, seed: int, reply: Reply, grader: CodeGrader
) -> dict[str, Any]:
    """One request's record: the efforts it stands for, the predicted route, the verdict by the
    pools' checker; an infrastructure failure or a routing mismatch sets ``error`` and leaves
    ``correct`` unset (never wrong)."""
    ext = reply.ext
    record: dict[str, Any] = {
        "type": "record", "problem_id": pool.id, "family": pool.family, "kind": pool.kind, "effort": req.effort,
        "efforts": list(req.efforts), "route": req.route, "seed": seed, "correct": None, "answer": "",
        **reply_fields(reply), "n": ext.get("n"), "effort_applied": ext.get("effort_applied"),
        "difficulty_bin": ext.get("difficulty_bin"), "task_type": ext.get("task_type"),
        "confidence": ext.get("confidence"),
    }  # fmt: skip
    if reply.error:
        return record
    mismatch = route_mismatch(req.route, req.effort, ext)
    if mismatch:
        return record | {"error": f"routed otherwise than predicted: {mismatch}", "error_kind": "route"}
    if (ended := gave_up(record, reply)) is not None:
        return ended
    return await checked(record, pool, reply.text, grader)


@dataclass(kw_only=True)
class RoutedRun(GatewayRun):
    table_path: Path | None = None
    limit: int = 200
    large_model: str = ""  # served beside as the escalation deployment; its pools let cascades compete
    reuse: Path | None = None  # another run's records, standing where its table routes alike
    _fitted: FittedPools | None = None

    def table(self) -> tuple[RoutingTable, Path]:
        """The table served: ``--table``, else the calibration fit, written under ``out``."""
        if self.table_path is not None:
            return RoutingTable.model_validate_json(self.table_path.read_text()), self.table_path
        self._fitted = self.fit()
        name = safe_name(self.model) + (f"+{safe_name(self.large_model)}" if self.large_model else "")
        path = self.out / f"routing.{name}.json"
        self.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self._fitted.fit.table, indent=1) + "\n")
        return RoutingTable.model_validate(self._fitted.fit.table), path

    def fit(self) -> FittedPools:
        """The calibration fit (:func:`calibration.lib.fit.fit_pools`), with the cascades
        onto ``large_model`` competing when one is served."""
        large = DEFAULT_POOLS / self.large_model if self.large_model else None
        return fit_pools(self.pools_dir, self.model, seed=self.seed, large_pools_dir=large)

    def plan(self, table: RoutingTable) -> tuple[list[ProblemPool], list[PlannedRequest]]:
        pools = read_pools(self.pools_dir, SPLIT)
        pools = pools[: self.limit] if self.limit else pools
        efforts = list(LADDER_EFFORTS)
        routes = route_questions(table, {p.id: str(p.problem["question"]) for p in pools}, efforts)
        plan = [
            req
            for p in pools
            for req in group_efforts(p.id, {e: routes[e][p.id].model_dump() for e in efforts}, efforts)
        ]
        return pools, plan

    async def run(self) -> int:
        """Send every pending request; returns how many were sent."""
        table, path = self.table()
        settings, sha = pool_settings(self.pools_dir, SPLIT)
        if sha != model_sha256(self.model):
            raise LiveRunError(f"{self.pools_dir} was drawn from another model than {self.model}")
        pools, plan = self.plan(table)
        by_id = {p.id: p for p in pools}
        wanted = {
            "table": str(path),
            "table_provenance": provenance_hash(table.provenance),
            "seed": self.seed,
            "temperature": float(settings.get("temperature", 0.7)),
            "max_tokens": int(settings.get("cot_max_tokens", 1024)),
            "pool_settings": settings,
        }
        records, headers, seq = read_records(self.out)
        for h in headers:
            if (
                h.get("model_sha256") != sha
                or h.get("settings", {}).get("table_provenance") != wanted["table_provenance"]
            ):
                raise LiveRunError(f"{self.out} holds records of another model or table; use another --out")
        todo = pending(plan, records, self.retry_errors)
        if self.reuse is not None and todo:
            seq = self.adopt(todo, wanted, sha, seq)
            records = read_records(self.out)[0]
            todo = pending(plan, records, self.retry_errors)
        self.log(
            f"{self.model}: {len(pools)} development problems, {len(plan)} requests planned for "
            f"{len(plan) and sum(len(r.efforts) for r in plan)} (problem, effort) pairs; {len(todo)} to send"
        )
        return await self.send_chunks(
            todo,
            max(1, self.chunk_size * len(plan) // max(1, len(pools))),
            seq,
            lambda batch, deadline, done: self._send(batch, by_id, wanted, path, table, deadline, done),
            lambda seq, done, wall, _: write_records(
                self.out, SPLIT, seq, self._header(sha, wanted, round(wall, 1)), done
            ),
        )

    def adopt(self, todo: Sequence[PlannedRequest], wanted: dict[str, Any], sha: str, seq: int) -> int:
        """Copy into this run's folder, as one chunk, the records of ``reuse`` that stand for
        pending pairs (:func:`~evaluation.heldout.routed_plan.adoptable`: same configuration routed);
        that run must have sent the same requests (model, seed, temperature, token cap, pool
        settings), or nothing is adopted. Returns the next chunk number."""
        assert self.reuse is not None
        other, headers, _ = read_records(self.reuse)
        same = ("seed", "temperature", "max_tokens", "pool_settings")
        for h in headers:
            settings = h.get("settings", {})
            if h.get("model_sha256") != sha or any(settings.get(k) != wanted[k] for k in same):
                raise LiveRunError(f"{self.reuse} sent other requests (model or {', '.join(same)}); not adopted")
        adopted = adoptable(todo, other, str(self.reuse))
        if not adopted:
            self.log(f"{self.reuse}: no record stands for a pending request")
            return seq
        header = self._header(sha, wanted, 0.0) | {
            "adopted_from": {"dir": str(self.reuse),
                             "tables": sorted({str(h["settings"].get("table")) for h in headers}),
                             "git_describe": sorted({str(h.get("git_describe")) for h in headers})},
        }  # fmt: skip
        written = write_records(self.out, SPLIT, seq, header, adopted)
        pairs = sum(len(r["efforts"]) for r in adopted)
        self.log(f"{written.name}: {len(adopted)} records adopted from {self.reuse} ({pairs} (problem, effort) pairs)")
        return seq + 1

    def _header(self, sha: str, wanted: dict[str, Any], wall_s: float) -> dict[str, Any]:
        """A records chunk's header: the code, model, request settings and gateway that wrote it."""
        return {"git_describe": git_describe(), "model": self.model, "model_sha256": sha, "settings": wanted,
                "base_url": self._url, "wall_s": wall_s,
                "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip

    async def _send(
        self,
        batch: Sequence[PlannedRequest],
        by_id: dict[str, ProblemPool],
        wanted: dict[str, Any],
        path: Path,
        table: RoutingTable,
        deadline: float | None,
        done: list[dict[str, Any]],
    ) -> None:
        """One after another (each latency the request's own); no ``ttc`` pin: the gateway routes."""
        url = await asyncio.to_thread(self._gateway, path, table)
        client = self.client(url)
        try:
            for req in batch:
                if deadline is not None and time.monotonic() > deadline:
                    break
                pool = by_id[req.problem_id]
                seed = request_seed(pool.id, 0, self.seed)
                kwargs = request_kwargs(
                    self.model,
                    Problem.from_dict(pool.problem).messages(),
                    Cell(req.effort),
                    temperature=wanted["temperature"],
                    max_tokens=wanted["max_tokens"],
                    seed=seed,
                )
                record = await to_record(pool, req, seed, await send(client, kwargs, stream=False), self.grader)
                done.append(record)
                verdict = record["error_kind"] or ("right" if record["correct"] else "wrong")
                self.log(f"  {pool.id} {','.join(req.efforts)}: {verdict} ({record['completion_tokens']} tok)")
        finally:
            await client.close()

    def _gateway(self, path: Path, table: RoutingTable) -> str:
        """The gateway's /v1 URL: a running one whose ladder card carries this table's provenance
        (refused otherwise), or a local stack started serving the table (inside the lock)."""
        if self._url:
            return self._url
        if self.base_url:
            url = self.base_url.rstrip("/")
            card = httpx.get(f"{url}/models/{self.model}/ladder", timeout=30).json()
            served = provenance_hash((card.get("table") or {}).get("provenance") or {})
            if served != provenance_hash(table.provenance):
                raise LiveRunError(
                    f"{url} serves {self.model} with another table (provenance {served[:12]}, "
                    f"{path} is {provenance_hash(table.provenance)[:12]})"
                )
            self._url = url
            return url
        env = {"TTC_GATEWAY_ROUTING_TABLES": f"{self.model}={path.resolve()}"}
        if self.large_model:
            env |= {"TTC_STACK_LARGE_MODEL": self.large_model, "TTC_STACK_LARGE_MODEL_PORT": str(free_port()),
                    "TTC_STACK_LARGE_MODEL_METRICS_PORT": str(free_port())}  # fmt: skip
        self._stack, self._url = start_stack(self.model, self.timeout_s, self.log, env, f"serving {path}")
        return self._url

    async def regrade(self) -> int:
        """Every kept reply re-checked by today's checker (:func:`calibration.lib.replies.regrade`)."""
        try:
            return await regrade(self.out, {p.id: p for p in read_pools(self.pools_dir, SPLIT)}, self.grader)
        finally:
            self.grader.stop()

    def write_report(self) -> dict[str, Any]:
        """Every record so far: live rows per task kind and effort, the Must-show checks, errors,
        and the offline-priced ladder on the same problems when this run fitted the table."""
        served: RoutingTable | None = None
        if self._fitted is None and self.table_path is None:
            self.table()  # the fit this run's table came from prices the offline ladder
        elif self.table_path is not None:
            served = self.table()[0]
            if self._fitted is None and fitted_on(served, self.pools_dir):
                # A table fitted on these very pools (the shipped one): the fit gives the offline
                # ladder its configurations and budgets, the served table its routes.
                self._fitted = self.fit()
        records, headers, _ = read_records(self.out)
        body = report(
            records,
            list(LADDER_EFFORTS),
            headers,
            self._fitted,
            read_pools(self.pools_dir, SPLIT),
            table=served,
            large_pools=read_pools(DEFAULT_POOLS / self.large_model, SPLIT) if self.large_model else (),
        )
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / REPORT).write_text(json.dumps(body, indent=1, default=str) + "\n")
        return body


def fitted_on(table: RoutingTable, pools_dir: Path) -> bool:
    """Whether ``table`` was fitted on the pools in ``pools_dir`` (its provenance names that folder)."""
    named = str((table.provenance or {}).get("pools") or "")
    return bool(named) and (ROOT / named).resolve() == pools_dir.resolve()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help="the pools' model, as the gateway serves it")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--table", type=Path, default=None, help="routing table to serve (default: fit it from the pools)")
    p.add_argument("--limit", type=int, default=200, help="development problems, in draw order (0: all)")
    p.add_argument("--base-url", default="", help="a running gateway's /v1 URL serving the table (default: start one)")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    p.add_argument("--hours", type=float, default=0.0, help="stop sending after this long (0: no limit)")
    p.add_argument("--chunk-size", type=int, default=5, help="problems per chunk file (about)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=1800.0, help="client and job timeout per request")
    p.add_argument(
        "--retry-errors", action="store_true", help="re-send requests whose record is an infrastructure error"
    )
    p.add_argument(
        "--lock",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="take the model lock per chunk (default: when it starts its own stack)",
    )
    p.add_argument("--report-only", action="store_true", help="send nothing; report from the records so far")
    p.add_argument(
        "--regrade", action="store_true", help="re-check the kept content of every record, then report; send nothing"
    )
    p.add_argument(
        "--out", type=Path, default=None, help="records folder (default docs/data/calibration/routed/<model>)"
    )
    p.add_argument("--large-model", default="",
                   help="serve this model beside as the escalation deployment (TTC_STACK_LARGE_MODEL); with its "
                        "pools, cascades onto it compete in the fitted table")  # fmt: skip
    p.add_argument("--reuse", type=Path, default=None,
                   help="another routed run's records folder: its records stand for (problem, effort) pairs this "
                        "table routes to the same configuration (same model, seed, temperature, token cap); "
                        "copied in as one chunk marked adopted_from, the rest is sent")  # fmt: skip


def run(a: argparse.Namespace) -> int:
    routed = RoutedRun(
        model=a.model,
        pools_dir=a.pools or DEFAULT_POOLS / a.model,
        out=a.out or DEFAULT_ROUTED / a.model,
        table_path=a.table,
        limit=a.limit,
        base_url=a.base_url,
        hours=a.hours,
        chunk_size=a.chunk_size,
        seed=a.seed,
        timeout_s=a.timeout_s,
        retry_errors=a.retry_errors,
        api_key=a.api_key,
        lock=a.lock,
        large_model=a.large_model,
        reuse=a.reuse,
    )

    def send() -> None:
        if a.regrade:
            routed.log(f"{asyncio.run(routed.regrade())} verdict(s) changed")
        elif not a.report_only:
            asyncio.run(routed.run())

    return run_then_report(routed, send, routed.write_report)
