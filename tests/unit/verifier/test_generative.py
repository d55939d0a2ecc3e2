"""The generative ORM and PRM with a scripted policy: probability, batching, usage and failures."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from services.common.errors import InvalidArgument, Unavailable
from services.verifier.orm import OutcomeRewardModel
from services.verifier.prm import ProcessRewardModel
from services.verifier.settings import VerifierSettings
from services.verifier.types import Aggregation, JudgePrompt, Message, PolicyRefused, VerifyJob
from tests.unit.verifier.scripted import ScriptedPolicy, down_policy, erring_policy, label_policy

PROBLEM = (Message("user", "What is 2 + 3 * 4?"),)


def job(*candidates: str, aggregation: Aggregation = Aggregation.MIN) -> VerifyJob:
    return VerifyJob(verifier="x", candidates=candidates, problem=PROBLEM, aggregation=aggregation)


def settings(**kw: object) -> VerifierSettings:
    return VerifierSettings(**kw)  # type: ignore[arg-type]


async def test_orm_score_is_normalized_p_yes_for_every_candidate() -> None:
    policy = label_policy(math.log(0.3), math.log(0.1))
    out = await OutcomeRewardModel(policy, settings()).verify(job("It is 14.", "\\boxed{20}", "14"))
    assert [v.score for v in out.verdicts] == pytest.approx([0.75, 0.75, 0.75])
    assert all(v.passed for v in out.verdicts)
    assert out.verdicts[1].extracted_answer == "20"
    assert len(policy.calls) == 3 and all(c == ["Yes", "No"] for _, c in policy.calls)
    assert out.spend.policy_calls == 3
    # Judge prompts and scored labels are prefilled, never generated: prompt tokens only.
    assert out.spend.prompt_tokens == 3 * (10 + 2 * 3) and out.spend.completion_tokens == 0


async def test_orm_judges_each_candidate_in_its_own_prompt() -> None:
    def logprob(prompt: JudgePrompt, continuation: str) -> float:
        good = "14" in prompt.messages[-1].content
        return math.log(0.9 if (continuation == "Yes") == good else 0.1)

    policy = ScriptedPolicy(logprob)
    out = await OutcomeRewardModel(policy, settings()).verify(job("It is 14.", "It is 20."))
    right, wrong = out.verdicts
    assert right.score == pytest.approx(0.9) and right.passed
    assert wrong.score == pytest.approx(0.1) and not wrong.passed


async def test_orm_policy_error_marks_candidates_not_wrong() -> None:
    out = await OutcomeRewardModel(erring_policy(), settings()).verify(job("a", "b"))
    assert all(v.error.startswith("policy error") for v in out.verdicts)


async def test_orm_policy_outage_fails_the_call() -> None:
    with pytest.raises(Unavailable):
        await OutcomeRewardModel(down_policy(), settings()).verify(job("a", "b", "c"))


def test_generative_verifiers_need_the_problem() -> None:
    for kind in (OutcomeRewardModel(down_policy(), settings()), ProcessRewardModel(down_policy(), settings())):
        with pytest.raises(InvalidArgument) as err:
            kind.validate(VerifyJob(verifier="x", candidates=("a",)))
        assert err.value.field == "problem"


def step_policy(bad_step: str) -> ScriptedPolicy:
    """Judges a prefix wrong exactly when its last step contains ``bad_step`` (either call shape)."""

    def logprob(prompt: JudgePrompt, continuation: str) -> float:
        full = (prompt.text + continuation).split("Solution:\n", 1)[1]
        body, _, label = full.rpartition("\n\n")
        last_step = body.split("\n\n")[-1]
        wrong = bad_step in last_step
        says_yes = label.endswith("Yes")
        return math.log(0.2 if says_yes == wrong else 0.8)

    return ScriptedPolicy(logprob)


SHARED = {"prm_mode": "shared_prompt"}
MODES = [pytest.param({"prm_mode": "prefix_prompts"}, id="prefix_prompts"), pytest.param(SHARED, id="shared_prompt")]


TWO = ("Step 1: 3*4=12\nStep 2: 2+12=14", "Step 1: 2+3=5 WRONG\nStep 2: 5*4=20\nStep 3: so 20")


async def test_prm_prefix_prompts_extend_one_another_with_one_token_labels() -> None:
    policy = step_policy("WRONG")
    policy.concurrency = 1
    out = await ProcessRewardModel(policy, settings()).verify(job(*TWO))
    assert len(policy.calls) == 5 and all(c == [" Yes", " No"] for _, c in policy.calls)
    prompts = [p.text for p, _ in policy.calls]
    assert prompts[1].startswith(prompts[0].removesuffix("Is the last step correct? Answer:"))
    assert prompts[0].endswith("Step 1: 3*4=12\n\nIs the last step correct? Answer:")
    good, bad = out.verdicts
    assert good.step_scores == pytest.approx([0.8, 0.8]) and bad.step_scores == pytest.approx([0.2, 0.8, 0.8])
    assert out.spend.policy_calls == 5


async def test_prm_scores_every_prefix_of_every_candidate_in_one_call() -> None:
    policy = step_policy("WRONG")
    out = await ProcessRewardModel(policy, settings(**SHARED)).verify(job(*TWO))
    assert len(policy.calls) == 1
    prompt, continuations = policy.calls[0]
    assert "What is 2 + 3 * 4?" in prompt.text and len(continuations) == 2 * (2 + 3)
    good, bad = out.verdicts
    assert good.step_scores == pytest.approx([0.8, 0.8]) and good.score == pytest.approx(0.8) and good.passed
    assert bad.step_scores == pytest.approx([0.2, 0.8, 0.8]) and bad.score == pytest.approx(0.2) and not bad.passed
    assert out.spend.policy_calls == 1 and out.spend.prompt_tokens == 10 + 3 * 10
    assert out.spend.completion_tokens == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("how", "expected"),
    [(Aggregation.MIN, 0.2), (Aggregation.PRODUCT, 0.2 * 0.8 * 0.8), (Aggregation.MEAN, 0.6), (Aggregation.LAST, 0.8)],
)
async def test_prm_aggregation_is_applied(how: Aggregation, expected: float, mode: dict[str, str]) -> None:
    out = await ProcessRewardModel(step_policy("WRONG"), settings(**mode)).verify(
        job("Step 1: x WRONG\nStep 2: y\nStep 3: z", aggregation=how)
    )
    assert out.verdicts[0].score == pytest.approx(expected)


async def test_prm_splits_large_batches_into_bounded_calls() -> None:
    policy = label_policy(math.log(0.5), math.log(0.5), " Yes", " No")
    candidates = ["\n\n".join(f"step {i}" for i in range(5))] * 4  # 20 prefixes = 40 continuations
    out = await ProcessRewardModel(policy, settings(prm_max_continuations_per_call=16, **SHARED)).verify(
        job(*candidates)
    )
    assert [len(c) for _, c in policy.calls] == [16, 16, 8]
    assert all(v.step_scores == pytest.approx([0.5] * 5) for v in out.verdicts)


@pytest.mark.parametrize("mode", MODES)
async def test_prm_empty_candidate_scores_zero_without_a_call(mode: dict[str, str]) -> None:
    policy = label_policy(0.0, -5.0, " Yes", " No")
    out = await ProcessRewardModel(policy, settings(**mode)).verify(job("", "   "))
    assert policy.calls == [] and [v.score for v in out.verdicts] == [0.0, 0.0]


async def test_prm_degenerate_logprobs_give_zero_not_nan() -> None:
    policy = ScriptedPolicy(lambda p, c: math.nan)
    out = await ProcessRewardModel(policy, settings()).verify(job("Step 1: a\nStep 2: b"))
    assert out.verdicts[0].score == 0.0 and out.verdicts[0].step_scores == [0.0, 0.0]


@pytest.mark.parametrize("mode", MODES)
async def test_prm_policy_error_and_outage(mode: dict[str, str]) -> None:
    out = await ProcessRewardModel(erring_policy("too long"), settings(**mode)).verify(job("a\n\nb", "c"))
    assert all("too long" in v.error for v in out.verdicts)
    with pytest.raises(Unavailable):
        await ProcessRewardModel(down_policy(), settings(**mode)).verify(job("a\n\nb"))


async def test_prm_one_refused_candidate_does_not_sink_the_batch() -> None:
    def refuse_long(prompt: JudgePrompt, continuations: Sequence[str]) -> Exception | None:
        return PolicyRefused("exceeds the context window") if any("LONG" in c for c in continuations) else None

    policy = ScriptedPolicy(lambda p, c: math.log(0.9) if c.endswith("Yes") else math.log(0.1), fail_when=refuse_long)
    out = await ProcessRewardModel(policy, settings(**SHARED)).verify(job("Step 1: a\nStep 2: b", "LONG", "c"))
    ok, refused, other = out.verdicts
    assert ok.score == pytest.approx(0.9) and other.score == pytest.approx(0.9)
    assert "context window" in refused.error and not ok.error and not other.error
    assert len(policy.calls) == 1 + 3  # the shared call, then one per candidate


async def test_prm_does_not_retry_a_batch_that_timed_out() -> None:
    policy = erring_policy("DEADLINE_EXCEEDED")
    out = await ProcessRewardModel(policy, settings(**SHARED)).verify(job("a\n\nb", "c", "d"))
    assert len(policy.calls) == 1 and all("DEADLINE_EXCEEDED" in v.error for v in out.verdicts)


async def test_prm_prefix_prompts_a_refused_candidate_errs_alone() -> None:
    def refuse_long(prompt: JudgePrompt, continuations: Sequence[str]) -> Exception | None:
        return PolicyRefused("exceeds the context window") if "LONG" in prompt.text else None

    policy = ScriptedPolicy(lambda p, c: math.log(0.9) if c.endswith("Yes") else math.log(0.1), fail_when=refuse_long)
    out = await ProcessRewardModel(policy, settings()).verify(job("Step 1: a\nStep 2: b", "LONG", "c"))
    ok, refused, other = out.verdicts
    assert ok.score == pytest.approx(0.9) and other.score == pytest.approx(0.9)
    assert "context window" in refused.error and not ok.error and not other.error
