"""Judging pool chunks (calibration/lib/judging.py), over a fake verifier stub: every chain of
thought and program candidate gets the judge's score, code candidates none, the chunk is
rewritten whole with a note per judge, a judged chunk is skipped, and the drawer, ``status``
and the pricer read judged chunks as before."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

import pytest

from calibration import cli
from calibration.lib.drawer import DrawSettings, program_version
from calibration.lib.judging import JudgeRun, judge_chunk, judged_text, stub_scorer, to_judge
from calibration.lib.pool_run import plan
from evaluation.pools.store import Draw, ProblemPool, iter_chunks, read_chunk, read_pools, write_chunk
from evaluation.pricing.table import default_configs, judges_in
from services.gen.ttc.v1 import common_pb2, verifier_pb2
from tests.unit.calibration.test_pool_run import SHA, header, problems
from tests.unit.evaluation.pool_fixtures import draw, pool


class FakeVerifier:
    """Scores a candidate by its length (so each gets its own score); a text containing
    ``ERR`` gets a verdict with ``error`` set, as the service reports a policy refusal."""

    def __init__(self) -> None:
        self.requests: list[verifier_pb2.VerifyRequest] = []

    async def Verify(self, request: verifier_pb2.VerifyRequest, timeout: float | None = None) -> object:
        self.requests.append(request)
        verdicts = [
            verifier_pb2.CandidateVerdict(score=0.0, error="policy error: too long")
            if "ERR" in text
            else verifier_pb2.CandidateVerdict(score=min(1.0, len(text) / 100))
            for text in request.candidates
        ]
        usage = common_pb2.Usage(prompt_tokens=10 * len(verdicts), completion_tokens=len(verdicts))
        return verifier_pb2.VerifyResponse(verdicts=verdicts, usage=usage)


def program_draw() -> Draw:
    d = draw("program", ("4", True), [("4", True), ("5", False)])
    ran = dataclasses.replace(d.candidates[0], status="ok", stdout="4\n", program="print(4)")
    return dataclasses.replace(d, candidates=(ran, *d.candidates[1:]))


def math_pool(pid: str) -> ProblemPool:
    return pool(pid, cot=draw("cot", ("4", True), [("4", True), ("5", False)]), program=program_draw())


def code_pool(pid: str) -> ProblemPool:
    return pool(pid, "code", code=draw("code", ("a", True), [("b", False)]))


def write(tmp_path: Path, seq: int, *pools: ProblemPool) -> Path:
    return write_chunk(tmp_path, "calibration", seq, header(DrawSettings(), program_version()), pools)


def judge(path: Path, judges: list[str], fake: FakeVerifier) -> Path:
    return asyncio.run(judge_chunk(read_chunk(path), judges, stub_scorer(fake), {"git_describe": "g", "at": "t"}))


def test_every_cot_and_program_candidate_is_scored_and_code_is_left_alone(tmp_path: Path) -> None:
    path = write(tmp_path, 1, math_pool("a"), code_pool("c"))
    fake = FakeVerifier()
    judge(path, ["orm", "prm"], fake)
    chunk = read_chunk(path)
    a, c = chunk.pools
    for d in a.draws.values():
        for cand in d.candidates:
            expected = min(1.0, len(judged_text(d.kind, cand)) / 100)
            assert cand.scores == {"orm": expected, "prm": expected}
    assert all(cand.scores == {} for cand in c.draws["code"].candidates)
    # one call per problem and judge, with the problem's own messages; no call for code
    assert [r.verifier for r in fake.requests] == ["orm", "prm"]
    assert [m.role for m in fake.requests[0].problem] == ["system", "user"]
    assert fake.requests[0].problem[1].content == a.problem["question"]
    assert len(fake.requests[0].candidates) == 6
    # a program that ran is judged with what it printed
    assert "The program printed:\n4" in fake.requests[0].candidates[3]
    assert "printed" not in fake.requests[0].candidates[4]
    notes = chunk.header["judged"]
    assert [(n["judge"], n["scored"], n["errors"], n["tokens"], n["git_describe"]) for n in notes] == [
        ("orm", 6, 0, 66, "g"),
        ("prm", 6, 0, 66, "g"),
    ]
    assert [f.name for f in tmp_path.iterdir()] == ["calibration-00001.jsonl"]  # written whole, no temporary


def test_a_verdict_with_an_error_leaves_no_score_and_is_counted(tmp_path: Path) -> None:
    p = math_pool("a")
    cot = p.draws["cot"]
    broken = dataclasses.replace(cot.candidates[1], text="ERR")
    p = dataclasses.replace(
        p, draws={**p.draws, "cot": dataclasses.replace(cot, candidates=(cot.candidates[0], broken, cot.candidates[2]))}
    )
    path = write(tmp_path, 1, p)
    judge(path, ["orm"], FakeVerifier())
    chunk = read_chunk(path)
    assert "orm" not in chunk.pools[0].draws["cot"].candidates[1].scores
    assert "orm" in chunk.pools[0].draws["cot"].candidates[2].scores
    assert chunk.header["judged"][0]["errors"] == 1 and chunk.header["judged"][0]["scored"] == 5


def test_a_judged_chunk_is_skipped_for_its_judges_and_a_replaced_chunk_for_all(tmp_path: Path) -> None:
    first = write(tmp_path, 1, math_pool("a"), math_pool("b"))
    write(tmp_path, 2, math_pool("c"))
    judge(first, ["orm"], FakeVerifier())
    chunks = list(iter_chunks(tmp_path))
    assert [(c.seq, j) for c, j in to_judge(chunks, ["orm"])] == [(2, ["orm"])]
    assert [(c.seq, j) for c, j in to_judge(chunks, ["orm", "prm"])] == [(1, ["prm"]), (2, ["orm", "prm"])]
    # once both of chunk 1's problems are re-drawn into chunk 3, chunk 1 is not judged again
    write(tmp_path, 3, math_pool("a"), math_pool("b"))
    assert [c.seq for c, _ in to_judge(list(iter_chunks(tmp_path)), ["prm"])] == [2, 3]
    # a chunk of code problems only has nothing to judge, and is not rewritten
    write(tmp_path, 4, code_pool("d"))
    assert [c.seq for c, _ in to_judge(list(iter_chunks(tmp_path)), ["prm"])] == [2, 3]


def test_a_sitting_judges_what_is_left_and_hours_bound_it(tmp_path: Path) -> None:
    write(tmp_path, 1, math_pool("a"))
    write(tmp_path, 2, math_pool("b"))
    fake = FakeVerifier()
    hour = itertools.count(0.0, 3600.0).__next__  # a clock that moves an hour per reading
    short = JudgeRun(tmp_path, ["orm"], "m", hours=1.5, lock=False, clock=hour, _scorer=stub_scorer(fake))
    assert asyncio.run(short.run()) == 1 and len(fake.requests) == 1  # one chunk before the time is up
    run = JudgeRun(tmp_path, ["orm"], "m", lock=False, _scorer=stub_scorer(fake))
    assert asyncio.run(run.run()) == 1 and len(fake.requests) == 2  # the next sitting judges the rest
    assert asyncio.run(JudgeRun(tmp_path, ["orm"], "m", lock=False, _scorer=stub_scorer(fake)).run()) == 0
    assert len(fake.requests) == 2
    for path in sorted(tmp_path.iterdir()):
        (note,) = read_chunk(path).header["judged"]
        assert note["model"] == "m" and note["model_sha256"] == "remote:m" and len(note["loadavg"]) == 3


def test_the_drawer_status_and_pricer_read_judged_chunks_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, v = DrawSettings(), program_version()
    path = write(tmp_path, 1, math_pool("a"))
    judge(path, ["orm"], FakeVerifier())
    left = plan(tmp_path, "calibration", problems("a", "b"), s, v, redraw_stale=False, sha256=SHA)
    assert [p.id for p in left.todo] == ["b"] and not left.stale and left.kept_stale == 0
    assert cli.main(["status", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "chunks of another program version: 0" in out and "other draw settings than k=8 defaults: 0" in out
    pools = read_pools(tmp_path)
    assert judges_in(pools) == ["orm"]
    configs = {c.name: c for c in default_configs(2, judges_in(pools))}
    assert configs["bon@2:orm"].applies(pools[0]) and configs["wvote@2:orm"].applies(pools[0])
