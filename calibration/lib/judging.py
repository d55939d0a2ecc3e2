"""Every judge's score for every pool candidate (``python -m calibration judge``).

Best-of-N with a judge and the judge-weighted vote are priced offline from a pool only when
each candidate carries that judge's score (:mod:`evaluation.pricing.pricer`, ``bon@n:J`` and
``wvote@n:J``). This scores every chain-of-thought and program candidate of every chunk with
the verifier service's generative judges (``orm``, ``prm``: docs/verifier.md) through the real
verifier gRPC service, on the pool's own model behind a real policy service, and stores the
score in the candidate's ``scores[judge]``. Code candidates (HumanEval) are judged by their
hidden tests already and are left as they are.

A chunk is rewritten whole (:func:`evaluation.pools.store.write_chunk`: temporary file, then rename)
once all its judges are done, its header gaining one ``judged`` note per judge (the judging
code's ``git describe --dirty``, the judge, the judging model and its sha256, when, how many
candidates were scored and how many the verifier could not judge). A chunk whose header already
notes a judge is skipped for it, so a sitting resumes at chunk granularity; chunks whose every
problem has a newer record are skipped too. The draw settings and program version in the
header are kept as they were, so ``draw`` and ``status`` treat a judged chunk as the chunk it
was. Each chunk is judged under the shared model lock, and ``--hours`` bounds a sitting.

What judging cost is stored per candidate, so the pricer can charge it to the configurations
that judge (``judge_tokens[judge]`` and ``judge_s[judge]`` of :class:`~evaluation.pools.store.PoolCandidate`).
A verifier call answers one ``usage`` for its whole batch and takes one wall time, so both are
apportioned over the candidates it scored in proportion to the length of the text each was
judged on (:func:`apportion`); a candidate the verifier could not judge gets no score and no
cost. The tokens are the judge's prompt tokens (judges prefill: records schema 2 counts them as
prompt tokens) plus its completion tokens, if any (a generative judge that writes). Chunks
judged before this was stored carry only per-chunk totals in their ``judged`` notes;
``--backfill`` apportions each note's totals over the chunk's scored candidates by the same rule
and marks the note ``"apportioned": "chunk"`` (a note judged per call says ``"call"``).

What a judge reads: the problem's own messages (as the request sent them) and, for a chain of
thought, its text; for a program, its text and what it printed when it ran (the answer a
program gives is its output; a judge shown only the source cannot see it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol

from calibration.lib.pool_run import chunks_model, model_sha256, stamped
from calibration.lib.services import Service, model_lock, policy_service, verifier_service
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import Chunk, Draw, PoolCandidate, ProblemPool, iter_chunks, latest_pools, write_chunk
from evaluation.problems.datasets import Problem
from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc

JUDGED_KINDS = ("cot", "program")  # code candidates are scored by their hidden tests
_WRITTEN_BY_WRITER = ("type", "schema", "problems")


@dataclasses.dataclass(frozen=True)
class Judged:
    """One verifier call's answer: a score per text (``None``: not judged), the judge's usage for
    the whole batch and the call's wall seconds."""

    scores: list[float | None]
    prompt_tokens: int
    completion_tokens: int
    wall_s: float

    @property
    def tokens(self) -> int:
        """What the judge evaluated: its prompts plus whatever it wrote."""
        return self.prompt_tokens + self.completion_tokens


# judge name, the problem's messages, candidate texts -> the verifier's answer for the batch
Scorer = Callable[[str, list[dict[str, str]], list[str]], Awaitable[Judged]]


class VerifierStub(Protocol):
    """The one method of ``verifier_pb2_grpc.VerifierStub`` used here (a fake in unit tests)."""

    def Verify(self, request: verifier_pb2.VerifyRequest, timeout: float | None = None) -> Any: ...


# ------------------------------------------------------------------------------ pure parts
def judged_text(kind: str, candidate: PoolCandidate) -> str:
    """What the judge reads of a candidate (see the module docstring)."""
    if kind == "program" and candidate.status == "ok":
        return f"{candidate.text.rstrip()}\n\nThe program printed:\n{candidate.stdout.strip()}"
    return candidate.text


def judgeable(pool: ProblemPool) -> list[tuple[str, int, str]]:
    """(draw name, candidate position, text to judge) of every candidate a judge scores."""
    return [
        (name, i, judged_text(draw.kind, c))
        for name, draw in pool.draws.items()
        if draw.kind in JUDGED_KINDS
        for i, c in enumerate(draw.candidates)
    ]


def apportion(total: int, lengths: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``lengths`` into whole numbers that sum to it exactly
    (largest remainder; ties to the earlier). Equal shares when every length is 0."""
    if not lengths:
        return []
    weights = list(lengths) if any(lengths) else [1] * len(lengths)
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    shares = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares


def apportion_seconds(total: float, lengths: Sequence[int]) -> list[float]:
    """``total`` seconds split in proportion to ``lengths`` (µs rounding). Equal shares when
    every length is 0."""
    if not lengths:
        return []
    weights = list(lengths) if any(lengths) else [1] * len(lengths)
    return [round(total * w / sum(weights), 6) for w in weights]


Judgement = tuple[float, int, float]  # a candidate's score, judge tokens and judge seconds


def with_judgements(pool: ProblemPool, judge: str, found: dict[tuple[str, int], Judgement]) -> ProblemPool:
    """``pool`` with ``found[(draw, position)]`` stored as each candidate's ``scores[judge]``,
    ``judge_tokens[judge]`` and ``judge_s[judge]``."""
    draws: dict[str, Draw] = {}
    for name, draw in pool.draws.items():
        candidates = []
        for i, c in enumerate(draw.candidates):
            if (name, i) in found:
                score, tokens, seconds = found[(name, i)]
                c = dataclasses.replace(
                    c, scores={**c.scores, judge: score}, judge_tokens={**c.judge_tokens, judge: tokens},
                    judge_s={**c.judge_s, judge: seconds},
                )  # fmt: skip
            candidates.append(c)
        draws[name] = dataclasses.replace(draw, candidates=tuple(candidates))
    return dataclasses.replace(pool, draws=draws)


def cost_shares(texts: Sequence[str], tokens: int, wall_s: float) -> list[tuple[int, float]]:
    """``tokens`` and ``wall_s`` apportioned over the judged ``texts`` by their length: each
    candidate's share (tokens, seconds) of the judging that scored them together."""
    lengths = [len(text) for text in texts]
    return list(zip(apportion(tokens, lengths), apportion_seconds(wall_s, lengths), strict=True))


def judged_by(header: dict[str, Any]) -> set[str]:
    return {str(note["judge"]) for note in header.get("judged", [])}


def to_judge(chunks: Sequence[Chunk], judges: Sequence[str]) -> list[tuple[Chunk, list[str]]]:
    """Each chunk with the judges it still lacks. Left out: chunks holding no problem's newest
    record (every problem re-drawn into a later chunk), chunks with nothing a judge scores (code
    problems only), and chunks every judge has done."""
    latest = latest_pools(chunks)
    out = []
    for chunk in chunks:
        current = any(latest[p.id][1].path == chunk.path for p in chunk.pools)
        scoreable = any(judgeable(p) for p in chunk.pools)
        missing = [j for j in judges if j not in judged_by(chunk.header)]
        if current and scoreable and missing:
            out.append((chunk, missing))
    return out


async def judge_pool(pool: ProblemPool, judge: str, scorer: Scorer) -> tuple[ProblemPool, int, int, int]:
    """One problem, one judge: one verifier call for all its candidates, each scored one storing
    its share of the call's tokens and seconds (:func:`cost_shares`). Returns the scored pool,
    the candidates scored, those the verifier could not judge (left without a score or cost) and
    the tokens the judge evaluated."""
    items = judgeable(pool)
    if not items:
        return pool, 0, 0, 0
    messages = Problem.from_dict(pool.problem).messages()
    reply = await scorer(judge, messages, [text for _, _, text in items])
    if len(reply.scores) != len(items):
        raise RuntimeError(f"{pool.id}: {judge} returned {len(reply.scores)} scores for {len(items)} candidates")
    scored = [(item, s) for item, s in zip(items, reply.scores, strict=True) if s is not None]
    shares = cost_shares([text for (_, _, text), _ in scored], reply.tokens, reply.wall_s)
    found = {(name, i): (s, *share) for ((name, i, _), s), share in zip(scored, shares, strict=True)}
    return with_judgements(pool, judge, found), len(found), len(items) - len(found), reply.tokens


async def judge_chunk(chunk: Chunk, judges: Sequence[str], scorer: Scorer, note: dict[str, Any]) -> Path:
    """Score every problem of ``chunk`` with each of ``judges`` and rewrite the chunk whole, its
    header gaining one ``judged`` note per judge (``note`` plus the judge and its counts)."""
    pools = list(chunk.pools)
    notes = []
    for judge in judges:
        began, scored, errors, tokens = time.monotonic(), 0, 0, 0
        for i, pool in enumerate(pools):
            pools[i], ok, failed, used = await judge_pool(pool, judge, scorer)
            scored, errors, tokens = scored + ok, errors + failed, tokens + used
        wall = round(time.monotonic() - began, 1)
        counts = {"scored": scored, "errors": errors, "tokens": tokens, "wall_s": wall, "apportioned": "call"}
        notes.append({**note, "judge": judge, **counts})
    header = {k: v for k, v in chunk.header.items() if k not in _WRITTEN_BY_WRITER}
    header["judged"] = [*header.get("judged", []), *notes]
    return write_chunk(chunk.path.parent, chunk.split, chunk.seq, header, pools)


def backfilled(chunk: Chunk) -> tuple[dict[str, Any], list[ProblemPool]] | None:
    """The header and pools of a chunk judged before per-candidate costs were stored: each
    ``judged`` note's ``tokens`` and ``wall_s`` apportioned over the chunk's candidates that
    judge scored, by the rule a call's usage is (:func:`cost_shares`), and the note marked
    ``"apportioned": "chunk"``. ``None`` when no note lacks its apportioning."""
    header = {k: v for k, v in chunk.header.items() if k not in _WRITTEN_BY_WRITER}
    notes = [dict(n) for n in header.get("judged", [])]
    pending = [n for n in notes if "apportioned" not in n]
    if not pending:
        return None
    pools = list(chunk.pools)
    for note in pending:
        judge = str(note["judge"])
        if sum(str(n["judge"]) == judge for n in notes) > 1:
            raise ValueError(f"{chunk.path}: several {judge} notes; which one scored is unknown")
        items = [(p, name, i, text) for p, pool in enumerate(pools) for name, i, text in judgeable(pool)
                 if judge in pool.draws[name].candidates[i].scores]  # fmt: skip
        if len(items) != note["scored"]:
            raise ValueError(f"{chunk.path}: {judge} note counts {note['scored']} scored, candidates hold {len(items)}")
        shares = cost_shares([text for *_, text in items], int(note["tokens"]), float(note["wall_s"]))
        found: list[dict[tuple[str, int], Judgement]] = [{} for _ in pools]
        for (p, name, i, _), share in zip(items, shares, strict=True):
            found[p][(name, i)] = (pools[p].draws[name].candidates[i].scores[judge], *share)
        pools = [with_judgements(pool, judge, f) for pool, f in zip(pools, found, strict=True)]
        note["apportioned"] = "chunk"
    header["judged"] = notes
    return header, pools


def backfill(directory: Path) -> list[Path]:
    """Rewrite every chunk under ``directory`` that :func:`backfilled` changes (whole, through
    :func:`~evaluation.pools.store.write_chunk`); the paths rewritten."""
    done = []
    for chunk in iter_chunks(directory):
        changed = backfilled(chunk)
        if changed is not None:
            done.append(write_chunk(chunk.path.parent, chunk.split, chunk.seq, *changed))
    return done


# ------------------------------------------------------------------------------ the verifier
def stub_scorer(stub: VerifierStub, *, model: str = "", timeout: float = 1800.0) -> Scorer:
    """A :data:`Scorer` over the verifier service. A verdict carrying ``error`` was not a verdict
    on the candidate (docs/verifier.md, Errors): that candidate gets no score, not a 0."""

    async def score(judge: str, messages: list[dict[str, str]], texts: list[str]) -> Judged:
        request = verifier_pb2.VerifyRequest(
            verifier=judge, candidates=texts, model=model, request_id=f"pool-judge-{judge}",
            problem=[common_pb2.ChatMessage(role=m["role"], content=m["content"]) for m in messages],
        )  # fmt: skip
        began = time.monotonic()
        reply = await stub.Verify(request, timeout=timeout)
        wall = time.monotonic() - began
        scores = [None if v.error else min(1.0, max(0.0, v.score)) for v in reply.verdicts]
        return Judged(scores, reply.usage.prompt_tokens, reply.usage.completion_tokens, wall)

    return score


async def generative_judges(stub: verifier_pb2_grpc.VerifierStub) -> set[str]:
    """The verifier service's own list of generative verifiers (the judges that can score)."""
    reply = await stub.ListVerifiers(verifier_pb2.ListVerifiersRequest(), timeout=30.0)
    return {v.name for v in reply.verifiers if v.generative}


# ------------------------------------------------------------------------------ a sitting
@dataclasses.dataclass
class JudgeRun:
    """Judge the chunks under ``directory`` with ``judges``; services start on first use."""

    directory: Path
    judges: Sequence[str]
    model: str = ""  # default: the chunks' own model
    hours: float = 0.0
    policy_target: str = ""
    verifier_target: str = ""
    lock: bool = True
    clock: Callable[[], float] = time.monotonic  # what ``hours`` is measured on
    _services: list[Service] = dataclasses.field(default_factory=list)
    _scorer: Scorer | None = None

    def log(self, message: str) -> None:
        stamped(message)

    async def run(self) -> int:
        """Judge until done or out of time; returns the number of chunks rewritten."""
        chunks = list(iter_chunks(self.directory))
        model = chunks_model(chunks, self.model)
        todo = to_judge(chunks, self.judges)
        self.log(f"{self.directory}: {len(chunks)} chunks, {len(todo)} to judge with {', '.join(self.judges)}")
        note = {"git_describe": git_describe(), "model": model, "model_sha256": model_sha256(model)}
        deadline = self.clock() + self.hours * 3600 if self.hours else None
        done = 0
        try:
            for chunk, judges in todo:
                if deadline is not None and self.clock() > deadline:
                    self.log("time limit reached")
                    break
                with model_lock() if self.lock else nullcontext(0.0) as waited:
                    scorer = await self._connect(model)
                    began = time.monotonic()
                    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    load = [round(x, 2) for x in os.getloadavg()]
                    path = await judge_chunk(chunk, judges, scorer, {**note, "at": at, "loadavg": load})
                self.log(f"{path.name}: {len(chunk.pools)} problem(s) judged by {', '.join(judges)} in "
                         f"{time.monotonic() - began:.1f}s (waited {waited:.0f}s for the lock)")  # fmt: skip
                done += 1
        finally:
            for service in reversed(self._services):
                service.stop()
        return done

    async def _connect(self, model: str) -> Scorer:
        """The scorer, starting policy and verifier on first use (inside the lock: loading the
        model is a model workload), after checking every judge is one the verifier has."""
        if self._scorer is not None:
            return self._scorer
        verifier_target = self.verifier_target
        if not verifier_target:
            policy_target = self.policy_target
            if not policy_target:
                service = await asyncio.to_thread(policy_service(model).start, 600.0)
                self._services.append(service)
                policy_target = service.target
            service = await asyncio.to_thread(verifier_service(policy_target).start, 60.0)
            self._services.append(service)
            verifier_target = service.target
        self.log(f"verifier at {verifier_target}")
        stub = verifier_pb2_grpc.VerifierStub(insecure_channel(verifier_target))
        known = await generative_judges(stub)
        unknown = [j for j in self.judges if j not in known]
        if unknown:
            raise SystemExit(f"not judges of this verifier: {unknown} (it has {sorted(known)})")
        self._scorer = stub_scorer(stub)
        return self._scorer
