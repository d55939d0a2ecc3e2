"""The adaptive vote replayed on pools draws what the served strategy would draw, in order."""

from __future__ import annotations

from evaluation.pricing.adaptive import AdaptiveSpec, replay
from tests.unit.evaluation.pool_fixtures import draw


def sources(greedy: tuple[str, bool], sampled: list[tuple[str, bool]], kind: str = "program"):  # type: ignore[no-untyped-def]
    d = draw(kind, greedy, sampled)  # type: ignore[arg-type]
    return d.greedy, d.sampled


def test_an_agreeing_first_wave_stops_at_two() -> None:
    programs = sources(("42", True), [("42", True)] * 8)
    thoughts = sources(("41", False), [("41", False)] * 8, "cot")
    r = replay(AdaptiveSpec(16, confidence=0.99), programs, thoughts)
    assert (r.candidates, r.reason, r.first_wave_settled, r.correct) == (2, "agreed", True, True)
    assert [s.modality for s in r.steps] == ["program"]


def test_a_split_first_wave_draws_thoughts_then_more_programs_and_the_vote_decides() -> None:
    programs = sources(
        ("7", False), [("9", True), ("9", True), ("9", True), ("9", True), ("7", False)] + [("9", True)] * 3
    )
    thoughts = sources(("9", True), [("9", True), ("5", False)] + [("9", True)] * 6, "cot")
    r = replay(AdaptiveSpec(8, steps=("other", "more"), confidence=0.95), programs, thoughts)
    assert [(s.modality, len(s.drawn)) for s in r.steps] == [("program", 2), ("thought", 2), ("program", 4)]
    assert r.steps[1].drawn[0].greedy is False  # later steps draw sampled candidates only
    assert r.correct and r.reason in ("confident", "cap") and not r.first_wave_settled


def test_the_cap_bounds_what_is_drawn_and_a_spent_pool_stops_the_replay() -> None:
    programs = sources(("1", False), [("2", True), ("3", False)])
    thoughts = sources(("", False), [], "cot")
    r = replay(AdaptiveSpec(16, steps=("more",)), programs, thoughts)
    assert r.candidates == 3 and r.reason == "pool" and r.exhausted


def test_open_prose_answers_with_the_greedy_thought() -> None:
    programs = sources(("", False), [("", False)] * 4)
    thoughts = sources(("", True), [("", False)] * 4, "cot")
    r = replay(AdaptiveSpec(8, start="thought"), programs, thoughts)
    assert (r.reason, r.candidates, r.correct) == ("open", 2, True)


def test_a_larger_cap_and_confidence_never_stop_earlier() -> None:
    programs = sources(("3", True), [("4", False), ("3", True), ("5", False)] + [("3", True)] * 5)
    thoughts = sources(("3", True), [("3", True)] * 8, "cot")
    drawn = [replay(AdaptiveSpec(cap, confidence=c), programs, thoughts).candidates
             for cap, c in [(4, 0.8), (8, 0.9), (16, 0.95)]]  # fmt: skip
    assert drawn == sorted(drawn)


def test_an_escalate_step_draws_the_larger_models_sampled_candidates_and_none_without_it() -> None:
    programs = sources(("7", False), [(str(k), False) for k in range(10, 18)])  # every wrong program differs
    thoughts = sources(("6", False), [("6", False)] * 8, "cot")
    large = sources(("", False), [("9", True)] * 8)[1]
    spec = AdaptiveSpec(8, steps=("escalate", "more"), confidence=0.9)
    r = replay(spec, programs, thoughts, {"program": large, "thought": []})
    drawn = [(s.modality, len(s.drawn), s.escalated) for s in r.steps]
    assert drawn[:2] == [("program", 2, False), ("program", 2, True)]
    assert r.correct  # the larger model's agreeing programs outvote the split small ones
    alone = replay(spec, programs, thoughts)
    assert not any(s.escalated for s in alone.steps) and not alone.correct
