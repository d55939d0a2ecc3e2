"""code_execution: inputs parsed safely, candidates run on them, clustered by behaviour, ranked.

The policy is scripted; the harness programs run in a local ``python`` subprocess (the
candidates are this file's own functions), so what is tested is the program the sandbox
would run, not a fake of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.run import run_search
from services.search.strategies.code_behaviour import (
    Behaviour,
    Case,
    Entry,
    called_name,
    clusters,
    context_imports,
    dual_agreement,
    function_to_call,
    parse_tests,
    problem_entry_point,
)
from services.search.strategies.code_execution import TESTS_SYSTEM, CodeExecution
from services.search.strategies.code_harness import harness, parse_run
from services.search.strategies.config import StrategyInput
from tests.helpers.local_executor import LocalExecutor
from tests.helpers.search_fakes import PolicyCall, ScriptedPolicy, ScriptedVerifier
from tests.helpers.search_jobs import make_job

T = orchestrator_pb2


async def behaviour_of(code: str, tests: Sequence[Case], name: str = "f", limit_s: float = 0.5) -> Behaviour:
    run = await LocalExecutor().run(harness(code, name, tests, limit_s=limit_s), wall_seconds=20)
    return parse_run(run.stdout, len(tests))


# -- inputs -----------------------------------------------------------------------------------
def test_parse_tests_keeps_only_literal_calls_and_their_expected_results() -> None:
    text = """Tests:
```python
assert add(1, 2) == 3
assert 0 == add(-1, 1)
assert add([1], [2]) == [1, 2]
assert add(x, 2) == 3
assert add(__import__('os').system('true'), 1) == 0
assert add(*args) == 0
assert add(a=1, b=5) == 6
assert not add(0, 0)
assert abs(add(0.5, 0.25) - 0.75) < 1e-9
print(add(7, 8))
assert add(1, 2) == 3
```"""
    tests = parse_tests(text, "add", 20)
    assert tests == [
        Case("1, 2", "3"),
        Case("-1, 1", "0"),
        Case("[1], [2]", "[1, 2]"),
        Case("a=1, b=5", "6"),
        Case("0, 0", "False"),
        Case("0.5, 0.25", None),  # a call inside another expression: an input, no assertion
        Case("7, 8", None),
    ]
    assert parse_tests(text, "add", 2) == tests[:2]
    assert parse_tests(text, "other", 20) == []


def test_parse_tests_survives_a_broken_line_and_prose() -> None:
    text = "assert f('a') == 'A'\nassert f('b' == 'B'\nHere is another: assert f('c') == 'C'\nassert f('') == ''"
    assert parse_tests(text, "f", 10) == [Case("'a'", "'A'"), Case("''", "''")]
    assert called_name(text) == "f"


def test_entry_points_and_context() -> None:
    prompt = "from typing import List\n\ndef helper(x):\n    pass\n\ndef solve(xs: List[int]) -> int:\n    '''doc'''\n"
    assert problem_entry_point(prompt) == "solve"
    assert problem_entry_point("Write a function that reverses a string.") is None
    assert context_imports(prompt) == "from typing import List"
    code = "def main(s):\n    return rev(s)\n\ndef rev(s):\n    return s[::-1]\n"
    assert function_to_call(code, None) == "main"  # the function no other one calls
    assert function_to_call(code, "rev") == "rev"
    assert function_to_call(code, "missing") == "main"
    assert function_to_call("x = 1\n", None) is None


# -- the harness ------------------------------------------------------------------------------
async def test_harness_prints_canonical_results_and_exception_names() -> None:
    code = (
        "import sys\n"
        "def f(x):\n"
        "    print('noise')\n"
        "    if x == 0: raise ZeroDivisionError('no')\n"
        "    if x == 1: return {3, 1, 2}\n"
        "    if x == 2: return 2.0\n"
        "    if x == 3:\n"
        "        while True: pass\n"
        "    if x == 4: sys.exit(1)\n"
        "    x.append(9)\n"
        "    return x\n"
        "if __name__ == '__main__':\n"
        "    print(f(input()))\n"
    )
    tests = [Case(a, e) for a, e in [("0", None), ("1", "{1, 2, 3}"), ("2", "2"), ("3", "0"), ("4", None)]]
    tests += [Case("[1]", "[1, 9]"), Case("[1]", None)]
    behaviour = await behaviour_of(code, tests)
    assert behaviour.results == (
        "raise:ZeroDivisionError", "{1, 2, 3}", "2", "timeout", "raise:SystemExit", "[1, 9]", "[1, 9]",
    )  # fmt: skip
    # The same literal input is rebuilt for every call: the first append did not leak into the second.
    assert behaviour.passed == (None, True, True, False, None, True, None)
    assert behaviour.assertions_passed == 3
    assert not behaviour.crashed_everywhere


async def test_harness_reports_a_candidate_that_fails_to_define() -> None:
    tests = [Case("1"), Case("2", "2")]
    broken = await behaviour_of("import no_such_module_here\ndef f(x):\n    return x\n", tests)
    assert broken.results == ("error:ModuleNotFoundError",) * 2
    assert broken.crashed_everywhere
    missing = await behaviour_of("def g(x):\n    return x\n", tests)
    assert missing.results == ("error:KeyError",) * 2


def test_parse_run_marks_inputs_a_killed_run_never_reached() -> None:
    stdout = 'noise\n@@ttc-case@@ [0, "1", true]\n@@ttc-case@@ garbage\n'
    assert parse_run(stdout, 3) == Behaviour(("1", "missing", "missing"), (True, None, None))


# -- ranking ----------------------------------------------------------------------------------
def entry(index: int, results: Sequence[str], passed: Sequence[bool | None] = (), length: int = 50) -> Entry:
    return Entry(index, length, Behaviour(tuple(results), tuple(passed) or (None,) * len(results)))


def test_largest_cluster_wins_and_crashes_abstain() -> None:
    entries = [
        entry(0, ["1", "2"]),
        entry(1, ["1", "3"]),
        entry(2, ["1", "3"], length=40),
        entry(3, ["raise:TypeError", "timeout"]),
        entry(4, ["raise:TypeError", "timeout"]),
        entry(5, ["raise:TypeError", "timeout"]),
    ]
    ranked = clusters(entries)
    assert [[e.index for e in c.members] for c in ranked] == [[1, 2], [0]]  # the crashers abstain
    assert ranked[0].best.index == 2  # the shortest member answers


def test_ties_go_to_assertions_then_shortest() -> None:
    by_assertions = clusters([entry(0, ["1"], [False]), entry(1, ["2"], [True])])
    assert by_assertions[0].best.index == 1
    by_length = clusters([entry(0, ["1"], length=90), entry(1, ["2"], length=30)])
    assert by_length[0].best.index == 1
    same = clusters([entry(0, ["1"], length=30), entry(1, ["2"], length=30)])
    assert same[0].best.index == 0  # all equal: the earlier (greedy) candidate


def test_user_tests_dominate_cluster_size() -> None:
    entries = [entry(0, ["1"]), entry(1, ["1"]), entry(2, ["2"]), entry(3, ["raise:KeyError"])]
    entries[2].user_score = 1.0
    assert clusters(entries)[0].best.index == 2
    entries[2].user_score, entries[3].user_score = 0.0, 0.5  # passing some user tests: it does not abstain
    ranked = clusters(entries)
    assert ranked[0].best.index == 3


def test_dual_agreement_scores_candidates_times_assertions() -> None:
    entries = [
        entry(0, ["1", "2", "3"], [True, False, False]),
        entry(1, ["1", "9", "9"], [True, False, False]),
        entry(2, ["1", "2", "4"], [True, True, True]),
        entry(3, ["5", "5", "5"], [False, False, False]),
        entry(4, ["5", "5", "5"], [False, False, False]),
    ]
    # Clusters: {3, 4} is the largest. Dual agreement: {2} scores 1 x 3 > {0, 1} 2 x 1 > {3, 4} 0.
    assert clusters(entries)[0].best.index == 3
    assert [[e.index for e in c.members] for c in dual_agreement(entries)] == [[2], [0, 1], [3, 4]]


# -- the strategy -----------------------------------------------------------------------------
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
RIGHT_LONG = "```python\ndef add(a, b):\n    total = a\n    total += b\n    return total\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
CRASH = "```python\ndef add(a, b):\n    raise RuntimeError('todo')\n```"
TESTS = "```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 5) == 5\n```"
PROBLEM = "Write a Python function `def add(a, b):` that returns the sum of a and b."


def scripted(greedy: str, sampled: Sequence[str], tests: str = TESTS) -> ScriptedPolicy:
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        del seed
        if call.messages[0].content == TESTS_SYSTEM:
            return tests
        return greedy if call.temperature == 0.0 else sampled[index % len(sampled)]

    return ScriptedPolicy(respond)


def code_job(n: int = 4, verifier: str = "", **params: object) -> T.SearchJob:
    job = make_job("code_execution", n=n, params=dict(params), verifier=verifier, max_tokens=200)
    job.messages[0].content = PROBLEM
    return job


async def test_execution_outvotes_a_wrong_greedy_candidate() -> None:
    policy, executor = scripted(WRONG, [RIGHT, RIGHT_LONG, CRASH]), LocalExecutor()
    result, trace = await run_search(code_job(n=4), policy, ScriptedVerifier(lambda t: 0.0), executor=executor)
    assert result.termination == T.TERMINATION_COMPLETED, result.error
    assert result.answer == RIGHT  # RIGHT and RIGHT_LONG agree; RIGHT is shorter
    assert len(executor.runs) == 4 and result.budget_used.sandbox_runs == 4
    assert len(policy.calls) == 3  # greedy, the sampled rest, the tests
    actions = [n.action for n in trace.nodes]
    assert actions.count("generate") == 4 and actions.count("tests") == 1 and actions.count("inputs") == 1
    inputs = next(n for n in trace.nodes if n.action == "inputs")
    assert inputs.visits == 3 and "add(1, 2) == 3" in inputs.text
    cluster_nodes = [n for n in trace.nodes if n.action == "cluster"]
    assert [n.visits for n in cluster_nodes] == [2, 1]  # the crashing candidate abstained
    runs = [n.execution for n in trace.nodes if n.HasField("execution")]
    assert len(runs) == 4 and runs[1].answer == runs[2].answer != runs[0].answer
    # the evidence is the reasoning, the code the content
    assert "3 model-written input(s)" in result.reasoning and "clusters of 2, 1" in result.reasoning
    assert "add(1, 2) == 3" in result.reasoning and "passed 3 model-written assertion(s)" in result.reasoning


async def test_user_tests_rank_first_through_the_code_tests_verifier() -> None:
    code = {"tests": [{"name": "t", "check_code": "assert add(2, 3) == -1"}], "entry_point": "add"}
    verifier = ScriptedVerifier(lambda text: 1.0 if "a - b" in text else 0.0)
    policy = scripted(RIGHT, [RIGHT, RIGHT_LONG, WRONG])
    result, _ = await run_search(code_job(n=4, code=code), policy, verifier, executor=LocalExecutor())
    assert [c.verifier for c in verifier.calls] == ["code_tests"]
    assert dict(verifier.calls[0].code or {})["entry_point"] == "add"
    assert result.answer == WRONG  # the user's tests (here: a - b) beat the largest cluster
    assert result.termination == T.TERMINATION_SOLVED
    assert "it passed 100% of your tests" in result.reasoning


async def test_the_judge_breaks_a_tie_between_clusters() -> None:
    verifier = ScriptedVerifier(lambda text: 0.9 if "a - b" in text else 0.2)
    inputs = "add(1, 2)\nadd(2, 3)"  # inputs without assertions: two clusters of one, nothing between them
    policy = scripted(RIGHT, [WRONG], tests=inputs)
    result, _ = await run_search(code_job(n=2, verifier="orm"), policy, verifier, executor=LocalExecutor())
    assert [c.verifier for c in verifier.calls] == ["orm"] and len(verifier.calls[0].candidates) == 2
    assert result.answer == WRONG
    policy = scripted(RIGHT, [WRONG], tests=inputs)
    no_judge, _ = await run_search(code_job(n=2), policy, verifier, executor=LocalExecutor())
    assert no_judge.answer == RIGHT  # same length: the greedy candidate


async def test_no_inputs_or_no_function_answers_without_the_sandbox() -> None:
    executor = LocalExecutor()
    policy = scripted("I cannot write that.", ["Sorry."], tests="no tests here")
    result, trace = await run_search(code_job(n=2), policy, ScriptedVerifier(lambda t: 0.0), executor=executor)
    assert result.answer == "I cannot write that." and not executor.runs
    assert "None of the 2 candidate(s) had a function to run" in result.reasoning
    assert not [n for n in trace.nodes if n.action == "cluster"]


async def test_dual_agreement_select() -> None:
    tests = "assert add(1, 2) == 3\nassert add(2, 2) == 4"
    policy = scripted(WRONG, [WRONG, RIGHT], tests=tests)
    job = code_job(n=3, select="dual_agreement")
    result, _ = await run_search(job, policy, ScriptedVerifier(lambda t: 0.0), executor=LocalExecutor())
    assert result.answer == RIGHT  # 1 candidate x 2 assertions beats 2 candidates x 0
    clustered, _ = await run_search(code_job(n=3), scripted(WRONG, [WRONG, RIGHT], tests=tests),
                                    ScriptedVerifier(lambda t: 0.0), executor=LocalExecutor())  # fmt: skip
    assert clustered.answer == WRONG  # the larger behaviour cluster


@pytest.mark.parametrize(
    ("verifier", "params", "field"),
    [
        ("math_equivalence", {}, "reference"),
        ("format", {"format_pattern": "x"}, "strategy.verifier"),
        ("code_tests", {}, "strategy.verifier"),
        ("", {"select": "vote"}, "strategy.params.select"),
        ("", {"code": {"entry_point": "not valid"}}, "strategy.params.code.entry_point"),
        ("", {"tests": 0}, "strategy.params.tests"),
        ("", {"unknown": 1}, "strategy.params.unknown"),
    ],
)
def test_invalid_configuration_names_the_field(verifier: str, params: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        CodeExecution.from_input(StrategyInput(n=4, verifier=verifier, params=params))
    assert err.value.field == field
