"""``sealed``: the sealed test split through the gateway, once, as a user would send it.

``sealed run`` sends each of the 250 committed problems (``docs/data/sealed/sealed_split.json``,
:mod:`evaluation.problems.sealed`) at each effort (``--efforts``, default ``none,low,medium,high``)
with the official ``openai`` SDK: the question as the only user message, ``reasoning_effort``, and
nothing else (no temperature, token cap, seed or ``ttc`` pin: the gateway routes it as it would
route a user's). It refuses to start unless the problems' question hashes are the committed list.
Without ``--base-url`` it starts a ``ttc stack`` serving the model's table as ``make run`` does
(``--table`` to name another), under the model lock per chunk; the table's sha256 is read from the
gateway's ladder card. Records go in chunks of ``--chunk-size`` problems at every effort to
``docs/data/sealed/runs/<run-id>/`` (:mod:`calibration.lib.records`: whole or absent, each with a
header carrying the code revision, model and table sha256, load average, start and end time);
``--resume <run-id>`` sends only what no record holds, so a crash loses at most the chunk in
flight, and refuses where the served code (``services/``, ``proto/``) differs from the run's first
chunk's (each header records the revision its stack was started from); ``--limit-minutes`` stops
cleanly. A failed request (HTTP, connection, timeout) is sent once more, then recorded as an
infrastructure error, never graded. Grades are reasoning-gym's own checker on the stored entry
(:mod:`evaluation.heldout.sealed_grade`).

``sealed report`` writes ``docs/data/sealed/report-<run-id>.json`` and ``.md`` for one run or,
by default, every run in the order they started (:mod:`evaluation.heldout.sealed_report`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai

from calibration.lib.gateway_routes import LADDER_EFFORTS
from calibration.lib.gateway_run import GatewayRun
from calibration.lib.paths import DEFAULT_MODEL, ROOT
from calibration.lib.pool_run import model_sha256
from calibration.lib.records import LiveRunError, read_records, write_records
from calibration.lib.replies import gave_up, reply_fields
from calibration.lib.served_code import SERVED_PATHS, served_changes
from calibration.lib.stack import start_stack
from evaluation.heldout.sealed_grade import grade
from evaluation.heldout.sealed_markdown import markdown
from evaluation.heldout.sealed_plan import SplitMismatch, check_split, interleaved, pending
from evaluation.heldout.sealed_report import report
from evaluation.pools.provenance import git_describe, load_average
from evaluation.problems.sealed import SEALED_PATH, SealedProblem, load_sealed, sealed_hashes
from loadtests.client import Reply, send
from services.common.ports import free_port
from services.common.settings import StackSettings
from services.gateway.fleet import parse_pairs
from services.gateway.settings import GatewaySettings
from services.policy.models import model_id
from services.stack import escalation_table

NAME = "sealed"
HELP = "the sealed test split through the gateway, once (run resumes; report)"
SPLIT = "sealed"
SEALED_DIR = ROOT / "docs" / "data" / "sealed"
RUNS = SEALED_DIR / "runs"
DEFAULT_EFFORTS = ("none", "low", "medium", "high")


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def to_record(problem: SealedProblem, effort: str, reply: Reply, retried_after: str = "") -> dict[str, Any]:
    """One reply's record: what it answered and spent, the whole ``ttc`` object, and the grade;
    an infrastructure failure (``retried_after``: the first attempt's error, when it was sent
    twice) or a search that ended without an answer sets ``error`` and leaves ``grade`` unset."""
    ext = reply.ext
    record: dict[str, Any] = {
        "type": "record", "problem_id": problem.id, "family": problem.family, "effort": effort,
        **reply_fields(reply), "task_kind": ext.get("task_type"), "effort_applied": ext.get("effort_applied"),
        "n": ext.get("n"), "candidates": ext.get("candidates_generated"), "early_stop": ext.get("early_stop"),
        "reasoning_tokens": reply.reasoning_tokens, "attempts": 2 if retried_after else 1,
        "retried_after": retried_after, "content": reply.text, "answer": "", "grade": None, "correct": None,
        "ttc": ext,
    }  # fmt: skip
    if reply.error:
        return record
    if (ended := gave_up(record, reply)) is not None:
        return ended
    verdict = grade(problem, reply.text)
    return record | {"answer": verdict.answer, "grade": verdict.score, "correct": verdict.correct}


def served_table(model: str, large_model: str = "") -> Path:
    """The table ``make run`` serves ``model`` with: the gateway's shipped table for it (its
    escalation table when ``large_model`` is served beside and one was fitted), else the
    default table of uncalibrated models."""
    if large_model and (table := escalation_table(model_id(model), model_id(large_model))) is not None:
        return table
    fields = GatewaySettings.model_fields
    shipped = parse_pairs(str(fields["routing_tables"].default), "TTC_GATEWAY_ROUTING_TABLES")
    return ROOT / shipped.get(model, str(fields["routing_table"].default))


@dataclass(kw_only=True)
class SealedRun(GatewayRun):
    """One run of the sealed split; ``pools_dir`` is the split file (the problems' source)."""

    run_id: str
    efforts: tuple[str, ...] = DEFAULT_EFFORTS
    table_path: Path | None = None  # served by a stack this run starts (default: served_table)
    large_model: str = ""
    _model_sha: str = ""
    _table_sha: str = ""
    _recorded_tables: set[str] = field(default_factory=set)
    _chunk_began: tuple[str, list[float]] = ("", [])
    _served: str = ""  # the revision the stack was started from ("external" for --base-url)

    def problems(self) -> list[SealedProblem]:
        """The committed problems, round-robin over families; refused unless their hashes are
        the committed list."""
        problems = load_sealed(self.pools_dir)
        try:
            check_split(problems, sealed_hashes(self.pools_dir))
        except SplitMismatch as err:
            raise LiveRunError(f"{self.pools_dir}: {err}") from err
        return interleaved(problems)

    async def run(self) -> int:
        """Send every pending pair; returns how many were sent."""
        problems = self.problems()
        records, headers, seq = read_records(self.out)
        self._model_sha = model_sha256(self.model)
        if any(h.get("model_sha256") != self._model_sha for h in headers):
            raise LiveRunError(f"{self.out} holds records of another model than {self.model}; start a new run")
        self._recorded_tables = {str(h.get("table_sha256")) for h in headers}
        self._check_served_code(headers)
        todo = pending(problems, self.efforts, records, self.retry_errors)
        self.log(f"run {self.run_id}: {len(problems)} sealed problems x {len(self.efforts)} efforts, "
                 f"{len(records)} recorded, {len(todo)} to send")  # fmt: skip
        return await self.send_chunks(todo, self.chunk_size * len(self.efforts), seq, self._send, self._write)

    def _check_served_code(self, headers: Sequence[dict[str, Any]]) -> None:
        """Refuse to resume a run whose stack would serve other code than its first chunk's
        (:mod:`calibration.lib.served_code`); a run against a given gateway is the caller's to vouch for."""
        if not headers or self.base_url:
            return
        first = str(headers[0].get("served_revision") or headers[0].get("git_describe") or "")
        changed = served_changes(first)
        if changed is None:
            self.log(f"cannot compare the served code with {first!r}: git could not tell")
        elif changed:
            raise LiveRunError(
                f"the served code ({', '.join(SERVED_PATHS)}) changed since run {self.run_id} began at {first}: "
                f"{len(changed)} file(s), e.g. {', '.join(changed[:3])}; start a new run (every run is reported)"
            )

    async def _send(self, batch: Sequence[tuple[SealedProblem, str]], deadline: float | None,
                    done: list[dict[str, Any]]) -> None:  # fmt: skip
        """One request after another (each latency its own), each failure sent once more."""
        url = await asyncio.to_thread(self._gateway)
        self._chunk_began = (utc_now(), load_average())
        client = self.client(url)
        try:
            for problem, effort in batch:
                if deadline is not None and time.monotonic() > deadline:
                    break
                record = await self.ask(client, problem, effort)
                done.append(record)
                verdict = record["error_kind"] or f"grade {record['grade']:.2f}"
                self.log(f"  {problem.id} {effort}: {verdict} ({record['candidates']} candidates, "
                         f"{record['completion_tokens']} tok, {record['latency_s']:.1f}s)")  # fmt: skip
        finally:
            await client.close()

    async def ask(self, client: openai.AsyncOpenAI, problem: SealedProblem, effort: str) -> dict[str, Any]:
        """The problem as a user sends it: its question, the effort, nothing else."""
        messages = [{"role": "user", "content": problem.question}]
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "reasoning_effort": effort}
        reply = await send(client, kwargs, stream=False)
        first = reply.error
        if first:
            self.log(f"  {problem.id} {effort}: {reply.error_kind}, sent once more")
            reply = await send(client, kwargs, stream=False)
        return await asyncio.to_thread(to_record, problem, effort, reply, first)

    def _write(self, seq: int, done: list[dict[str, Any]], wall_s: float, waited_s: float) -> Path:
        began, load = self._chunk_began
        hashes = "\n".join(sorted(sealed_hashes(self.pools_dir))).encode()
        header = {
            "run_id": self.run_id, "git_describe": git_describe(), "served_revision": self._served,
            "model": self.model,
            "model_sha256": self._model_sha, "table_sha256": self._table_sha, "base_url": self._url,
            "efforts": list(self.efforts), "split_sha256": hashlib.sha256(hashes).hexdigest(),
            "started_at": began, "ended_at": utc_now(), "load_average_start": load,
            "load_average_end": load_average(), "wall_s": round(wall_s, 1), "lock_wait_s": round(waited_s, 1),
        }  # fmt: skip
        return write_records(self.out, SPLIT, seq, header, done)

    def _gateway(self) -> str:
        """The gateway's /v1 URL (``base_url``, else a stack started inside the lock), once; the
        table it serves the model must be the one this run's records were made with."""
        if self._url:
            return self._url
        if self.base_url:
            url, self._served = self.base_url.rstrip("/"), "external"
        else:
            self._served = git_describe()
            table = self.table_path or served_table(self.model, self.large_model)
            env = {"TTC_GATEWAY_ROUTING_TABLES": f"{self.model}={table.resolve()}"}
            if self.large_model:
                env |= {"TTC_STACK_LARGE_MODEL": self.large_model, "TTC_STACK_LARGE_MODEL_PORT": str(free_port()),
                        "TTC_STACK_LARGE_MODEL_METRICS_PORT": str(free_port())}  # fmt: skip
            self._stack, url = start_stack(self.model, self.timeout_s, self.log, env, f"serving {table}")
        card = httpx.get(f"{url}/models/{self.model}/ladder", timeout=30).json()
        sha = str((card.get("table") or {}).get("sha256") or "")
        if not sha or self._recorded_tables - {sha}:
            raise LiveRunError(
                f"{url} serves {self.model} with table sha256 {sha[:12] or '(none)'}; run {self.run_id} was "
                f"recorded with {sorted(self._recorded_tables)}: start a new run"
            )
        self._table_sha, self._url = sha, url
        self.log(f"gateway {url}: {self.model} routed by {(card.get('table') or {}).get('path')} ({sha[:12]})")
        return url


def efforts_of(text: str) -> tuple[str, ...]:
    """``--efforts``: comma-separated ladder efforts, returned lowest first."""
    named = [e.strip() for e in text.split(",") if e.strip()]
    unknown = [e for e in named if e not in LADDER_EFFORTS]
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"efforts must be among {', '.join(LADDER_EFFORTS)}, got {text!r}")
    return tuple(e for e in LADDER_EFFORTS if e in named)


def write_report(run_dir: Path, split: Path = SEALED_PATH, out: Path = SEALED_DIR) -> tuple[Path, str]:
    """A run's report beside the split (``report-<run-id>.json`` and ``.md``); returns the JSON's
    path and the Markdown."""
    records, headers, _ = read_records(run_dir)
    if not headers:
        raise LiveRunError(f"{run_dir}: no records yet")
    named = {e for h in headers for e in h.get("efforts") or ()}
    efforts = [e for e in LADDER_EFFORTS if e in named]
    body = report(run_dir.name, interleaved(load_sealed(split)), efforts, records, headers)
    text = markdown(body)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"report-{run_dir.name}.json"
    path.write_text(json.dumps(body | {"markdown": text}, indent=1, default=str) + "\n")
    path.with_suffix(".md").write_text(text)
    return path, text


def first_started(run_dir: Path) -> str:
    """When a run's first chunk started (``~``, after any time, for a run with none)."""
    headers = read_records(run_dir)[1]
    return str(headers[0].get("started_at") or "~") if headers else "~"


def runs_in_order(runs: Path = RUNS) -> list[Path]:
    """Every run folder, in the order its first chunk started."""
    found = [d for d in runs.iterdir() if d.is_dir()] if runs.is_dir() else []
    return sorted(found, key=lambda d: (first_started(d), d.name))


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="action")
    go = sub.add_parser("run", help="send the split (or resume a run), then write its report")
    go.add_argument("--efforts", type=efforts_of, default=None,
                    help="comma-separated efforts (default: none,low,medium,high; a resumed run: its own)")  # fmt: skip
    go.add_argument("--run-id", default="", help="a new run's name (default: its UTC start time)")
    go.add_argument(
        "--resume", default="", metavar="RUN_ID", help="go on with this run (sends what it has not recorded)"
    )
    go.add_argument("--limit-minutes", type=float, default=0.0, help="stop sending after this long (0: no limit)")
    go.add_argument("--chunk-size", type=int, default=3, help="problems per records chunk (each at every effort)")
    go.add_argument("--model", default=DEFAULT_MODEL, help="the model, as the gateway serves it")
    go.add_argument("--table", type=Path, default=None, help="table a started stack serves (default: make run's)")
    go.add_argument("--large-model", default=str(StackSettings.model_fields["large_model"].default),
                    help="serve this model beside for escalation (default: as make run does)")  # fmt: skip
    go.add_argument("--base-url", default="", help="a running gateway's /v1 URL (default: start a stack)")
    go.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    go.add_argument("--timeout-s", type=float, default=1800.0, help="client and job timeout per request")
    go.add_argument("--retry-errors", action="store_true", help="on resume, send again pairs recorded as errors")
    go.add_argument("--lock", action=argparse.BooleanOptionalAction, default=None,
                    help="take the model lock per chunk (default: when it starts its own stack)")  # fmt: skip
    rep = sub.add_parser("report", help="write the report of a run (default: of every run, in order)")
    rep.add_argument("--run-id", default="", help="the run (default: every run under docs/data/sealed/runs)")


def start(a: argparse.Namespace) -> int:
    """``sealed run``: a new run (its folder must not exist) or ``--resume`` of one (it must)."""
    run_id = a.resume or a.run_id or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = RUNS / run_id
    if a.resume and not out.is_dir():
        print(f"error: no run {run_id} under {RUNS}", file=sys.stderr)
        return 2
    if not a.resume and out.exists():
        print(f"error: run {run_id} exists: pass --resume {run_id} to go on with it", file=sys.stderr)
        return 2
    headers = read_records(out)[1] if a.resume else []
    efforts = a.efforts or (tuple(headers[0]["efforts"]) if headers else DEFAULT_EFFORTS)
    run = SealedRun(model=a.model, pools_dir=SEALED_PATH, out=out, run_id=run_id, efforts=efforts,
                    table_path=a.table, large_model=a.large_model, base_url=a.base_url, hours=a.limit_minutes / 60,
                    chunk_size=a.chunk_size, timeout_s=a.timeout_s, retry_errors=a.retry_errors,
                    api_key=a.api_key, lock=a.lock)  # fmt: skip
    print(f"sealed run {run_id}: records in {out}", flush=True)
    try:
        asyncio.run(run.run())
        if not read_records(out)[1]:
            print(f"nothing recorded: run {run_id} can be started again under its name")
            return 0
        path, text = write_report(out)
    except LiveRunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text)
    print(f"report: {path}")
    return 0


def run(a: argparse.Namespace) -> int:
    if a.action == "run":
        return start(a)
    dirs = [RUNS / a.run_id] if a.run_id else runs_in_order()
    if not dirs:
        print(f"error: no runs under {RUNS}", file=sys.stderr)
        return 2
    try:
        for d in dirs:
            path, text = write_report(d)
            print(text)
            print(f"report: {path}")
    except LiveRunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
