"""Deltas ready together leave as one delta per candidate, with nothing lost or reordered."""

from __future__ import annotations

import asyncio
import threading

from services.common.tool_calls import ToolCall
from services.policy.engines.base import StreamDelta, TokenLogprob
from services.policy.engines.stream_coalesce import DeltaMailbox, coalesce


def test_each_candidate_keeps_its_text_in_order_and_its_last_count() -> None:
    steps = [
        StreamDelta(0, "Hel", None, 1),
        StreamDelta(1, "Wo", None, 1),
        StreamDelta(0, "lo", None, 2),
        StreamDelta(1, "rld", "stop", 2),
        StreamDelta(0, "!", "length", 3),
    ]
    merged = coalesce(steps)
    assert [(d.index, d.text, d.finish_reason, d.completion_tokens) for d in merged] == [
        (0, "Hello!", "length", 3),
        (1, "World", "stop", 2),
    ]


def test_tool_calls_and_an_empty_final_delta_survive() -> None:
    call = ToolCall(id="call_1", name="f", arguments="{}")
    merged = coalesce([StreamDelta(2, "x", None, 1), StreamDelta(2, "", "stop", 1, [call])])
    assert merged == [StreamDelta(2, "x", "stop", 1, [call])]


def test_coalescing_does_not_change_the_inputs() -> None:
    first = StreamDelta(0, "a", None, 1)
    coalesce([first, StreamDelta(0, "b", None, 2)])
    assert first == StreamDelta(0, "a", None, 1)


def _lp(token: str, token_id: int) -> TokenLogprob:
    return TokenLogprob(token, token_id, -0.1 * token_id, [(token, token_id, -0.1 * token_id)])


def test_each_candidate_keeps_its_tokens_logprobs_in_order() -> None:
    a, b, c, d, e = _lp("He", 1), _lp("l", 2), _lp("lo", 3), _lp("Wo", 4), _lp("", 5)
    first = StreamDelta(0, "He", None, 1, logprobs=[a])
    merged = coalesce(
        [
            first,
            StreamDelta(1, "Wo", None, 1, logprobs=[d]),
            StreamDelta(0, "", None, 2, logprobs=[]),  # a token whose text is held back
            StreamDelta(0, "llo", None, 3, logprobs=[b, c]),
            StreamDelta(1, "", "stop", 2, logprobs=[e]),
        ]
    )
    assert [(m.index, m.text, [t.token for t in m.logprobs]) for m in merged] == [
        (0, "Hello", ["He", "l", "lo"]),
        (1, "Wo", ["Wo", ""]),
    ]
    assert merged[0].logprobs == [a, b, c] and merged[1].finish_reason == "stop"
    assert first.logprobs == [a]  # the input delta's list is not the merged one


def test_a_thread_emitting_many_deltas_wakes_the_loop_once_per_batch_and_loses_none() -> None:
    async def run() -> tuple[list[StreamDelta], int]:
        loop = asyncio.get_running_loop()
        got: list[list[StreamDelta]] = []
        done = asyncio.Event()
        mailbox = DeltaMailbox(loop.call_soon_threadsafe, got.append)

        def decode() -> None:
            for step in range(200):
                for index in range(4):
                    mailbox.put(StreamDelta(index, f"{step},", None, step + 1))
            loop.call_soon_threadsafe(done.set)  # scheduled after the last hand-over

        threading.Thread(target=decode).start()
        await done.wait()
        return [d for batch in got for d in batch], len(got)

    deltas, _ = asyncio.run(run())
    assert len(deltas) == 800
    for index in range(4):
        texts = [d.text for d in deltas if d.index == index]
        assert "".join(texts) == "".join(f"{s}," for s in range(200))


def test_deltas_put_before_the_loop_runs_are_handed_over_in_one_batch() -> None:
    async def run() -> list[list[StreamDelta]]:
        loop = asyncio.get_running_loop()
        got: list[list[StreamDelta]] = []
        mailbox = DeltaMailbox(loop.call_soon_threadsafe, got.append)
        for index in range(5):
            mailbox.put(StreamDelta(index, "t", None, 1))
        await asyncio.sleep(0)
        mailbox.put(StreamDelta(0, "u", None, 2))
        await asyncio.sleep(0)
        return got

    assert [len(batch) for batch in asyncio.run(run())] == [5, 1]
