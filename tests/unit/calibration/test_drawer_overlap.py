"""Overlapped drawing: the same candidates as drawing call by call, every call marked as
overlapped, the sitting's latency probe stored with the pool, and the latency model fitted on
calls made alone only (the probe and any call that did not overlap)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from calibration.lib.drawer import DrawSettings, PoolDrawer
from calibration.lib.latency_probe import PROBE_SHAPES, latency_probe, probe_messages
from evaluation.pools.store import Call, ProblemPool
from evaluation.pricing.table import fit_latency
from services.search.interfaces import Candidate, ComponentError, GenerateCall, Generation
from tests.unit.calibration.test_drawer import MATH, Python, Tests, math_policy

PROBE = (Call(1, 0.7, 64, 20, 0, 64, 1.0, longest=64), Call(8, 0.7, 64, 20, 0, 512, 2.0, longest=64))


def test_an_overlapped_draw_holds_the_candidates_of_a_sequential_one() -> None:
    sequential = asyncio.run(PoolDrawer(math_policy(), Python(), Tests(), DrawSettings(k=3)).draw(MATH, "x"))  # type: ignore[arg-type]
    drawer = PoolDrawer(math_policy(), Python(), Tests(), DrawSettings(k=3), overlap=True, latency_probe=PROBE)  # type: ignore[arg-type]
    overlapped = asyncio.run(drawer.draw(MATH, "x"))

    def strip(pool: ProblemPool) -> dict[str, Any]:
        return {k: [(c.seed, c.key, c.correct) for c in d.candidates] for k, d in pool.draws.items()}

    assert strip(overlapped) == strip(sequential)
    assert all(c.overlapped for d in overlapped.draws.values() for c in d.calls)
    assert not any(c.overlapped for d in sequential.draws.values() for c in d.calls)
    assert overlapped.latency_probe == PROBE and sequential.latency_probe == ()
    assert ProblemPool.from_dict(overlapped.to_dict()) == overlapped


class SlowPolicy:
    """Each call waits, so overlapped calls are in flight together; one call can fail."""

    def __init__(self, fail_on: float | None = None) -> None:
        self.in_flight, self.most = 0, 0
        self.fail_on = fail_on

    async def generate(self, call: GenerateCall, **kw: Any) -> Generation:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if self.fail_on is not None and call.temperature == self.fail_on:
                raise ComponentError("policy", "UNAVAILABLE")
            return Generation(tuple(Candidate("\\boxed{5}", "stop", 3, s) for s in call.seeds), 30, 0)
        finally:
            self.in_flight -= 1


def test_overlap_keeps_a_problems_four_calls_in_flight_and_a_failure_is_its_own_error() -> None:
    policy = SlowPolicy()
    asyncio.run(PoolDrawer(policy, Python(), Tests(), DrawSettings(k=2), overlap=True).draw(MATH, "x"))  # type: ignore[arg-type]
    assert policy.most == 4
    failing = SlowPolicy(fail_on=0.7)
    with pytest.raises(ComponentError):  # not an ExceptionGroup: the run's retry catches it
        asyncio.run(PoolDrawer(failing, Python(), Tests(), DrawSettings(k=2), overlap=True).draw(MATH, "x"))  # type: ignore[arg-type]


def test_the_probe_runs_each_shape_alone_on_prompts_of_its_own() -> None:
    policy = SlowPolicy()
    calls = asyncio.run(latency_probe(policy))  # type: ignore[arg-type]
    assert policy.most == 1
    assert [c.n for c in calls] == [n for n, _ in PROBE_SHAPES]
    assert all(c.longest == 3 and c.completion_tokens == 3 * c.n and not c.overlapped for c in calls)
    texts = {probe_messages(i, f)[0].content for i, (_, f) in enumerate(PROBE_SHAPES)}
    assert len(texts) == len(PROBE_SHAPES)  # no prompt is another's cached prefix
    assert len(probe_messages(5, 120)[0].content.split()) > 120


def test_the_latency_model_is_fitted_on_calls_made_alone() -> None:
    """Walls follow 0.01 s per uncached prompt token + 0.1 s per step + 0.02 s per extra
    sequence and step; overlapped calls (ten times slower here) are left out, the probe counted once."""

    def wall(n: int, prompt: int, longest: int) -> float:
        return 0.01 * prompt + longest * (0.1 + 0.02 * (n - 1))

    shapes = [(1, 20, 64), (2, 20, 64), (8, 20, 40), (1, 600, 30), (16, 20, 50)]
    probe = tuple(Call(n, 0.7, 64, p, 0, n * t, wall(n, p, t), longest=t) for n, p, t in shapes)
    drawer = PoolDrawer(math_policy(), Python(), Tests(), DrawSettings(k=3), overlap=True, latency_probe=probe)  # type: ignore[arg-type]
    pool = asyncio.run(drawer.draw(MATH, "x"))
    slowed = {k: dataclasses.replace(d, calls=tuple(dataclasses.replace(c, wall_s=99.0) for c in d.calls))
              for k, d in pool.draws.items()}  # fmt: skip
    pool = dataclasses.replace(pool, draws=slowed)
    model = fit_latency([pool, pool])
    assert model.prefill_s == pytest.approx(0.01, rel=1e-6)
    assert model.step_s == pytest.approx(0.1, rel=1e-6)
    assert model.step_s_per_seq == pytest.approx(0.02, rel=1e-6)
