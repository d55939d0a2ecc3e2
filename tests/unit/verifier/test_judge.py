"""The generative judges' probability arithmetic and prompts (pure)."""

from __future__ import annotations

import math

import pytest

from services.verifier.judge import orm_prompt, prm_header, problem_text, yes_probability
from services.verifier.types import Message


def test_equal_logprobs_give_one_half() -> None:
    assert yes_probability(-2.0, -2.0) == pytest.approx(0.5)


def test_normalizes_over_yes_and_no_only() -> None:
    # P(Yes)=0.3, P(No)=0.1 with the rest of the mass elsewhere: normalized, 0.75.
    assert yes_probability(math.log(0.3), math.log(0.1)) == pytest.approx(0.75)


def test_shared_text_before_the_label_cancels() -> None:
    shared = -57.25
    assert yes_probability(shared + math.log(0.6), shared + math.log(0.2)) == pytest.approx(0.75)


def test_extreme_logprobs_do_not_overflow() -> None:
    assert yes_probability(-1.0, -2000.0) == pytest.approx(1.0)
    assert yes_probability(-2000.0, -1.0) == pytest.approx(0.0, abs=1e-300)
    assert 0.0 <= yes_probability(-1e308, 1e308) <= 1.0


def test_degenerate_logprobs() -> None:
    assert yes_probability(math.nan, -1.0) == 0.0
    assert yes_probability(-math.inf, -math.inf) == 0.0
    assert yes_probability(-1.0, -math.inf) == 1.0
    assert yes_probability(-math.inf, -1.0) == 0.0


def test_problem_text_leaves_out_the_system_prompt() -> None:
    problem = (Message("system", "Be brief."), Message("user", "What is 2+2?"))
    assert problem_text(problem) == "What is 2+2?"


def test_orm_prompt_puts_problem_and_solution_in_the_user_turn() -> None:
    prompt = orm_prompt("What is 2+2?", "It is 4.", "You grade.", "Correct?")
    assert [m.role for m in prompt.messages] == ["system", "user"]
    user = prompt.messages[1].content
    assert "What is 2+2?" in user and "It is 4." in user and user.endswith("Correct?")


def test_prm_header_is_shared_raw_text_with_the_problem() -> None:
    header = prm_header("What is 2+2?")
    assert header.messages == () and "What is 2+2?" in header.text
