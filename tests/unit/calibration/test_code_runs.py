"""Code candidates run as code_execution runs them: the pool records what serving observes, the
replay on it answers what the served strategy answers, and the ``behaviour`` sitting records
only the newest, unrecorded or stale code draws, keeping each chunk's settings."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.lib.behaviour_run import record_chunk, to_record
from calibration.lib.code_runs import behaviour_version, needs_behaviour, with_behaviour
from evaluation.pools.store import Call, Draw, PoolCandidate, ProblemPool, iter_chunks, write_chunk
from evaluation.pricing.code_exec import ranking, source_lengths
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import Candidate, GenerateCall, Generation, Message
from services.search.run import run_search
from services.search.strategies import code_execution
from tests.helpers.local_executor import LocalExecutor
from tests.helpers.search_fakes import PolicyCall, ScriptedPolicy, ScriptedVerifier
from tests.helpers.search_jobs import make_job

PROBLEM = "Write a Python function `def add(a, b):` that returns the sum of a and b."
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
RIGHT_LONG = "```python\ndef add(a, b):\n    total = a\n    total += b\n    return total\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
CRASH = "```python\ndef add(a, b):\n    raise RuntimeError('todo')\n```"
WRITTEN = "```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 5) == 5\n```"


class WritesTests:
    """The policy's test-writing call: one reply, its usage, and the call it was asked."""

    def __init__(self, text: str = WRITTEN) -> None:
        self.text = text
        self.calls: list[GenerateCall] = []

    async def generate(self, call: GenerateCall, **_: Any) -> Generation:
        self.calls.append(call)
        return Generation((Candidate(self.text, "stop", 30, call.seeds[0]),), prompt_tokens=60, cached_tokens=0)


def code_draw(greedy: str, sampled: Sequence[str]) -> Draw:
    """A drawn code draw: the texts, their hidden-test verdicts (right: the sum), not yet run."""

    def cand(i: int, text: str) -> PoolCandidate:
        return PoolCandidate(i, i == 0, i, 0 if i == 0 else 1, text, 12, False, "", text in (RIGHT, RIGHT_LONG))

    calls = (Call(1, 0.0, 768, 80, 0, 12, 1.0), Call(len(sampled), 0.7, 768, 80, 79, 12 * len(sampled), 1.0))
    return Draw("code", tuple(cand(i, t) for i, t in enumerate([greedy, *sampled])), calls)


def code_pool(pid: str, draw: Draw) -> ProblemPool:
    problem = {"id": pid, "dataset": "humaneval", "level": 1, "question": PROBLEM, "reference": "", "check": "code",
               "extra": {}}  # fmt: skip
    return ProblemPool(problem, "humaneval", "code", "calibration", "code", {"code": draw})


async def test_the_pool_records_the_tests_and_each_candidates_behaviour_as_served() -> None:
    policy, executor = WritesTests(), LocalExecutor()
    draw = await with_behaviour(code_draw(WRONG, [RIGHT, "no code here", CRASH]), (Message("user", PROBLEM),),
                                policy, executor, seed=7)  # fmt: skip
    (call,) = policy.calls
    assert call.messages == code_execution.tests_messages(PROBLEM, None, 8)  # the problem names no def line
    assert (call.temperature, call.max_tokens, call.seeds) == (0.0, 400, (7,))
    assert draw.tests is not None and draw.tests.version == behaviour_version()
    assert draw.tests.entry == "add"  # the function the tests call
    assert draw.tests.cases == (("1, 2", "3"), ("2, 2", "4"), ("0, 5", "5"))
    assert draw.tests.call.prompt_tokens == 60 and draw.tests.call.completion_tokens == 30
    assert [c.behaviour for c in draw.candidates] == [
        ["-1", "0", "-5"], ["3", "4", "5"], [], ["raise:RuntimeError"] * 3,
    ]  # fmt: skip
    assert draw.candidates[1].asserted == [True, True, True] and draw.candidates[1].behaviour_s == 0.05
    assert draw.candidates[2].behaviour_s == 0.0 and len(executor.runs) == 3  # no function: no run
    assert not needs_behaviour(draw, behaviour_version()) and needs_behaviour(draw, "other")


async def test_the_replay_answers_what_the_served_strategy_answers() -> None:
    """The served run on the same texts and the replay on the recorded pool choose the same
    candidate: RIGHT and RIGHT_LONG agree, RIGHT is shorter, the crash abstains."""
    greedy, sampled = WRONG, [RIGHT, RIGHT_LONG, CRASH]

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del seed
        if call.messages[0].content == code_execution.TESTS_SYSTEM:
            return WRITTEN
        return greedy if call.temperature == 0.0 else sampled[index % len(sampled)]

    job = make_job("code_execution", n=4, max_tokens=200)
    job.messages[0].content = PROBLEM
    served, _ = await run_search(job, ScriptedPolicy(respond), ScriptedVerifier(lambda t: 0.0),
                                 executor=LocalExecutor())  # fmt: skip
    assert served.termination == orchestrator_pb2.TERMINATION_COMPLETED and served.answer == RIGHT

    draw = await with_behaviour(code_draw(greedy, sampled), (Message("user", PROBLEM),), WritesTests(), LocalExecutor())
    order = list(draw.candidates)
    assert order[ranking(order, source_lengths(draw))[0].best.index].text == served.answer
    run = next(Pricer(LatencyModel()).outcomes(code_pool("h0", draw), Config("code_exec@4", "code_exec", 4),
                                               random.Random(0)))  # fmt: skip
    assert run.correct and run.agreement == 0.5  # a cluster of two of the four candidates


def header(seq: int) -> dict[str, Any]:
    return {"model": "m", "settings": {"seed": 3, "k": 1}, "program_version": "p", "seq": seq}


async def test_the_sitting_records_only_newest_unrecorded_code_draws_and_keeps_the_header(tmp_path: Path) -> None:
    old = code_pool("a", code_draw(WRONG, [RIGHT]))
    write_chunk(tmp_path, "calibration", 1, header(1), [old, code_pool("b", code_draw(RIGHT, [RIGHT]))])
    write_chunk(tmp_path, "calibration", 2, header(2), [code_pool("a", code_draw(RIGHT, [WRONG]))])
    chunks = list(iter_chunks(tmp_path))
    todo = to_record(chunks, behaviour_version())
    assert [(c.seq, positions) for c, positions in todo] == [(1, [1]), (2, [0])]  # "a" of chunk 1 is superseded

    seen: list[tuple[str, int]] = []

    async def record(pool: ProblemPool, seed: int) -> ProblemPool:
        seen.append((pool.id, seed))
        draw = await with_behaviour(pool.draws["code"], (Message("user", PROBLEM),), WritesTests(), LocalExecutor())
        return ProblemPool(pool.problem, pool.family, pool.kind, pool.split, pool.task_type, {"code": draw})

    chunk, positions = todo[0]
    await record_chunk(chunk, positions, record, {"version": behaviour_version()})
    again = next(iter_chunks(tmp_path, "calibration"))
    assert seen == [("b", 3)]  # the chunk's draw seed
    assert again.header["settings"] == {"seed": 3, "k": 1} and again.header["program_version"] == "p"
    assert again.header["behaviour"][0]["problems"] == 1 and again.header["behaviour"][0]["version"]
    assert again.pools[0].draws["code"].tests is None and again.pools[1].draws["code"].tests is not None
    assert [c.seq for c, _ in to_record(list(iter_chunks(tmp_path)), behaviour_version())] == [2]
    assert [c.seq for c, _ in to_record(list(iter_chunks(tmp_path)), "another version")] == [1, 2]
