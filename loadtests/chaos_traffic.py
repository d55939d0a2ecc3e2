"""Traffic of the chaos suite: plain, streaming and background chat completions through the
gateway, each answer checked for shape and each failure kept with its reason (Redis is read
afterwards for lost and duplicated jobs: ``chaos_records.py``).

Every loop is bounded in count and time; every address is 127.0.0.1 (the stack's gateway)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

KINDS = ("sync", "stream", "background")
FINAL = ("succeeded", "failed", "cancelled")


@dataclass
class Outcome:
    kind: str
    ok: bool = False
    problem: str = ""
    latency_s: float = 0.0
    statuses: list[int] = field(default_factory=list)
    final_status: int | None = None
    retry_after: bool = False
    degraded_by: list[str] = field(default_factory=list)
    job_id: str = ""
    started: float = 0.0  # time.monotonic() when the first attempt was sent

    @property
    def reason(self) -> str:
        """Why it did not succeed ('' when it did): the problem seen, else the last HTTP status."""
        if self.ok:
            return ""
        return self.problem or f"http_{self.final_status}"

    def overlaps(self, start: float, end: float) -> bool:
        """Whether it was in flight at some moment of ``[start, end]``."""
        return self.started <= end and self.started + self.latency_s >= start


def check_completion(body: Any) -> str:
    """'' when ``body`` is a well-formed chat completion, else what is wrong with it."""
    try:
        choice = body["choices"][0]
        if body["object"] != "chat.completion" or not str(body["id"]).startswith("chatcmpl-"):
            return "malformed:object"
        if not isinstance(choice["message"]["content"], str) or choice["finish_reason"] not in ("stop", "length"):
            return "malformed:choice"
        if not isinstance(body["usage"]["completion_tokens"], int):
            return "malformed:usage"
    except (KeyError, IndexError, TypeError):
        return "malformed:shape"
    return ""


class Traffic:
    def __init__(self, url: str, model: str, log: Callable[[str], None]) -> None:
        self.url, self.model, self.log = url, model, log
        self.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=2048, max_keepalive_connections=64))
        self.job_ids: set[str] = set()
        self.probe_statuses: list[int] = []
        self.probe_errors: list[str] = []  # transport errors of the probes, by type
        self.counter = itertools.count()

    async def __aenter__(self) -> Traffic:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.http.aclose()

    def body(self, effort: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
        n = next(self.counter)
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": f"What is {n % 97} + {n % 89 + 3}? Answer with the number."}],
            "max_tokens": max_tokens,
            "reasoning_effort": effort,
            "seed": n,
            **extra,
        }

    # One request of each kind --------------------------------------------------------------
    async def one(
        self, kind: str, effort: str, max_tokens: int = 16, retries: int = 2, timeout: float = 240
    ) -> Outcome:
        start = time.monotonic()
        outcome = Outcome(kind, started=start)
        try:
            for attempt in range(retries + 1):
                if kind == "stream":
                    await self._stream(outcome, self.body(effort, max_tokens, stream=True), timeout)
                else:
                    extra = {"background": True} if kind == "background" else {}
                    await self._post(outcome, self.body(effort, max_tokens, **extra), timeout)
                if outcome.final_status not in (429, 503) or attempt == retries:
                    break
                await asyncio.sleep(2.0)  # honour Retry-After, bounded
        except httpx.TimeoutException:
            outcome.problem = "lost"
        except httpx.HTTPError as exc:
            outcome.problem = f"transport:{type(exc).__name__}"
        outcome.latency_s = time.monotonic() - start
        outcome.ok = outcome.final_status in (200, 202) and not outcome.problem
        return outcome

    async def _post(self, outcome: Outcome, body: dict[str, Any], timeout: float) -> None:
        reply = await self.http.post(f"{self.url}/v1/chat/completions", json=body, timeout=timeout)
        outcome.statuses.append(reply.status_code)
        outcome.final_status = reply.status_code
        outcome.retry_after = "retry-after" in reply.headers
        outcome.problem = ""
        if reply.status_code == 202 and body.get("background"):
            job_id = str(reply.json()["id"])
            outcome.job_id = job_id
            self.job_ids.add(job_id)
            await self._poll(outcome, job_id, timeout)
        elif reply.status_code == 200:
            payload = reply.json()
            outcome.job_id = str(payload.get("id", "")).removeprefix("chatcmpl-")
            self.job_ids.add(outcome.job_id)
            outcome.problem = check_completion(payload)
            outcome.degraded_by = list((payload.get("ttc") or {}).get("degraded_by") or [])
        else:
            outcome.problem = f"http_{reply.status_code}"

    async def _poll(self, outcome: Outcome, job_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            try:
                reply = await self.http.get(f"{self.url}/v1/jobs/{job_id}", timeout=30)
            except httpx.HTTPError:
                continue
            if reply.status_code != 200:
                outcome.statuses.append(reply.status_code)
                continue
            job = reply.json()
            if job["status"] == "succeeded":
                outcome.problem = check_completion(job.get("result"))
                return
            if job["status"] in FINAL:
                outcome.problem = f"{job['status']}:{(job.get('error') or {}).get('code')}"
                return
        outcome.problem = "lost"

    async def _stream(self, outcome: Outcome, body: dict[str, Any], timeout: float) -> None:
        outcome.problem = ""
        done = finished = False
        async with self.http.stream("POST", f"{self.url}/v1/chat/completions", json=body, timeout=timeout) as reply:
            outcome.statuses.append(reply.status_code)
            outcome.final_status = reply.status_code
            outcome.retry_after = "retry-after" in reply.headers
            if reply.status_code != 200:
                await reply.aread()
                outcome.problem = f"http_{reply.status_code}"
                return
            try:
                async for line in reply.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line.removeprefix("data: ")
                    if data == "[DONE]":
                        done = True
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        outcome.problem = f"stream_error:{chunk['error'].get('code')}"
                        continue
                    if chunk.get("object") != "chat.completion.chunk":
                        outcome.problem = "malformed:chunk"
                    if not outcome.job_id and str(chunk.get("id", "")).startswith("chatcmpl-"):
                        outcome.job_id = str(chunk["id"]).removeprefix("chatcmpl-")
                        self.job_ids.add(outcome.job_id)
                    finished |= any(c.get("finish_reason") for c in chunk.get("choices") or [])
            except json.JSONDecodeError:
                outcome.problem = "malformed:json"
            except httpx.HTTPError:
                outcome.problem = "truncated"
        if not outcome.problem and not (done and finished):
            outcome.problem = "truncated"

    # Loops ---------------------------------------------------------------------------------
    async def run(
        self, n: int, clients: int, until: asyncio.Task[Any], hard_cap: int, deadline: float, pause_s: float = 0.5
    ) -> list[Outcome]:
        """Requests from ``clients`` loops until at least ``n`` are done and ``until`` has
        finished, at most ``hard_cap`` requests and never past ``deadline``."""
        outcomes: list[Outcome] = []
        started = itertools.count()

        async def client(c: int) -> None:
            while time.monotonic() < deadline:
                i = next(started)
                if i >= hard_cap or (i >= n and until.done()):
                    return
                kind = KINDS[i % len(KINDS)]
                outcome = await self.one(kind, "none" if i % 3 else "low")
                outcomes.append(outcome)
                if not outcome.ok or len(outcomes) % 25 == 0:
                    self.log(
                        f"traffic: {len(outcomes)} done; #{i} {kind}: {outcome.problem or 'ok'} "
                        f"statuses {outcome.statuses[-3:]} in {outcome.latency_s:.1f}s"
                    )
                await asyncio.sleep(pause_s)

        await asyncio.gather(*(client(c) for c in range(clients)))
        return outcomes

    async def probe_until_ok(self, since: float, deadline: float) -> float:
        """Seconds from ``since`` to the first successful request after it (bounded)."""
        while time.monotonic() < deadline:
            try:
                reply = await self.http.post(f"{self.url}/v1/chat/completions", json=self.body("none", 2), timeout=60)
                self.probe_statuses.append(reply.status_code)
                if reply.status_code == 200:
                    job_id = str(reply.json().get("id", "")).removeprefix("chatcmpl-")
                    self.job_ids.add(job_id)
                    return time.monotonic() - since
            except httpx.HTTPError as exc:
                self.probe_errors.append(type(exc).__name__)
            await asyncio.sleep(0.25)
        raise TimeoutError("no successful request before the recovery deadline")

    async def sustainable_rate(self, concurrency: int, seconds: float) -> float:
        """Completed requests per second of a closed loop with ``concurrency`` clients."""
        done = 0
        end = time.monotonic() + seconds

        async def client() -> None:
            nonlocal done
            while time.monotonic() < end:
                outcome = await self.one("sync", "none", max_tokens=16, retries=0)
                done += outcome.ok

        start = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return done / (time.monotonic() - start)

    async def open_loop(self, rate: float, seconds: float, deadline_s: float) -> list[Outcome]:
        """Requests arriving at ``rate`` per second for ``seconds`` (effort low, no retries)."""
        count = max(1, int(rate * seconds))
        start = time.monotonic()

        async def arrival(i: int) -> Outcome:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            return await self.one("sync", "low", max_tokens=16, retries=0, timeout=deadline_s)

        results = await asyncio.wait_for(asyncio.gather(*(arrival(i) for i in range(count))), deadline_s + 60)
        return list(results)
