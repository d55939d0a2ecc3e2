"""Where a search's answer goes while it is decoded: the job's answer deltas.

The context owns one :class:`AnswerStream` per job (``Context.answer``). A call hands its text
on as the answer only where one decoded candidate is the reply as it is: ``single``'s sample,
budget forcing's answer phase, a vote or judge of one sample (:meth:`AnswerStream.sole`). A
job that may render a value (``presentation.may_render``) or asked for logprobs, and a step
whose answer a later step may replace (:meth:`AnswerStream.provisional`), stream nothing as the
answer: it arrives once, chosen. The contract: docs/streaming.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from services.search.interfaces import TextSink


class AnswerStream:
    """One job's answer sink and whether any of the answer has gone to it."""

    def __init__(self, sink: TextSink | None, *, logprobs: bool = False, answers: int = 1) -> None:
        self._sink = sink
        self._logprobs = logprobs  # the job asked for the answer's token logprobs
        self._answers = answers  # answers wanted (SearchJob.answers)
        self._held = False  # inside ``provisional``
        self.streamed = False  # some of the answer went to the sink already

    def sink(self, prefix: str = "") -> TextSink | None:
        """A sink that streams a generation's text as the answer (``prefix`` first), or None
        when the job does not stream, inside ``provisional``, or when it asked for logprobs:
        the job's answer events carry text only, so an answer whose logprobs the client asked
        for goes out as one delta with the result, which carries them."""
        sink = self._sink
        if sink is None or self._held or self._logprobs:
            return None
        pending = [prefix] if prefix else []

        async def stream(delta: str) -> None:
            self.streamed = True
            text = "".join(pending) + delta
            pending.clear()
            await sink(text)

        return stream

    def sole(self, n: int) -> TextSink | None:
        """``sink()`` for a strategy's only call when it draws one candidate for one answer (a
        vote or a judge of one candidate keeps its text as it is), else None: the ``n``
        candidates stream as reasoning."""
        return self.sink() if n == 1 and self._answers == 1 else None

    @contextmanager
    def provisional(self) -> Iterator[None]:
        """A step whose answer a later step may replace (a cascade's small vote): no call in
        it streams as the answer, so what streamed is always the reply."""
        held, self._held = self._held, True
        try:
            yield
        finally:
            self._held = held
