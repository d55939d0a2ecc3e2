"""Code candidates run as ``code_execution`` runs them, so code chosen by execution is priced offline.

The served strategy (``services/search/strategies/code_execution.py``) asks the model for test
cases in one greedy call, keeps only their literal inputs, and runs every candidate on them in
the sandbox; it then answers from the largest cluster of identical behaviour. A code draw priced
that way needs what serving observed: the model's test text and each candidate's results on its
inputs. :func:`with_behaviour` records both on a drawn code draw through the real policy and
sandbox, with the strategy's own prompt (``tests_messages``), parser (``parse_tests``,
``called_name``) and harness (``code_harness.runnable``, ``parse_run``) at its default settings,
so the pool holds what a served request would have seen. The drawer calls it for every code
problem; ``python -m calibration behaviour`` calls it for the code draws of existing pools.

:func:`behaviour_version` fingerprints those parts of the strategy: a draw recorded under
another fingerprint is stale and is recorded again.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import time
from collections.abc import Sequence
from dataclasses import replace

from evaluation.pools.store import Call, CodeTests, Draw, PoolCandidate
from services.search.interfaces import Executor, GenerateCall, Message, Policy
from services.search.strategies.code_behaviour import (
    Case,
    called_name,
    context_imports,
    parse_tests,
    problem_entry_point,
)
from services.search.strategies.code_execution import TESTS_MAX_TOKENS, CodeExecution, tests_messages
from services.search.strategies.code_harness import parse_run, runnable
from services.search.strategies.text import question_text

TESTS = CodeExecution.tests  # the strategy's defaults: what a route without params runs
INPUT_TIMEOUT_S = CodeExecution.input_timeout_s
TIMEOUT_S = CodeExecution.timeout_s


@functools.cache
def behaviour_version() -> str:
    """A fingerprint of what a recorded behaviour depends on in the strategy: the rendered
    test-writing prompt of a probe problem, its token cap, the number of tests and time limits,
    the harness a probe candidate runs in, and the source of the functions that parse the
    tests and read a run."""
    probe = runnable("def f(x):\n    return x\n", "f", [Case("1", "1")], input_timeout_s=INPUT_TIMEOUT_S,
                     timeout_s=TIMEOUT_S)  # fmt: skip
    parts = [repr(tests_messages("Q", "f", TESTS)), str(TESTS_MAX_TOKENS), str(TESTS), repr(probe)]
    parts += [inspect.getsource(f) for f in (parse_tests, called_name, parse_run, runnable)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def tests_seed(problem_id: str, seed: int) -> int:
    """The seed of a problem's test-writing call (greedy, so it only names the call)."""
    digest = hashlib.sha256(f"{seed}:{problem_id}:tests".encode()).digest()
    return int.from_bytes(digest[:4], "big")


async def write_tests(policy: Policy, messages: Sequence[Message], *, max_tokens: int, seed: int,
                      overlapped: bool = False) -> CodeTests:  # fmt: skip
    """The model's test cases for the problem of ``messages`` (its own conversation), from the
    strategy's prompt in one greedy call capped as served (``min(max_tokens, TESTS_MAX_TOKENS)``),
    parsed into literal inputs for the entry point the problem names (else the one they call)."""
    question = question_text(messages)
    entry = problem_entry_point(question)
    cap = min(max_tokens, TESTS_MAX_TOKENS)
    started = time.perf_counter()
    generation = await policy.generate(
        GenerateCall(tests_messages(question, entry, TESTS), n=1, seeds=(seed,), max_tokens=cap, temperature=0.0)
    )
    wall = time.perf_counter() - started
    text = generation.candidates[0].text if generation.candidates else ""
    entry = entry or called_name(text)
    cases = parse_tests(text, entry, TESTS)
    call = Call(
        n=1, temperature=0.0, max_tokens=cap, prompt_tokens=generation.prompt_tokens,
        cached_tokens=generation.cached_tokens,
        completion_tokens=sum(c.completion_tokens for c in generation.candidates),
        wall_s=round(wall, 4), overlapped=overlapped,
    )  # fmt: skip
    return CodeTests(text, entry or "", tuple((c.args, c.expected) for c in cases), call, behaviour_version())


async def run_candidate(executor: Executor, candidate: PoolCandidate, tests: CodeTests, imports: str) -> PoolCandidate:
    """``candidate`` with its behaviour on ``tests``' inputs (one sandbox run of the strategy's
    harness); unchanged but cleared when it has no function to call or there is no input (it
    abstains, as served, without a run)."""
    cases = [Case(args, expected) for args, expected in tests.cases]
    ready = runnable(candidate.text, tests.entry or None, cases, imports=imports, input_timeout_s=INPUT_TIMEOUT_S,
                     timeout_s=TIMEOUT_S)  # fmt: skip
    if ready is None or not cases:
        return replace(candidate, behaviour=[], asserted=[], behaviour_s=0.0)
    run = await executor.run(ready.program, wall_seconds=ready.wall_seconds)
    behaviour = parse_run(run.stdout, len(cases))
    return replace(candidate, behaviour=list(behaviour.results), asserted=list(behaviour.passed),
                   behaviour_s=round(run.wall_seconds, 4))  # fmt: skip


async def with_behaviour(draw: Draw, messages: Sequence[Message], policy: Policy, executor: Executor, *,
                         seed: int = 0, overlapped: bool = False) -> Draw:  # fmt: skip
    """``draw`` (a code draw) with the model's tests and every candidate's behaviour on them;
    the candidates run at once, as the strategy runs them. ``max_tokens`` of the test call is
    the draw's own per-candidate cap, as a served request's would be."""
    tests = await write_tests(policy, messages, max_tokens=draw.calls[-1].max_tokens, seed=seed,
                              overlapped=overlapped)  # fmt: skip
    imports = context_imports(question_text(messages))
    ran = await asyncio.gather(*(run_candidate(executor, c, tests, imports) for c in draw.candidates))
    return replace(draw, candidates=tuple(ran), tests=tests)


def needs_behaviour(draw: Draw, version: str) -> bool:
    """Whether a code draw's behaviour is missing or was recorded by other strategy code."""
    return draw.kind == "code" and (draw.tests is None or draw.tests.version != version)
