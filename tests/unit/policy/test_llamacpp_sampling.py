"""Token sampling, log-softmax and stop-string scanning of the llama.cpp decode loop."""

from __future__ import annotations

import numpy as np

from services.policy.engines.llamacpp_sampling import StopScanner, TokenSampler, log_softmax, top_k_ids


def logits(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_log_softmax_normalizes() -> None:
    lp = log_softmax(logits([1.0, 2.0, 3.0, 1000.0]))
    assert np.isclose(np.exp(lp).sum(), 1.0)
    assert lp[3] > -1e-6 and lp[0] < -900


def test_top_k_ids_sorted() -> None:
    assert list(top_k_ids(np.array([0.1, 0.5, 0.3, 0.9]), 3)) == [3, 1, 2]
    assert list(top_k_ids(np.array([0.1]), 5)) == [0]


def test_greedy_picks_argmax() -> None:
    assert TokenSampler(seed=1, temperature=0.0).sample(logits([0.0, 5.0, 1.0])) == 1


def test_same_seed_same_tokens_different_seed_differs() -> None:
    rng = np.random.default_rng(0)
    steps = [rng.normal(size=1000).astype(np.float32) for _ in range(50)]

    def draw(seed: int, top_p: float) -> list[int]:
        s = TokenSampler(seed=seed, temperature=1.0, top_p=top_p)
        return [s.sample(x) for x in steps]

    for top_p in (1.0, 0.9):
        assert draw(3, top_p) == draw(3, top_p)
        assert draw(3, top_p) != draw(4, top_p)


def test_top_p_restricts_to_nucleus() -> None:
    # token 0 holds ~88% of the mass: with top_p 0.5 only it can be drawn
    x = logits([5.0, 3.0, 0.0, 0.0])
    s = TokenSampler(seed=0, temperature=1.0, top_p=0.5)
    assert {s.sample(x) for _ in range(200)} == {0}
    s = TokenSampler(seed=0, temperature=1.0, top_p=1.0)
    assert len({s.sample(x) for _ in range(400)}) > 1


def test_top_p_falls_back_beyond_window() -> None:
    # a flat distribution over more tokens than the partial-sort window still samples widely
    x = np.zeros(5000, dtype=np.float32)
    s = TokenSampler(seed=0, temperature=1.0, top_p=0.99)
    drawn = {s.sample(x) for _ in range(300)}
    assert len(drawn) > 250


def test_sampling_follows_distribution() -> None:
    x = logits([np.log(0.7), np.log(0.3)])
    s = TokenSampler(seed=123, temperature=1.0)
    draws = [s.sample(x) for _ in range(4000)]
    assert 0.66 < draws.count(0) / 4000 < 0.74


def test_stop_scanner_cuts_at_stop_and_never_streams_it() -> None:
    sc = StopScanner(("###",))
    streamed = ""
    for piece in [b"ab", b"c#", b"#", b"#tail"]:
        stopped = sc.feed(piece)
        streamed += sc.pending(final=stopped)
        if stopped:
            break
    assert sc.stopped and sc.text == "abc"
    assert streamed == "abc"


def test_stop_scanner_earliest_stop_wins() -> None:
    sc = StopScanner(("\n\n", "END"))
    assert sc.feed(b"xEND and\n\n")
    assert sc.text == "x"


def test_stop_scanner_multibyte_split_across_tokens() -> None:
    sc = StopScanner(())
    data = "héllo".encode()
    assert not sc.feed(data[:2])  # 'h' + first byte of 'é'
    assert sc.pending() == "h"
    sc.feed(data[2:])
    sc.finish()
    assert sc.text == "héllo"
    assert sc.pending(final=True) == "éllo"


def test_stop_scanner_holds_back_possible_stop_prefix() -> None:
    sc = StopScanner(("STOP",))
    sc.feed(b"abcST")
    assert sc.pending() == "ab"  # "cST" could still become "STOP"... only 3 chars held
    sc.feed(b"ay")
    sc.finish()
    assert sc.pending(final=True) == "cSTay"
    assert sc.text == "abcSTay"
