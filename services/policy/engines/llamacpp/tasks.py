"""The requests the llama.cpp batch loop serves: a generation (n candidates of one prompt) and
a scoring (log-probabilities of continuations after one prompt).

Each request first feeds its prompt onto its own sequence (after copying the longest prefix
some other sequence already holds) in chunks; its last prompt token always goes in a later
batch than the rest of its prompt, so its logits (every candidate's first draw) do not depend
on how much of the prompt was cached. A generation then copies the prompt's cells into one
sequence per candidate and advances every live candidate one token per batch, candidates that
do not fit in the cache at once following in waves. A scoring feeds its continuations one
after another on a copy of the prompt, with logits at every position.

These objects run only on the loop's thread; ``host`` is the loop (llama.cpp calls, slots),
typed by what they use of it (``protocol.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from services.policy.engines.base import (
    Completion,
    ContinuationScore,
    FinishReason,
    Generation,
    Sampling,
    Spent,
    StreamDelta,
    TokenLogprob,
)
from services.policy.engines.llamacpp.protocol import Emit, Entry, Host, Sampler, Vocab
from services.policy.engines.llamacpp.sampling import Logits, StopScanner, log_softmax
from services.policy.engines.llamacpp.slots import wave_cap


@dataclass
class Candidate:
    index: int
    seed: int
    scanner: StopScanner
    sampler: Sampler | None = None
    seq: int = -1
    #: last sampled token, and its entry in the last decoded batch
    token: int = -1
    out: int = -1
    n_tokens: int = 0
    finish: FinishReason | None = None
    logprobs: list[TokenLogprob] = field(default_factory=list)
    #: where each logprob's token ends in the scanner's text, and how many of them were streamed
    lp_ends: list[int] = field(default_factory=list)
    lp_sent: int = 0

    def streamed_logprobs(self, final: bool) -> list[TokenLogprob]:
        """The logprobs not streamed yet of the tokens whose text has now been streamed (the
        scanner's ``emitted``), or of every token left on the candidate's final delta."""
        n = len(self.logprobs) if final else bisect.bisect_right(self.lp_ends, self.scanner.emitted, lo=self.lp_sent)
        out, self.lp_sent = self.logprobs[self.lp_sent : n], max(self.lp_sent, n)
        return out


class Task:
    """One request in the loop: its prompt on sequence ``seq``, a cancel flag, the future
    the caller awaits (resolved on the caller's event loop), and ``spent``: the prompt tokens
    on its sequence and the tokens decoded, written here as they happen (the caller reads it
    once the future is done, also when the request was cancelled)."""

    #: KV cells reserved at admission beyond the prompt's
    first_cells = 0

    def __init__(self, tokens: list[int], loop: asyncio.AbstractEventLoop, spent: Spent | None = None) -> None:
        self.tokens = tokens
        self.loop = loop
        self.spent = Spent() if spent is None else spent
        self.future: asyncio.Future[Any] = loop.create_future()
        self.cancel = threading.Event()
        self.seq = -1
        #: a second sequence id reserved at admission with ``first_cells`` (-1 once used)
        self.spare_seq = -1
        self.fed = 0
        self.cached = 0
        #: batch index of the prompt's last token in the last decode, -1 when not there
        self.prompt_out = -1
        self.prompt_logits: Logits | None = None
        self.done = False

    @property
    def n_prompt(self) -> int:
        return len(self.tokens)

    def admitted(self, cached: int) -> None:
        """The loop started this request with ``cached`` prompt tokens copied from its cache."""
        self.fed = self.cached = cached
        self.spent.prompt_tokens = self.spent.cached_tokens = cached

    def feed(self, host: Host, entries: list[Entry], budget: int) -> int:
        """Add up to ``budget`` prompt tokens to the batch; returns how many were added."""
        last = self.n_prompt - 1
        added = 0
        if self.fed < last:
            end = min(self.fed + budget, last)
            entries.extend((self.tokens[p], p, self.seq, False) for p in range(self.fed, end))
            added, self.fed = end - self.fed, end
        elif self.fed == last and budget > 0:
            self.prompt_out = len(entries)
            entries.append((self.tokens[last], last, self.seq, True))
            added, self.fed = 1, self.n_prompt
        self.spent.prompt_tokens = self.fed
        return added

    @property
    def prefilling(self) -> bool:
        return self.fed < self.n_prompt

    def resolve(self, result: Any) -> None:
        """Hand ``result`` (or an exception) to the caller's event loop."""
        self.done = True

        def settle() -> None:
            if self.future.done():
                return
            if isinstance(result, BaseException):
                self.future.set_exception(result)
            else:
                self.future.set_result(result)

        self.loop.call_soon_threadsafe(settle)

    # overridden
    def collect(self, host: Host) -> None:
        """Read what the last decode produced for this request (before the next decode)."""

    def advance(self, host: Host, entries: list[Entry]) -> None:
        """Add this request's decode tokens to the next batch; finish it when it is done."""

    def abort(self, host: Host) -> None:
        """Stop: free the request's sequences and resolve it as aborted."""

    def used_cells(self) -> int:
        return self.fed


class GenTask(Task):
    """``sampling.n`` candidates of one prompt; ``new_sampler(seed)`` builds a candidate's
    sampler (freed here)."""

    def __init__(
        self,
        tokens: list[int],
        sampling: Sampling,
        new_sampler: Callable[[int], Sampler],
        loop: asyncio.AbstractEventLoop,
        emit: Emit | None = None,
        spent: Spent | None = None,
    ) -> None:
        super().__init__(tokens, loop, spent)
        self.sampling = sampling
        self.new_sampler = new_sampler
        self.emit = emit
        self.first_cells = sampling.max_tokens  # the first candidate's cells
        self.cands = [Candidate(i, seed, StopScanner(sampling.stop)) for i, seed in enumerate(sampling.seeds)]
        self.pending: deque[Candidate] = deque()
        self.active: list[Candidate] = []
        self.prompt_lp: npt.NDArray[np.float64] | None = None
        self.decoding = False

    def collect(self, host: Host) -> None:
        if self.prompt_out < 0:
            return
        # every candidate's first token comes from the one prompt evaluation: draw them all
        # now, while its logits are still the context's latest output
        idx, self.prompt_out = self.prompt_out, -1
        self.prompt_logits = host.logits(idx).copy()
        self.prompt_lp = log_softmax(self.prompt_logits) if self.sampling.logprobs else None
        for c in self.cands:
            c.sampler = self.new_sampler(c.seed)
            c.token = c.sampler.sample(host.ctx, idx)
        self.pending.extend(self.cands)
        self.decoding = True

    def advance(self, host: Host, entries: list[Entry]) -> None:
        if not self.decoding:
            return
        s = self.sampling
        cap = wave_cap(host.kv_cells, self.n_prompt, s.max_tokens, s.n, host.n_seqs - 1)
        while self.pending and len(self.active) < cap:
            if self.spare_seq >= 0:
                seq, self.spare_seq = self.spare_seq, -1
            else:
                got = host.reserve(s.max_tokens, 1, force=host.alone(self))
                if got is None:
                    break
                seq = got[0]
            c = self.pending.popleft()
            c.seq = seq
            host.seq_cp(self.seq, c.seq)
            self.active.append(c)
        stepping: list[Candidate] = []
        for c in self.active:
            if c.n_tokens > 0 and c.sampler is not None:  # the first token came from the prompt's logits
                c.token = c.sampler.sample(host.ctx, c.out)
            lp = self.prompt_lp if c.n_tokens == 0 else None
            if s.logprobs and lp is None:
                lp = log_softmax(host.logits(c.out))
            self._step(c, lp, host.vocab)
            if c.finish is None:
                c.out = len(entries)
                entries.append((c.token, self.n_prompt + c.n_tokens - 1, c.seq, True))
                stepping.append(c)
            else:
                self._free(host, c)
        self.active = stepping
        if not self.pending and not self.active:
            self._finish(host)

    def _free(self, host: Host, c: Candidate) -> None:
        host.seq_rm(c.seq)
        host.slots.release(self.sampling.max_tokens, c.seq)
        c.seq = -1

    def _step(self, c: Candidate, lp: npt.NDArray[np.float64] | None, vocab: Vocab) -> None:
        """Take candidate ``c``'s sampled token: text, log-probability, finish reason."""
        token = c.token
        c.n_tokens += 1
        self.spent.completion_tokens += 1
        if lp is not None:
            c.logprobs.append(vocab.token_logprob(lp, token, self.sampling.top_logprobs))
        if vocab.is_eog(token):
            c.finish = "stop"
            c.scanner.finish()
        elif c.scanner.feed(vocab.piece(token)):
            c.finish = "stop"
        elif c.n_tokens >= self.sampling.max_tokens:
            c.finish = "length"
            c.scanner.finish()
        if lp is not None:
            c.lp_ends.append(c.scanner.end())
        if self.emit is not None:
            final = c.finish is not None
            text = c.scanner.pending(final=final)
            if text or final:
                self.emit(StreamDelta(c.index, text, c.finish, c.n_tokens, logprobs=c.streamed_logprobs(final)))

    def _finish(self, host: Host) -> None:
        for c in self.cands:
            if c.sampler is not None:
                c.sampler.free()
                c.sampler = None
            if c.finish is None:
                c.finish = "abort"
                c.scanner.finish()
                if self.emit is not None:
                    text = c.scanner.pending(final=True)
                    self.emit(StreamDelta(c.index, text, "abort", c.n_tokens, logprobs=c.streamed_logprobs(True)))
        completions = [
            Completion(c.index, c.scanner.text, c.finish or "abort", c.n_tokens, c.seed, c.logprobs) for c in self.cands
        ]
        host.retire(self)
        self.resolve(Generation(completions=completions, prompt_tokens=self.n_prompt, cached_tokens=self.cached))

    def abort(self, host: Host) -> None:
        for c in self.active:
            self._free(host, c)
        self.active = []
        self.pending.clear()
        if self.spare_seq >= 0:
            host.slots.release(self.sampling.max_tokens, self.spare_seq)
            self.spare_seq = -1
        self._finish(host)

    def used_cells(self) -> int:
        return self.fed + sum(c.n_tokens for c in self.active)


class ScoreTask(Task):
    """Log-probabilities of each continuation's tokens after the prompt."""

    def __init__(
        self,
        tokens: list[int],
        conts: list[list[int]],
        top: int,
        loop: asyncio.AbstractEventLoop,
        spent: Spent | None = None,
    ) -> None:
        super().__init__(tokens, loop, spent)
        self.conts = conts
        self.top = top
        self.first_cells = max(len(c) for c in conts)  # continuations run one at a time
        self.scores: list[ContinuationScore] = []
        self.cfed = 0
        self.prev: Logits | None = None
        self.out: list[TokenLogprob] = []
        #: (batch index, token) of this continuation's entries in the last decode
        self.outs: list[tuple[int, int]] = []

    def collect(self, host: Host) -> None:
        if self.prompt_out >= 0:
            self.prompt_logits = host.logits(self.prompt_out).copy()
            self.prompt_out = -1
        if not self.outs:
            return
        prev = self.prev if self.prev is not None else self.prompt_logits
        assert prev is not None
        for i, token in self.outs:
            self.out.append(host.vocab.token_logprob(log_softmax(prev), token, self.top))
            prev = host.logits(i)
        self.prev = prev.copy()
        self.outs = []
        if self.cfed == len(self.conts[len(self.scores)]):
            self.scores.append(ContinuationScore(tokens=self.out))
            self.out, self.prev, self.cfed = [], None, 0
            host.seq_rm(self.spare_seq)

    def feed(self, host: Host, entries: list[Entry], budget: int) -> int:
        if self.prefilling:
            return super().feed(host, entries, budget)
        if self.prompt_logits is None or self.outs or len(self.scores) == len(self.conts) or budget <= 0:
            return 0
        cont = self.conts[len(self.scores)]
        if self.cfed == 0:
            host.seq_cp(self.seq, self.spare_seq)
        end = min(self.cfed + budget, len(cont))
        for p in range(self.cfed, end):
            self.outs.append((len(entries), cont[p]))
            entries.append((cont[p], self.n_prompt + p, self.spare_seq, True))
        added, self.cfed = end - self.cfed, end
        self.spent.prompt_tokens += added  # a scoring's continuations are evaluated, not generated
        return added

    def advance(self, host: Host, entries: list[Entry]) -> None:
        if len(self.scores) == len(self.conts):
            self._release(host)
            host.retire(self)
            self.resolve(self.scores)

    def _release(self, host: Host) -> None:
        if self.spare_seq >= 0:
            host.seq_rm(self.spare_seq)
            host.slots.release(self.first_cells, self.spare_seq)
            self.spare_seq = -1

    def abort(self, host: Host) -> None:
        self._release(host)
        host.retire(self)
        self.resolve(self.scores)

    def used_cells(self) -> int:
        return self.fed + self.cfed
