"""A stream that asked for logprobs carries each token's in the delta (and chunk) that carries
its text, and a candidate's deltas together give what the unary call returns.

- llama.cpp: the generation task's step (``GenTask._step``) over a scripted vocabulary, with
  text held back by a stop string that may still match, a character split across two tokens,
  and a stop string that cuts the text;
- vLLM: ``generate_stream`` and ``generate`` over the same scripted engine outputs (a token
  whose text the detokenizer holds back);
- the remote engine: OpenAI stream events with ``choices[].logprobs``, and a server that
  streams text without them (refused: FAILED_PRECONDITION naming ``sampling.logprobs``);
- the servicer: deltas to ``GenerateChunk.logprobs`` over real gRPC, those of held-back
  tool-call syntax going out with the candidate's next chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from services.common.errors import FailedPrecondition
from services.gen.ttc.v1 import common_pb2, policy_pb2
from services.policy.engines.base import Message, Prompt, Sampling, Spent, StreamDelta, TokenLogprob
from services.policy.engines.llamacpp.tasks import GenTask
from services.policy.engines.openai_remote import OpenAIRemoteEngine
from services.policy.servicer import logprobs_pb
from tests.unit.policy.fake_engine import StepEngine, request, serve

EOG = 0


class Vocab:
    """Token ``i`` reads ``pieces[i]``; its logprob is ``lp[i]``; token 0 ends generation."""

    def __init__(self, pieces: dict[int, bytes]) -> None:
        self.pieces = pieces

    def piece(self, token: int) -> bytes:
        return self.pieces[token]

    def token_logprob(self, lp: npt.NDArray[np.float64], token: int, top: int) -> TokenLogprob:
        text = self.pieces[token].decode("utf-8", errors="replace")
        return TokenLogprob(text, token, float(lp[token]), [(text, token, float(lp[token]))][:top])

    def is_eog(self, token: int) -> bool:
        return token == EOG


def decode(pieces: dict[int, bytes], tokens: list[int], stop: tuple[str, ...] = ()) -> tuple[list[StreamDelta], Any]:
    """Step a one-candidate task through ``tokens``; returns its deltas and the candidate."""
    deltas: list[StreamDelta] = []
    loop = asyncio.new_event_loop()
    try:
        sampling = Sampling(n=1, seeds=(1,), max_tokens=len(tokens), stop=stop, logprobs=True, top_logprobs=1)
        task = GenTask([1, 2], sampling, lambda seed: None, loop, deltas.append)  # type: ignore[arg-type,return-value]
        [c] = task.cands
        lp = -np.arange(1, len(pieces) + 1, dtype=np.float64) / 10
        for token in tokens:
            c.token = token
            task._step(c, lp, Vocab(pieces))
            if c.finish is not None:
                break
    finally:
        loop.close()
    return deltas, c


def ids(tokens: list[TokenLogprob]) -> list[int]:
    return [t.token_id for t in tokens]


def test_llamacpp_each_delta_carries_the_tokens_of_its_text_and_together_the_unary_ones() -> None:
    pieces = {EOG: b"", 1: b"Hel", 2: b"lo", 3: b" wor", 4: b"ld"}
    deltas, c = decode(pieces, [1, 2, 3, 4, EOG])
    assert [(d.text, ids(d.logprobs)) for d in deltas] == [
        ("Hel", [1]),
        ("lo", [2]),
        (" wor", [3]),
        ("ld", [4]),
        ("", [0]),
    ]
    assert [t for d in deltas for t in d.logprobs] == c.logprobs  # what generate() returns
    assert deltas[-1].finish_reason == "stop"


def test_llamacpp_held_back_text_keeps_its_tokens_logprobs_until_it_goes_out() -> None:
    # "zz" may start at the last character: it is held back, and so is the token ending there
    pieces = {EOG: b"", 1: b"ab", 2: b"c", 3: b"de"}
    deltas, c = decode(pieces, [1, 2, 3, EOG], stop=("zz",))
    assert [(d.text, ids(d.logprobs)) for d in deltas] == [("a", []), ("b", [1]), ("cd", [2]), ("e", [3, 0])]
    assert [t for d in deltas for t in d.logprobs] == c.logprobs


def test_llamacpp_a_character_split_across_tokens_goes_out_with_both() -> None:
    pieces = {EOG: b"", 1: b"caf", 2: "é".encode()[:1], 3: "é".encode()[1:] + b"!"}
    deltas, c = decode(pieces, [1, 2, 3, EOG])
    assert [(d.text, ids(d.logprobs)) for d in deltas] == [("caf", [1]), ("é!", [2, 3]), ("", [0])]
    assert len(c.logprobs) == 4


def test_llamacpp_a_stop_string_cuts_the_text_and_its_final_delta_carries_every_token_left() -> None:
    pieces = {EOG: b"", 1: b"ab", 2: b"cST", 3: b"OPx"}
    deltas, c = decode(pieces, [1, 2, 3], stop=("STOP",))
    assert "".join(d.text for d in deltas) == "abc"
    assert ids([t for d in deltas for t in d.logprobs]) == [1, 2, 3] == ids(c.logprobs)
    assert deltas[-1].finish_reason == "stop" and ids(deltas[-1].logprobs)[-1] == 3


# -- vLLM ---------------------------------------------------------------------------------


def _vllm_outputs() -> list[Any]:
    """Engine deltas: "Hel", a token whose partial character is held (no text), the rest."""

    def out(text: str, tokens: list[int], finish: str | None = None) -> Any:
        positions = [{t: SimpleNamespace(logprob=-0.1 * t, rank=1, decoded_token=f"<{t}>")} for t in tokens]
        choice = SimpleNamespace(index=0, text=text, token_ids=tokens, logprobs=positions, finish_reason=finish)
        return SimpleNamespace(outputs=[choice], num_cached_tokens=0)

    return [out("Hel", [1]), out("", [2]), out("é!", [3]), out("", [4], "stop")]


def _vllm_engine() -> Any:
    vllm_engine = pytest.importorskip("services.policy.engines.vllm_engine")
    engine = vllm_engine.VllmEngine.__new__(vllm_engine.VllmEngine)

    async def run(ids: list[int], plan: object) -> AsyncIterator[tuple[int, Any]]:
        for out in _vllm_outputs():
            yield 0, out

    engine._tokenizer = SimpleNamespace(decode=lambda ids: "?")
    engine._token_ids = lambda prompt: [7, 8, 9]
    engine._plan = lambda sampling, request_id, delta, structured=None: []
    engine.structured_outputs = lambda prompt, sampling: None
    engine._run = run
    return engine


async def test_vllm_a_streams_logprobs_are_the_unary_ones_each_with_its_text() -> None:
    engine = _vllm_engine()
    prompt, sampling = Prompt(text="x"), Sampling(n=1, seeds=(1,), max_tokens=8, logprobs=True, top_logprobs=1)
    deltas = [d async for d in engine.generate_stream(prompt, sampling, "r")]
    unary = (await engine.generate(prompt, sampling, "r")).completions[0]
    assert [(d.text, ids(d.logprobs)) for d in deltas] == [("Hel", [1]), ("é!", [2, 3]), ("", [4])]
    assert [t for d in deltas for t in d.logprobs] == unary.logprobs and len(unary.logprobs) == 4
    plain = [d async for d in engine.generate_stream(prompt, Sampling(n=1, seeds=(1,), max_tokens=8), "r")]
    assert all(not d.logprobs for d in plain)  # none asked, none computed


# -- the remote engine --------------------------------------------------------------------


def _remote(events: list[dict[str, Any]]) -> OpenAIRemoteEngine:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["stream"] and body["logprobs"] is True and body["top_logprobs"] == 1
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})

    return OpenAIRemoteEngine(httpx.AsyncClient(transport=httpx.MockTransport(answer)), "http://remote/v1", "m", 4096)


def _event(text: str, tokens: list[str], finish: str | None = None) -> dict[str, Any]:
    content = [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5}]} for t in tokens]
    choice = {"index": 0, "delta": {"content": text}, "logprobs": {"content": content}, "finish_reason": finish}
    return {"choices": [choice]}


async def _remote_deltas(engine: OpenAIRemoteEngine, spent: Spent) -> list[StreamDelta]:
    sampling = Sampling(n=1, seeds=(1,), max_tokens=8, temperature=0.7, logprobs=True, top_logprobs=1)
    prompt = Prompt(messages=(Message("user", "hi"),))
    return [d async for d in engine.generate_stream(prompt, sampling, "r", spent)]


async def test_remote_stream_events_logprobs_go_with_the_next_text_and_count_the_tokens() -> None:
    spent = Spent()
    events = [_event("Hel", ["Hel"]), _event("", ["\\xc3"]), _event("é lo", ["\\xa9", " lo"]), _event("", [], "stop")]
    deltas = await _remote_deltas(_remote(events), spent)
    assert [(d.text, [t.token for t in d.logprobs]) for d in deltas] == [
        ("Hel", ["Hel"]),
        ("é lo", ["\\xc3", "\\xa9", " lo"]),
        ("", []),
    ]
    assert deltas[-1].completion_tokens == spent.completion_tokens == 4  # one per logprob, not per event
    assert deltas[0].logprobs[0].top == [("Hel", -1, -0.5)]


async def test_remote_server_that_streams_no_logprobs_is_refused_not_dropped() -> None:
    events = [{"choices": [{"index": 0, "delta": {"content": "Hel"}}]}]
    with pytest.raises(FailedPrecondition) as err:
        await _remote_deltas(_remote(events), Spent())
    assert err.value.field == "sampling.logprobs" and "streams no per-token logprobs" in err.value.message


# -- the servicer -------------------------------------------------------------------------


def lp(token: str, token_id: int) -> TokenLogprob:
    return TokenLogprob(token, token_id, -0.25 * token_id, [(token, token_id, -0.25 * token_id), ("x", 99, -9.0)])


class ScriptedStream(StepEngine):
    """Streams ``deltas`` as given (logprobs and all)."""

    def __init__(self, deltas: list[StreamDelta]) -> None:
        super().__init__()
        self.deltas = deltas

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        for delta in self.deltas:
            yield delta


def logprob_request(tools: bool = False) -> policy_pb2.GenerateRequest:
    req = request(max_tokens=8)
    req.sampling.logprobs, req.sampling.top_logprobs = True, 2
    if tools:
        params = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}})
        weather = common_pb2.Tool(name="get_weather", description="weather", parameters_json=params)
        req.input.tools.CopyFrom(common_pb2.ToolSpec(tools=[weather], choice="auto"))
    return req


async def test_servicer_sends_each_deltas_logprobs_in_its_chunk_as_the_unary_reply_does() -> None:
    a, b, c = lp("Hi", 1), lp(" there", 2), lp("", 3)
    deltas = [StreamDelta(0, "Hi", None, 1, logprobs=[a]), StreamDelta(0, " there", "stop", 3, logprobs=[b, c])]
    async with serve(ScriptedStream(deltas)) as (_, stub):
        chunks = [chunk async for chunk in stub.GenerateStream(logprob_request(), timeout=30)]
    assert [(ch.text_delta, list(ch.logprobs)) for ch in chunks[:-1]] == [
        ("Hi", logprobs_pb([a])),
        (" there", logprobs_pb([b, c])),
    ]
    assert chunks[0].logprobs[0].top_logprobs[1].token_id == 99
    assert not chunks[-1].logprobs and chunks[-1].HasField("usage")


async def test_servicer_held_back_tool_call_syntax_sends_its_logprobs_with_the_next_chunk() -> None:
    tokens = [lp("Sure", 1), lp("<tool_call>", 2), lp('{"name": "get_weather", "arguments": {}}', 3), lp("", 4)]
    deltas = [
        StreamDelta(0, "Sure", None, 1, logprobs=tokens[:1]),
        StreamDelta(0, "<tool_call>", None, 2, logprobs=tokens[1:2]),
        StreamDelta(0, '\n{"name": "get_weather", "arguments": {}}\n', None, 3, logprobs=tokens[2:3]),
        StreamDelta(0, "</tool_call>", "stop", 4, logprobs=tokens[3:]),
    ]
    async with serve(ScriptedStream(deltas)) as (_, stub):
        chunks = [chunk async for chunk in stub.GenerateStream(logprob_request(tools=True), timeout=30)]
    *sent, final = chunks
    assert [ch.text_delta for ch in sent] == ["Sure", ""]  # the call syntax is held back ...
    assert [t.token_id for ch in sent for t in ch.logprobs] == [1, 2, 3, 4]  # ... and its tokens not lost
    assert [t.token_id for t in sent[-1].logprobs] == [2, 3, 4] and sent[-1].tool_calls[0].name == "get_weather"
    assert final.usage.completion_tokens == 4
