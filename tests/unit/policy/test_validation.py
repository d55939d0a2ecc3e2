"""Policy request validation: every bad input names its field; seeds derive deterministically."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument
from services.common.seeds import splitmix64
from services.gen.ttc.v1 import common_pb2, policy_pb2
from services.policy.validation import (
    check_context,
    check_score,
    derive_seeds,
    resolve_model,
    to_prompt,
    to_sampling,
)


def sampling(**kw: object) -> policy_pb2.SamplingParams:
    base: dict[str, object] = {"n": 1, "max_tokens": 16}
    base.update(kw)
    return policy_pb2.SamplingParams(**base)  # type: ignore[arg-type]


def field_of(fn: object, *args: object) -> str:
    with pytest.raises(InvalidArgument) as err:
        fn(*args)  # type: ignore[operator]
    return err.value.field


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"n": 0}, "sampling.n"),
        ({"n": 65}, "sampling.n"),
        ({"temperature": -0.1}, "sampling.temperature"),
        ({"temperature": 2.5}, "sampling.temperature"),
        ({"temperature": float("nan")}, "sampling.temperature"),
        ({"top_p": 1.5}, "sampling.top_p"),
        ({"top_p": -0.5}, "sampling.top_p"),
        ({"max_tokens": 0}, "sampling.max_tokens"),
        ({"top_logprobs": 21}, "sampling.top_logprobs"),
        ({"n": 2, "seeds": [1]}, "sampling.seeds"),
        ({"n": 2, "seeds": [1, 2, 3]}, "sampling.seeds"),
        ({"stop": [""]}, "sampling.stop"),
        ({"stop": [str(i) for i in range(17)]}, "sampling.stop"),
        ({"presence_penalty": 2.5}, "sampling.presence_penalty"),
        ({"presence_penalty": float("nan")}, "sampling.presence_penalty"),
        ({"frequency_penalty": -2.5}, "sampling.frequency_penalty"),
        ({"frequency_penalty": float("inf")}, "sampling.frequency_penalty"),
    ],
)
def test_bad_sampling_names_field(params: dict[str, object], field: str) -> None:
    assert field_of(to_sampling, sampling(**params), 64) == field


def test_max_tokens_limit_setting() -> None:
    assert field_of(to_sampling, sampling(max_tokens=200), 64, 100) == "sampling.max_tokens"
    assert to_sampling(sampling(max_tokens=100), 64, 100).max_tokens == 100


def test_good_sampling_converts() -> None:
    s = to_sampling(sampling(n=3, temperature=0.7, top_p=0.0, stop=["\n"], top_logprobs=2), 64)
    assert s.n == 3 and len(s.seeds) == 3
    assert s.top_p == 1.0  # proto3 zero means "unset" = 1
    assert s.logprobs  # top_logprobs implies logprobs
    assert s.stop == ("\n",)


def test_penalties_are_carried() -> None:
    s = to_sampling(sampling(presence_penalty=-2.0, frequency_penalty=1.5), 64)
    assert (s.presence_penalty, s.frequency_penalty) == (-2.0, 1.5)
    unset = to_sampling(sampling(), 64)
    assert (unset.presence_penalty, unset.frequency_penalty) == (0.0, 0.0)


def test_explicit_seeds_are_kept() -> None:
    assert to_sampling(sampling(n=2, seeds=[7, 9]), 64).seeds == (7, 9)


def test_base_seed_derivation_is_deterministic_and_distinct() -> None:
    a = to_sampling(sampling(n=8, base_seed=42), 64).seeds
    b = to_sampling(sampling(n=8, base_seed=42), 64).seeds
    c = to_sampling(sampling(n=8, base_seed=43), 64).seeds
    assert a == b
    assert a != c
    assert len(set(a)) == 8
    assert all(0 <= s < 2**64 for s in a)


def test_prefix_of_derived_seeds_is_stable() -> None:
    """Asking for more candidates with the same base seed keeps the first ones' seeds."""
    assert derive_seeds(4, 5) == derive_seeds(8, 5)[:4]


def test_random_base_seeds_differ() -> None:
    assert derive_seeds(2, None) != derive_seeds(2, None)


def test_splitmix64_known_value() -> None:
    # first output of SplitMix64 seeded with 0 (reference value from the published algorithm)
    assert splitmix64(0) == 0xE220A8397B1DCDAF


def msgs(*pairs: tuple[str, str]) -> list[common_pb2.ChatMessage]:
    return [common_pb2.ChatMessage(role=r, content=c) for r, c in pairs]


@pytest.mark.parametrize(
    ("prompt", "field"),
    [
        (policy_pb2.PromptInput(), "input"),
        (policy_pb2.PromptInput(prompt="   "), "input"),
        (policy_pb2.PromptInput(messages=msgs(("user", ""), ("system", " "))), "input"),
        (policy_pb2.PromptInput(messages=msgs(("user", "hi")), prompt="also"), "input"),
        (policy_pb2.PromptInput(messages=msgs(("user", "hi"), ("wizard", "x"))), "input.messages[1].role"),
    ],
)
def test_bad_prompt_names_field(prompt: policy_pb2.PromptInput, field: str) -> None:
    assert field_of(to_prompt, prompt) == field


def test_prompt_conversion_keeps_prefix() -> None:
    p = to_prompt(policy_pb2.PromptInput(messages=msgs(("user", "2+2?")), assistant_prefix="Step 1:"))
    assert p.messages[0].role == "user" and p.assistant_prefix == "Step 1:"
    assert to_prompt(policy_pb2.PromptInput(prompt="raw")).text == "raw"


def test_unknown_model_is_invalid_argument_on_model() -> None:
    assert field_of(resolve_model, "gpt-17", ["smollm2-135m"]) == "model"
    assert resolve_model("", ["smollm2-135m"]) == "smollm2-135m"
    assert resolve_model("smollm2-135m", ["smollm2-135m"]) == "smollm2-135m"


def test_context_window() -> None:
    check_context(100, 3996, 4096)
    assert field_of(check_context, 100, 3997, 4096) == "sampling.max_tokens"
    assert field_of(check_context, 4096, 1, 4096) == "input"


def test_score_checks() -> None:
    check_score(["a"], 0)
    assert field_of(check_score, [], 0) == "continuations"
    assert field_of(check_score, ["a", ""], 0) == "continuations[1]"
    assert field_of(check_score, ["a"], 21) == "top_logprobs"
