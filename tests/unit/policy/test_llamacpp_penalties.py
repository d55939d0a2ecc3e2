"""OpenAI's penalties reach llama.cpp's penalties sampler as its own arguments (frequency, then
presence), and no penalties sampler is added when neither is set. The e2e test shows a
frequency penalty changing greedy output; a presence penalty of 2 is too weak to turn a
counting sequence (its margins are larger), so its wiring is checked here."""

from __future__ import annotations

from typing import Any

import llama_cpp
import pytest

from services.policy.engines.base import Sampling
from services.policy.engines.llamacpp import grammar


@pytest.mark.parametrize(("presence", "frequency"), [(2.0, 0.0), (0.0, -1.5), (0.5, 1.0)])
def test_each_penalty_is_passed_in_its_own_place(
    monkeypatch: pytest.MonkeyPatch, presence: float, frequency: float
) -> None:
    calls: list[tuple[Any, ...]] = []
    real = llama_cpp.llama_sampler_init_penalties

    def record(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(llama_cpp, "llama_sampler_init_penalties", record)
    sampling = Sampling(n=1, seeds=(7,), max_tokens=32, presence_penalty=presence, frequency_penalty=frequency)
    chain = grammar._chain(7, sampling, 1000)
    try:
        assert len(calls) == 1
        n_vocab, last_n, repeat, freq, present = calls[0]
        assert (n_vocab, last_n, repeat) == (1000, 32, 1.0)
        assert freq == pytest.approx(frequency) and present == pytest.approx(presence)
        assert llama_cpp.llama_sampler_chain_n(chain) == 2  # penalties, then the greedy draw
    finally:
        llama_cpp.llama_sampler_free(chain)


def test_no_penalties_sampler_without_penalties(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_cpp, "llama_sampler_init_penalties", lambda *a: pytest.fail("added"))
    chain = grammar._chain(7, Sampling(n=1, seeds=(7,), max_tokens=32), 1000)
    try:
        assert llama_cpp.llama_sampler_chain_n(chain) == 1
    finally:
        llama_cpp.llama_sampler_free(chain)
