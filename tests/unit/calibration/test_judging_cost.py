"""What judging cost, per candidate (calibration/lib/judging.py): a verifier call's usage and wall
seconds apportioned over the candidates it scored by judged-text length, and the backfill that
does the same from an old chunk's per-chunk ``judged`` totals."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from calibration.cli import main
from calibration.lib.judging import (
    Judged,
    apportion,
    apportion_seconds,
    backfilled,
    judge_chunk,
    judgeable,
    judged_text,
)
from evaluation.pools.store import PoolCandidate, ProblemPool, read_chunk, write_chunk
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from tests.unit.calibration.test_judging import FakeVerifier, code_pool, judge, math_pool, write


def test_apportion_is_proportional_whole_and_sums_exactly() -> None:
    assert apportion(100, [1, 1, 2]) == [25, 25, 50]
    assert apportion(10, [1, 1, 1]) == [4, 3, 3]  # the largest remainders, ties to the earlier
    assert sum(apportion(17480, [5, 300, 41, 1000, 7])) == 17480
    assert apportion(5, [0, 0]) == [3, 2]  # nothing to weigh by: equal shares
    assert apportion(7, []) == [] and apportion(0, [3, 4]) == [0, 0]
    assert apportion_seconds(3.0, [1, 2]) == [1.0, 2.0]
    assert apportion_seconds(1.0, [0, 0, 0, 0]) == [0.25] * 4
    assert sum(apportion_seconds(190.7, [5, 300, 41])) == pytest.approx(190.7, abs=1e-5)


def all_candidates(p: ProblemPool) -> list[tuple[str, PoolCandidate]]:
    return [(d.kind, c) for d in p.draws.values() for c in d.candidates]


def test_a_calls_usage_and_seconds_are_shared_by_text_length(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    async def scorer(judge_name: str, messages: list[dict[str, str]], texts: list[str]) -> Judged:
        calls.append(texts)
        scores: list[float | None] = [None if t == "s2" else 0.5 for t in texts]  # s2: the verifier failed
        return Judged(scores, prompt_tokens=1000, completion_tokens=7, wall_s=2.0)

    path = write(tmp_path, 1, math_pool("a"), code_pool("c"))
    asyncio.run(judge_chunk(read_chunk(path), ["orm"], scorer, {"git_describe": "g"}))
    chunk = read_chunk(path)
    a, c = chunk.pools
    scored = [(k, cand) for k, cand in all_candidates(a) if "orm" in cand.scores]
    assert len(scored) == 4 and len(calls) == 1  # 6 texts, the two "s2" (cot and program) failed
    lengths = [len(judged_text(k, cand)) for k, cand in scored]
    assert [cand.judge_tokens["orm"] for _, cand in scored] == apportion(1007, lengths)  # completion counted
    assert sum(cand.judge_tokens["orm"] for _, cand in scored) == 1007
    assert [cand.judge_s["orm"] for _, cand in scored] == pytest.approx(
        [2.0 * n / sum(lengths) for n in lengths], abs=1e-6
    )
    # the candidates the verifier could not judge have neither a score nor a cost; code is untouched
    failed = [cand for _, cand in all_candidates(a) if "orm" not in cand.scores]
    assert [f.text for f in failed] == ["s2", "s2"] and all(not f.judge_tokens and not f.judge_s for f in failed)
    assert all(not cand.judge_tokens for _, cand in all_candidates(c))
    assert chunk.header["judged"][0]["apportioned"] == "call"


def test_the_stub_scorer_times_the_call_and_reports_its_usage(tmp_path: Path) -> None:
    path = judge(write(tmp_path, 1, math_pool("a")), ["orm"], FakeVerifier())
    (p,) = read_chunk(path).pools
    cands = [cand for _, cand in all_candidates(p)]
    assert sum(cand.judge_tokens["orm"] for cand in cands) == 66  # 10 prompt + 1 completion per text
    assert all(cand.judge_s["orm"] >= 0.0 for cand in cands)
    assert Config("bon@2:orm", "bon", 2, judge="orm").applies(p)


def old_chunk(tmp_path: Path) -> Path:
    """A chunk judged as before costs were stored: scores, and per-chunk totals in the note."""
    path = judge(write(tmp_path, 1, math_pool("a"), math_pool("b"), code_pool("c")), ["orm"], FakeVerifier())
    chunk = read_chunk(path)
    pools = []
    for p in chunk.pools:
        draws = {}
        for name, d in p.draws.items():
            plain = tuple(dataclasses.replace(x, judge_tokens={}, judge_s={}) for x in d.candidates)
            draws[name] = dataclasses.replace(d, candidates=plain)
        pools.append(dataclasses.replace(p, draws=draws))
    note = {k: v for k, v in chunk.header["judged"][0].items() if k != "apportioned"}
    header = {k: v for k, v in chunk.header.items() if k not in ("type", "schema", "problems")}
    header["judged"] = [{**note, "tokens": 1200, "wall_s": 30.0}]
    return write_chunk(tmp_path, "calibration", 1, header, pools)


def test_backfill_apportions_each_notes_totals_and_marks_it(tmp_path: Path) -> None:
    path = old_chunk(tmp_path)
    before = read_chunk(path)
    assert not Config("bon@2:orm", "bon", 2, judge="orm").applies(before.pools[0])
    assert main(["judge", "--backfill", "--out", str(tmp_path)]) == 0
    after = read_chunk(path)
    (note,) = after.header["judged"]
    assert note["apportioned"] == "chunk" and note["tokens"] == 1200 and note["wall_s"] == 30.0
    items = [(p, name, i, text) for p, pool in enumerate(after.pools) for name, i, text in judgeable(pool)]
    lengths = [len(text) for *_, text in items]
    got = [after.pools[p].draws[name].candidates[i] for p, name, i, _ in items]
    assert [c.judge_tokens["orm"] for c in got] == apportion(1200, lengths)
    assert sum(c.judge_s["orm"] for c in got) == pytest.approx(30.0, abs=1e-5)
    # everything else is as it was: header fields, scores, code candidates
    assert {k: v for k, v in after.header.items() if k != "judged"} == {
        k: v for k, v in before.header.items() if k != "judged"
    }
    for old, new in zip(before.pools, after.pools, strict=True):
        for (_, o), (_, n) in zip(all_candidates(old), all_candidates(new), strict=True):
            assert dataclasses.replace(n, judge_tokens={}, judge_s={}) == o
    assert all(not c.judge_tokens for _, c in all_candidates(after.pools[2]))
    # now the judged configurations price, charging the backfilled cost
    estimate = Pricer(LatencyModel()).estimate(after.pools[0], Config("bon@2:orm", "bon", 2, judge="orm"))
    assert estimate is not None and estimate.prompt > 100
    # a second backfill has nothing to do and leaves the file as it is
    text = path.read_text()
    assert backfilled(after) is None and main(["judge", "--backfill", "--out", str(tmp_path)]) == 0
    assert path.read_text() == text


def test_backfill_refuses_a_note_whose_count_does_not_match(tmp_path: Path) -> None:
    chunk = read_chunk(old_chunk(tmp_path))
    note = {**chunk.header["judged"][0], "scored": 99}
    with pytest.raises(ValueError, match="counts 99 scored"):
        backfilled(dataclasses.replace(chunk, header={**chunk.header, "judged": [note]}))
