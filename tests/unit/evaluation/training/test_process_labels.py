"""Process labels over a scripted policy: a step's value is the share of its rollouts that reach
a verified-right answer, infrastructure errors are never wrong answers, cut rollouts are counted,
the chosen chains are one right and one wrong per problem, never a development or sealed one, and
records already holding a candidate are not drawn again."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

import jsonschema

from evaluation.pools.store import ProblemPool
from evaluation.problems.sealed import load_sealed, sealed_hashes
from evaluation.training.formats import PROCESS_FILES, PoolSource, schemas
from evaluation.training.process_choice import NO_CHAIN, ONE_STEP, Chosen, choose
from evaluation.training.process_labels import RolloutSettings, StepLabeller, pending, rollout_seeds
from evaluation.training.process_rows import CANDIDATE_FAILED, STEPS_FAILED, process_manifest, process_rows
from evaluation.training.withheld import DEVELOPMENT, SEALED, Withheld
from services.search.interfaces import Candidate, ComponentError, FinishReason, GenerateCall, Generation
from tests.unit.evaluation.training.fixtures import cot, problem_pool, side_id

QUESTION = "What is 8 + 5? Add the two numbers."
RIGHT = "We look at the two numbers 8 and 5.\nWe add them carefully: 8 + 5 = 13.\nSo the answer is \\boxed{13}."
WRONG = "We look at the two numbers 8 and 5.\nWe add them carelessly: 8 + 5 = 12.\nSo the answer is \\boxed{12}."
Reply = tuple[str, str]  # (continuation, finish reason)


class Scripted:
    """Continuations chosen by the prefix's last step (a reply per rollout, in turn), or a failure."""

    def __init__(self, script: Callable[[str], Sequence[Reply]]) -> None:
        self.script = script
        self.calls: list[GenerateCall] = []

    async def generate(self, call: GenerateCall, **_: Any) -> Generation:
        self.calls.append(call)
        replies = self.script(call.assistant_prefix)
        candidates = tuple(Candidate(text, cast(FinishReason, finish), 6, seed)
                           for (text, finish), seed in zip(replies, call.seeds, strict=False))  # fmt: skip
        return Generation(candidates, prompt_tokens=40)


def by_step(first: Sequence[Reply], second: Sequence[Reply]) -> Callable[[str], Sequence[Reply]]:
    """``first`` after the first step (the numbers read), ``second`` after the second (the sum)."""
    return lambda prefix: second if prefix.endswith("= 13.\n") or prefix.endswith("= 12.\n") else first


def chosen_of(pool: ProblemPool, cap: int | None = 100) -> list[Chosen]:
    return choose([(pool, "m", cap)], Withheld.build([], frozenset()), Counter())


def pool_of(*texts: tuple[str, str, bool]) -> ProblemPool:
    return problem_pool(QUESTION, "13", cot=[cot(i, a, c, text=t, tokens=30) for i, (t, a, c) in enumerate(texts)])


def label(policy: Scripted, chosen: Chosen, settings: RolloutSettings | None = None) -> dict[str, Any]:
    return asyncio.run(StepLabeller(policy, settings or RolloutSettings()).label(chosen))


def test_value_is_the_share_of_rollouts_that_reach_a_verified_answer() -> None:
    right, wrong = chosen_of(pool_of((RIGHT, "13", True), (WRONG, "12", False)))
    policy = Scripted(by_step([("8 + 5 = 13, so \\boxed{13}.", "stop")] * 3 + [("So \\boxed{14}.", "stop")],
                              [("So the answer is \\boxed{12}.", "stop")] * 4))  # fmt: skip
    record = label(policy, wrong)
    first, second = record["steps"]
    assert (first["rollouts"], first["right"], first["errors"]) == (4, 3, 0)
    assert (second["rollouts"], second["right"]) == (4, 0)  # after the wrong sum nothing reaches 13
    rows = process_rows([wrong], [record], Counter())
    assert [(s.value, s.reaches) for s in rows[0].steps] == [(0.75, True), (0.0, False)]
    assert rows[0].label is False and rows[0].failure == "wrong_value" and rows[0].steps_total == 3
    assert right.trajectory.outcome.label


def test_rollouts_continue_the_prefix_with_derived_seeds_and_the_remaining_budget() -> None:
    (chosen,) = chosen_of(pool_of((WRONG, "12", False)), cap=100)
    policy = Scripted(lambda _: [("\\boxed{13}", "stop")] * 4)
    label(policy, chosen)
    first = next(c for c in policy.calls if c.assistant_prefix.endswith("8 and 5.\n"))
    assert first.assistant_prefix == WRONG[: WRONG.index("\n") + 1] and first.temperature == 0.7
    assert list(first.seeds) == rollout_seeds(chosen.candidate_id, 0, 0, 4)
    used = -(-30 * len(first.assistant_prefix) // len(WRONG))  # the candidate's 30 tokens, pro rata
    assert first.max_tokens == 100 - used
    assert [m.role for m in first.messages] == ["system", "user"] and first.messages[1].content == QUESTION
    (unknown,) = chosen_of(pool_of((WRONG, "12", False)), cap=None)
    policy = Scripted(lambda _: [("\\boxed{13}", "stop")] * 4)
    label(policy, unknown, RolloutSettings(fallback_max_tokens=500))
    assert max(c.max_tokens for c in policy.calls) < 500 < max(c.max_tokens for c in policy.calls) + 30


def test_infrastructure_errors_are_not_wrong_answers() -> None:
    (chosen,) = chosen_of(pool_of((WRONG, "12", False)))

    def script(prefix: str) -> Sequence[Reply]:
        if prefix.endswith("= 12.\n"):
            raise ComponentError("policy", "engine down", "UNAVAILABLE")
        return [("\\boxed{13}", "stop"), ("\\boxed{13}", "abort")]  # two rollouts missing, one aborted

    record = label(Scripted(script), chosen)
    first, second = record["steps"]
    assert (first["rollouts"], first["right"], first["errors"]) == (1, 1, 3)
    assert (second["rollouts"], second["errors"]) == (0, 4) and "engine down" in second["error"]
    left_out: Counter[str] = Counter()
    (row,) = process_rows([chosen], [record], left_out)
    assert [(s.index, s.value, s.errors) for s in row.steps] == [(0, 1.0, 3)]
    assert row.steps_left_out == 1 and left_out[STEPS_FAILED] == 1

    every = label(Scripted(lambda _: (_ for _ in ()).throw(ComponentError("policy", "down"))), chosen)
    left_out = Counter()
    assert process_rows([chosen], [every], left_out) == [] and left_out[CANDIDATE_FAILED] == 1


def test_cut_rollouts_are_counted_and_never_right() -> None:
    (chosen,) = chosen_of(pool_of((WRONG, "12", False)))
    policy = Scripted(lambda _: [("8 + 5 = 13 so \\boxed{13}", "length")] * 2 + [("\\boxed{13}", "stop")] * 2)
    record = label(policy, chosen)
    assert all((s["cut"], s["right"], s["rollouts"]) == (2, 2, 4) for s in record["steps"])


def test_one_right_and_the_most_informative_wrong_chain_per_problem() -> None:
    cut_wrong = cot(0, "1", False, text=WRONG.replace("12", "1"), tokens=30, cut=True)
    pool = problem_pool(QUESTION, "13", cot=[
        cut_wrong, cot(1, "13", True, text=RIGHT), cot(2, "12", False, text=WRONG),
        cot(3, "13", True, text=RIGHT + " "),
    ])  # fmt: skip
    chosen = chosen_of(pool)
    assert [c.candidate_id.rsplit("/", 1)[1] for c in chosen] == ["1", "2"]  # the wrong value before the cut one
    left_out: Counter[str] = Counter()
    one_step = problem_pool(QUESTION, "13", cot=[cot(0, "13", True, text="So \\boxed{13}.")])
    assert choose([(one_step, "m", None)], Withheld.build([], frozenset()), left_out) == []
    assert left_out[ONE_STEP] == 1
    nothing = problem_pool(QUESTION, "13", program=[])
    choose([(nothing, "m", None)], Withheld.build([], frozenset()), left_out)
    assert left_out[NO_CHAIN] == 1


def test_no_development_or_sealed_problem_is_ever_chosen() -> None:
    sealed = load_sealed()[0]
    development_q = "Development: what is 19 + 23 when the two are added together?"
    chains = [cot(0, "42", True, text=RIGHT), cot(1, "12", False, text=WRONG)]
    development = problem_pool(development_q, "42", pid=side_id("heldout", "d"), split="heldout", cot=chains)
    pools = [
        problem_pool(development_q, "42", pid=side_id("calibration", "s"), cot=chains),  # smuggled by content
        problem_pool(sealed.question, sealed.reference, pid=side_id("calibration", "z"), cot=chains),
        problem_pool(QUESTION, "13", pid=side_id("heldout", "h"), cot=chains),  # the split function's development side
        problem_pool(QUESTION, "13", pid=side_id("calibration", "k"), cot=chains),
    ]
    withheld = Withheld.build([development], sealed_hashes(), (p.question for p in load_sealed()))
    left_out: Counter[str] = Counter()
    chosen = choose([(p, "m", None) for p in pools], withheld, left_out)
    assert {c.problem.id for c in chosen} == {pools[3].id}
    assert left_out[f"problems: {DEVELOPMENT}"] == 2 and left_out[f"problems: {SEALED}"] == 1


def test_records_already_holding_a_candidate_are_not_drawn_again() -> None:
    chosen = chosen_of(pool_of((RIGHT, "13", True), (WRONG, "12", False)))
    failed = {"candidate_id": chosen[1].candidate_id, "steps": [{"rollouts": 0}, {"rollouts": 0}]}
    held = {"candidate_id": chosen[0].candidate_id, "steps": [{"rollouts": 4}]}
    assert pending(chosen, [held]) == [chosen[1]]
    assert pending(chosen, [held, failed]) == []
    assert pending(chosen, [held, failed], retry_errors=True) == [chosen[1]]


def test_rows_and_manifest_are_valid_against_their_schemas() -> None:
    chosen = chosen_of(pool_of((RIGHT, "13", True), (WRONG, "12", False)))
    policy = Scripted(lambda prefix: [("\\boxed{12}" if prefix.endswith("= 12.\n") else "\\boxed{13}", "stop")] * 4)
    records = [label(policy, c) for c in chosen]
    left_out: Counter[str] = Counter()
    rows = process_rows(chosen, records, left_out)
    header = {"git_describe": "abc", "model": "m", "model_sha256": "ab" * 32, "settings": RolloutSettings().as_dict(),
              "generated_tokens": 96, "prompt_tokens": 640}  # fmt: skip
    source = PoolSource(path="p", chunks=1, models=["m"], model_sha256=["ab" * 32], draw_seeds=[0], data_seeds=[0],
                        drawn_by=["abc"])  # fmt: skip
    manifest = process_manifest(rows, left_out, headers=[header], pool=source, revision="abc", written_at="now")
    files = schemas(PROCESS_FILES)
    for row in rows:
        jsonschema.validate(row.model_dump(mode="json"), files["process.jsonl"])
    jsonschema.validate(manifest.model_dump(mode="json"), files["process_manifest.json"])
    counts = manifest.files["process.jsonl"]
    assert counts.by_label == {"right": 1, "wrong": 1} and counts.by_failure == {"wrong_value": 1}
    assert manifest.mean_value == {"right": 1.0, "wrong": 0.5}
    assert manifest.mean_value_by_position == {"right": [1.0, 1.0], "wrong": [1.0, 0.0]}
