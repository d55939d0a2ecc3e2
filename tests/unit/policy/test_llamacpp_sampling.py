"""Log-softmax and stop-string scanning of the llama.cpp decode loop."""

from __future__ import annotations

import numpy as np

from services.policy.engines.llamacpp.sampling import StopScanner, log_softmax, top_k_ids


def logits(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_log_softmax_normalizes() -> None:
    lp = log_softmax(logits([1.0, 2.0, 3.0, 1000.0]))
    assert np.isclose(np.exp(lp).sum(), 1.0)
    assert lp[3] > -1e-6 and lp[0] < -900


def test_log_softmax_matches_exact_on_a_large_vocabulary() -> None:
    x = (np.random.default_rng(1).normal(size=150_000) * 4).astype(np.float32)
    exact = x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum())
    assert np.allclose(log_softmax(x), exact, atol=1e-7)


def test_top_k_ids_sorted() -> None:
    assert list(top_k_ids(np.array([0.1, 0.5, 0.3, 0.9]), 3)) == [3, 1, 2]
    assert list(top_k_ids(np.array([0.1]), 5)) == [0]


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
