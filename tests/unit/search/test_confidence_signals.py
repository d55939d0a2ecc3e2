"""Live confidence signals equal the calibration replay's on the same ballots.

``ttc.confidence`` is a model fitted on the signals that ``evaluation/confidence/rows.py`` computes by
replaying configurations on pools; it applies to a live answer only if the strategies compute
the same signals. Each test runs a real strategy (scripted policy, verifier and sandbox) through
``run_search``, records the signals it hands to the calibrator, rebuilds the same ballots as
pool candidates and asks the pricing's replay (``Pricer.sampled_vote``, ``Pricer.pot_run``) what
it would compute.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from evaluation.pools.store import Call, Draw, PoolCandidate
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from services.common.answers import normalize_for_vote
from services.common.confidence import ConfidenceSignals, shipped
from services.common.confidence_prompt import prompt_features, with_prompt
from services.gen.ttc.v1 import orchestrator_pb2
from services.search import run as run_module
from services.search.interfaces import RAW_PROMPT_ROLE, Message
from services.search.run import run_search
from services.search.strategies.code_behaviour import Behaviour, Cluster, Entry
from services.search.strategies.code_execution import cluster_signals
from services.search.strategies.signals import agreement, answer_confidence, heaviest, task_type_of, vote_signals
from tests.helpers.search_fakes import PolicyCall, ScriptedExecutor, ScriptedPolicy, ScriptedVerifier, contains
from tests.helpers.search_jobs import make_job

NO_VERIFIER = ScriptedVerifier(lambda text: 0.0)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[ConfidenceSignals | None]:
    """The signals ``run_search`` computes each result's confidence from."""
    seen: list[ConfidenceSignals | None] = []

    def record(signals: ConfidenceSignals | None, problem: Sequence[Message]) -> float | None:
        seen.append(signals)
        return answer_confidence(signals, problem)

    monkeypatch.setattr(run_module, "answer_confidence", record)
    return seen


def served(signals: ConfidenceSignals, text: str = "What is 6*7?") -> float:
    """The shipped model's probability with what the prompt says (``make_job`` asks "What is 6*7?")."""
    model = shipped()
    return model.probability(with_prompt(signals, text, model))


def thought(value: str) -> str:
    return f"Let me think.\n\nThe answer is {value}." if value else "I am not sure how to do this."


def candidate(key: str, index: int = 0, *, greedy: bool = False, **extra: Any) -> PoolCandidate:
    return PoolCandidate(index, greedy, index, 0, "", 10, False, key, None, **extra)


def drawn(kind: str, cands: list[PoolCandidate]) -> Draw:
    return Draw(kind, tuple(cands), (Call(len(cands), 0.7, 64, 100, 0, 10, 1.0),))  # type: ignore[arg-type]


def by_index(values: list[str]) -> Any:
    """Candidate ``index`` of each call states ``values[index]`` (or no answer for "")."""
    return lambda call, index, seed: thought(values[index])


def programs_then_thoughts(programs: list[str], thoughts: list[str]) -> Any:
    """Program requests print ``programs`` in the order drawn ("raise" crashes); other requests
    (the hybrid's thoughts, the fallback) state ``thoughts`` in order."""
    prog: Iterator[str] = iter(programs)
    cot: Iterator[str] = iter(thoughts)

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        if call.messages and "Python 3 program" in call.messages[0].content:
            value = next(prog)
            return (
                "```python\nraise ValueError\n```" if value == "raise" else f'```python\nprint("{value}".strip())\n```'
            )
        return thought(next(cot))

    return respond


REPLAY = Pricer(LatencyModel())


def _sampled(config: Config, cands: list[PoolCandidate]) -> tuple[ConfidenceSignals | None, bool]:
    run = REPLAY.sampled_vote(drawn("cot", cands), cands, config)
    return run.signals, run.correct


def _pot_run(cots: Draw, order: list[PoolCandidate], thoughts: list[PoolCandidate],
             config: Config) -> tuple[ConfidenceSignals | None, bool]:  # fmt: skip
    run = REPLAY.pot_run(drawn("program", order), cots, order, thoughts, config)
    return run.signals, run.correct


def program_keys(trace: orchestrator_pb2.SearchTrace) -> list[str]:
    return [n.execution.answer for n in trace.nodes if n.HasField("execution")]


async def test_self_consistency_matches_the_replay(recorded: list[ConfidenceSignals | None]) -> None:
    values = ["7", "8", "7", "", "7"]
    job = make_job("self_consistency", n=5)
    result, _ = await run_search(job, ScriptedPolicy(by_index(values)), NO_VERIFIER)
    pool = [candidate(normalize_for_vote(thought(v)), i, mean_logprob=-0.1) for i, v in enumerate(values)]
    expected, _ = _sampled(Config("sc@5", "sc", 5), pool)
    assert recorded == [expected]
    assert (expected.vote_share, expected.votes, expected.distinct, expected.abstained) == (0.6, 5, 2, 1)
    assert result.HasField("confidence") and result.confidence == served(expected)


async def test_weighted_vote_and_best_of_n_match_the_replay(recorded: list[ConfidenceSignals | None]) -> None:
    values = ["7", "8", "7", "8", "8"]
    judge = ScriptedVerifier(contains("7", hit=0.9, miss=0.2))
    scores = [0.9 if v == "7" else 0.2 for v in values]
    pool = [
        candidate(normalize_for_vote(thought(v)), i, scores={"orm": s}, judge_tokens={"orm": 0}, judge_s={"orm": 0.0})
        for i, (v, s) in enumerate(zip(values, scores, strict=True))
    ]
    await run_search(make_job("weighted_vote", n=5), ScriptedPolicy(by_index(values)), judge)
    await run_search(make_job("best_of_n", n=5), ScriptedPolicy(by_index(values)), judge)
    wvote, _ = _sampled(Config("wvote@5", "wvote", 5, judge="orm"), pool)
    bon, _ = _sampled(Config("bon@5", "bon", 5, judge="orm"), pool)
    assert recorded == [wvote, bon]
    assert wvote.config == "wvote" and wvote.vote_share == pytest.approx(1.8 / 2.4) and wvote.judge_score == 0.9
    assert bon.config == "bon" and bon.vote_share == 0.4 and bon.judge_score == 0.9  # 2 of 5 say 7


async def test_program_of_thought_matches_the_replay(recorded: list[ConfidenceSignals | None]) -> None:
    job = make_job("program_of_thought", n=5, params={"early_stop": False})
    policy = ScriptedPolicy(programs_then_thoughts(["7", "9", "7", "raise", "9"], []))
    _, trace = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    keys = program_keys(trace)
    assert keys == ["7", "9", "7", "", "9"]
    order = [candidate(k, i, greedy=i == 0) for i, k in enumerate(keys)]
    expected, _ = _pot_run(drawn("cot", []), order, [], Config("pot@5", "pot", 5))
    assert recorded == [expected]
    assert (expected.config, expected.vote_share, expected.abstained, expected.programs_agree) == ("pot", 0.4, 1, None)


async def test_the_chain_of_thought_fallback_matches_the_replay(recorded: list[ConfidenceSignals | None]) -> None:
    # Three programs crash (and no retries), the greedy chain of thought answers alone.
    job = make_job("program_of_thought", n=3, params={"early_stop": False, "retries": 0})
    policy = ScriptedPolicy(programs_then_thoughts(["raise"] * 3, ["5"]))
    result, trace = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    assert "5" in result.answer
    order = [candidate(k, i, greedy=i == 0) for i, k in enumerate(program_keys(trace))]
    cots = drawn("cot", [candidate(normalize_for_vote(thought("5")), greedy=True)])
    expected, _ = _pot_run(cots, order, [], Config("pot@3", "pot", 3))
    assert recorded == [expected]
    assert (expected.vote_share, expected.votes, expected.abstained) == (0.25, 4, 3)  # one answer of four ballots cast


async def test_the_hybrid_records_agreement_as_the_replay_does(recorded: list[ConfidenceSignals | None]) -> None:
    job = make_job("program_of_thought", n=3, params={"mode": "hybrid", "cot": 2, "early_stop": False})
    policy = ScriptedPolicy(programs_then_thoughts(["9", "7", "9"], ["7", "7"]))
    _, trace = await run_search(job, policy, NO_VERIFIER, executor=ScriptedExecutor())
    order = [candidate(k, i, greedy=i == 0) for i, k in enumerate(program_keys(trace))]
    thoughts = [candidate(normalize_for_vote(thought("7")), i) for i in (1, 2)]
    expected, _ = _pot_run(drawn("cot", []), order, thoughts, Config("hybrid@3+cot2", "pot", 3, cot=2))
    assert recorded == [expected]
    # Programs lead with 9 (2 votes), thoughts with 7; 9 and 7 tie on weight 2, the earliest (9) wins.
    assert (expected.config, expected.programs_agree, expected.vote_share) == ("hybrid", False, 0.5)


async def test_no_signal_means_no_confidence(recorded: list[ConfidenceSignals | None]) -> None:
    single, _ = await run_search(make_job("single"), ScriptedPolicy(by_index(["42"])), NO_VERIFIER)
    assert not single.HasField("confidence")  # one sample: nothing to be confident from
    unanswered = ["", "", ""]
    vote, _ = await run_search(make_job("self_consistency", n=3), ScriptedPolicy(by_index(unanswered)), NO_VERIFIER)
    assert vote.answer and not vote.HasField("confidence")  # no candidate had an answer to compare
    assert recorded == [None, None]


async def test_the_prompt_s_prior_reaches_the_confidence(recorded: list[ConfidenceSignals | None]) -> None:
    """The strategy reports the vote; the worker adds what the prompt says (task type, prior)
    by the one rule calibration replays with (``confidence_prompt.with_prompt``)."""
    job = make_job("self_consistency", n=3)
    await run_search(job, ScriptedPolicy(by_index(["7", "7", "8"])), NO_VERIFIER)
    (signals,) = recorded
    assert signals is not None and signals.prior is None and signals.task_type is None
    asked = (Message("user", "What is 6*7?"),)
    model = shipped()
    prior = model.prior("sc", prompt_features("What is 6*7?"))
    assert prior is not None and 0.0 <= prior <= 1.0
    assert answer_confidence(signals, asked) == model.probability(replace(signals, task_type="arithmetic", prior=prior))


# Two calibration prompts (docs/data/calibration/pools/qwen2.5-coder-0.5b/): the 0.5B model's
# programs are right on nearly every multiplication and on few leg counts (it gives animals the
# wrong number of legs), and both are typed ``computable`` or ``math_word`` by the rules.
MULTIPLICATION = "Solve the following multiplication: 7 * 2. Give only the result as your final answer."
LEGS = (
    "Your task is to count how many legs there are in total when given a list of animals.\n\n"
    "Now, how many legs are there in total if you have 2 lobsters?\n"
)


def test_the_same_unanimous_program_is_less_sure_where_the_model_is_usually_wrong() -> None:
    """One agreeing program is the same vote on both prompts; the prior tells them apart."""
    vote = ConfidenceSignals("pot", 1.0, 1, 1, 0)
    model = shipped()
    legs = model.prior("pot", prompt_features(LEGS))
    product = model.prior("pot", prompt_features(MULTIPLICATION))
    assert legs is not None and product is not None and legs < product
    on_legs = answer_confidence(vote, (Message("user", LEGS),))
    on_product = answer_confidence(vote, (Message("user", MULTIPLICATION),))
    assert on_legs is not None and on_product is not None and on_legs < on_product


def test_the_prompt_s_task_type_reaches_the_confidence_as_the_gateway_reads_it() -> None:
    """The task type is the gateway's (last user message, else the raw prompt), and it moves the
    probability: the same vote on a counting question and on an open one is not equally sure."""
    vote = ConfidenceSignals("pot", 1.0, 1, 1, 0)
    question = "How many times does the letter r appear in strawberry?"
    counting = (Message("system", "Be brief."), Message("user", question))
    raw = (Message(RAW_PROMPT_ROLE, "What is 6*7?"),)
    assert task_type_of(counting) == "computable" and task_type_of(raw) == "arithmetic"
    assert task_type_of((Message("user", "Write a haiku about autumn."),)) == "open"
    model = shipped()
    prior = model.prior("pot", prompt_features(question))
    assert answer_confidence(vote, counting) == model.probability(replace(vote, task_type="computable", prior=prior))
    open_ended = answer_confidence(vote, (Message("user", "Write a haiku about autumn."),))
    assert open_ended is not None and open_ended != answer_confidence(vote, counting)


async def test_the_cascade_escalates_on_the_calibrated_confidence_not_the_share() -> None:
    # Three of four agree: a share of 0.75 met the old threshold; the calibrated confidence of
    # that vote (about 0.42 by the shipped model) does not, so it escalates.
    small = ScriptedPolicy(by_index(["1", "1", "1", "2"]))
    large = ScriptedPolicy(by_index(["42"] * 4))
    job = make_job("cascade", n=4, params={"inner": "self_consistency", "threshold": 0.75})
    result, trace = await run_search(job, small, NO_VERIFIER, escalation=large)
    assert large.calls and "42" in result.answer
    (node,) = [n for n in trace.nodes if n.action == "escalate"]
    assert node.score == pytest.approx(served(ConfidenceSignals("sc", 0.75, 4, 2, 0)))
    assert node.score < 0.75 and "vote share 0.75" in node.text
    assert result.HasField("confidence")  # the large model's vote, by the same rules


def test_heaviest_and_agreement_follow_the_replay_s_winner() -> None:
    assert heaviest(["a", "b", "b", "a"], [1, 1, 1, 1]) == "a"  # a tie: the earliest
    assert heaviest(["", "b", "a"], [5, 1, 2]) == "a"  # abstentions never win
    assert heaviest(["", ""], [1, 1]) is None
    assert agreement(["7", "9"], [1, 1], [], []) is None  # no thoughts
    assert agreement(["", ""], [1, 1], ["7"], [0.5]) is None  # no program answered
    assert agreement(["7", "9", "9"], [1, 1, 1], ["9"], [0.5]) is True


def test_a_vote_with_no_answer_has_no_signals_and_a_chosen_blank_has_share_0() -> None:
    assert vote_signals("sc", ["", ""], [1, 1], "") is None
    s = vote_signals("bon", ["7", ""], [1, 1], "", judge_score=0.9)
    assert s is not None and (s.vote_share, s.votes, s.distinct, s.abstained) == (0.0, 2, 1, 1)
    assert shipped().probability(s) == 0.005  # the fitted floor, as the replay predicts it


def test_code_clusters_count_every_candidate() -> None:
    def entry(i: int) -> Entry:
        return Entry(i, 10, Behaviour(("1",), ()))

    ranked = [Cluster([entry(0), entry(2), entry(3)]), Cluster([entry(1)])]
    s = cluster_signals(5, ranked)  # candidate 4 had nothing to run: it abstains
    assert s is not None
    assert (s.config, s.vote_share, s.votes, s.distinct, s.abstained) == ("code_clusters", 0.6, 5, 2, 1)
    assert not shipped().fitted(s)  # behaviour clusters are not the pools' text vote: the fallback
    assert cluster_signals(3, []) is None
