"""llama.cpp sampler chains for one candidate, with an optional grammar (worker thread).

Each candidate owns a chain: the grammar first (it masks the tokens the grammar forbids, so
every candidate is valid by construction), then OpenAI's presence and frequency penalties over
the candidate's own generated tokens (when either is set), temperature, top-p and a draw from
the candidate's own seeded generator (greedy at temperature 0). A lazy grammar (tool_choice
"auto") stays off until its trigger pattern appears in the text. Log-probabilities are read
from the model's logits, not from the chain, so they are the model's own under a grammar too.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp
import numpy as np

from services.common.errors import InvalidArgument
from services.policy.engines.base import Sampling
from services.policy.engines.tool_prompt import GrammarPlan

#: numpy view of llama_token_data
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


def grammar_sampler(vocab: Any, plan: GrammarPlan) -> Any:
    """A grammar sampler for ``plan``; ``InvalidArgument`` when llama.cpp rejects the grammar."""
    gbnf = plan.gbnf.encode()
    if plan.trigger:
        patterns = (ctypes.c_char_p * 1)(plan.trigger.encode())
        sampler = llama_cpp.llama_sampler_init_grammar_lazy_patterns(vocab, gbnf, b"root", patterns, 1, None, 0)
    else:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf, b"root")
    if not sampler:
        raise InvalidArgument("llama.cpp could not compile the grammar for this schema", field="sampling.constraint")
    return sampler


def check_grammar(vocab: Any, plan: GrammarPlan | None) -> None:
    """Compile ``plan`` once (and drop it), so a grammar llama.cpp refuses fails the request
    before it queues for the context."""
    if plan is not None:
        llama_cpp.llama_sampler_free(grammar_sampler(vocab, plan))


def _chain(seed: int, sampling: Sampling, n_vocab: int) -> Any:
    """Penalties, temperature, top-p and a seeded draw (greedy at temperature 0). llama.cpp
    seeds are 32 bits; the 64-bit seed is folded, avoiding the value that means "random"."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if sampling.presence_penalty or sampling.frequency_penalty:
        # OpenAI's definition, as llama.cpp applies it: a token's logit drops by
        # presence_penalty once it appeared and by frequency_penalty per appearance, counted
        # over every token this candidate generated (the chain accepts each drawn token; the
        # prompt's never are). No repetition penalty (1.0).
        penalties = llama_cpp.llama_sampler_init_penalties(
            n_vocab, sampling.max_tokens, 1.0, sampling.frequency_penalty, sampling.presence_penalty
        )
        llama_cpp.llama_sampler_chain_add(chain, penalties)
    if sampling.temperature <= 0.0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    seed32 = (seed ^ (seed >> 32)) & 0xFFFFFFFF
    if seed32 == llama_cpp.LLAMA_DEFAULT_SEED:
        seed32 -= 1
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
    if sampling.top_p < 1.0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed32))
    return chain


class CandidateSampler:
    """One candidate's sampler: its chain and, optionally, a grammar.

    Masking a 150k vocabulary with a grammar every step costs about as much as the decode step
    (half the speed: benchmarks/llamacpp_grammar_bench.py), so the token is drawn without the
    grammar first and only checked against it; only when the grammar rejects it is the full
    distribution masked and the token drawn again (llama.cpp's own common sampler does the
    same). Either way the token obeys the grammar.
    """

    def __init__(self, vocab: Any, seed: int, sampling: Sampling, plan: GrammarPlan | None, n_vocab: int) -> None:
        self.chain = _chain(seed, sampling, n_vocab)
        self.grammar = None
        self.n_vocab = n_vocab
        self.resampled = 0
        if plan is not None:
            try:
                self.grammar = grammar_sampler(vocab, plan)
            except InvalidArgument:
                self.free()
                raise
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_arr = llama_cpp.llama_token_data_array(self._one, 1, -1, False)

    def sample(self, ctx: Any, idx: int) -> int:
        token = int(llama_cpp.llama_sampler_sample(self.chain, ctx, idx))
        if self.grammar is None:
            return token
        entry = self._one[0]
        entry.id, entry.logit, entry.p = token, 1.0, 0.0  # type: ignore[assignment]
        self._one_arr.size, self._one_arr.selected = 1, -1
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._one_arr))
        if not math.isfinite(self._one[0].logit):
            token = self._resample(ctx, idx)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        return token

    def _resample(self, ctx: Any, idx: int) -> int:
        """The grammar rejected the free draw: mask every token, then draw with the chain."""
        self.resampled += 1
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, idx), shape=(self.n_vocab,))
        data = np.empty(self.n_vocab, dtype=_TOKEN_DATA)
        data["id"] = np.arange(self.n_vocab, dtype=np.int32)
        data["logit"] = logits
        data["p"] = 0.0
        arr = llama_cpp.llama_token_data_array(
            data.ctypes.data_as(llama_cpp.llama_token_data_p), self.n_vocab, -1, False
        )
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(arr))
        llama_cpp.llama_sampler_apply(self.chain, ctypes.byref(arr))
        token = int(data["id"][arr.selected])
        llama_cpp.llama_sampler_accept(self.chain, token)
        return token

    def free(self) -> None:
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
