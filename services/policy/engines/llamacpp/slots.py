"""Pure bookkeeping of the llama.cpp batch scheduler: sequence ids, KV-cell reservations and
the prompts held on sequences (prefix reuse). No llama.cpp calls here, so it is unit-tested.

Cells are reserved conservatively: a request reserves its whole prompt (even the part it
shares with another sequence through ``seq_cp``) and ``max_tokens`` for every candidate it
decodes at once, so the cells llama.cpp really holds never exceed the reservations and a
decode never finds the cache full. Prompts of finished requests stay on their sequences
(retained) until their cells or their sequence id are needed: evicted least recently used.
"""

from __future__ import annotations

from dataclasses import dataclass


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def wave_cap(kv_cells: int, n_prompt: int, max_tokens: int, n: int, seqs: int) -> int:
    """How many of a request's ``n`` candidates decode at once: as many as fit in the cache
    next to the prompt at ``max_tokens`` each, and as there are sequence ids; at least one."""
    fits = (kv_cells - n_prompt) // max(1, max_tokens)
    return max(1, min(n, seqs, fits))


@dataclass
class Held:
    """A sequence that holds a prompt: ``tokens`` are in the KV cache at positions 0..len-1."""

    seq: int
    tokens: list[int]
    #: how many of ``tokens`` are in the cache already (a live prompt fills in as it is decoded)
    ready: int = 0
    #: True while a request in flight owns it; False once retained for reuse
    live: bool = True
    last_used: int = 0


class Slots:
    """Sequence ids, the KV-cell budget and the prompts on sequences, for one context.

    ``reserve`` admits work when its cells and sequence ids are free, evicting retained
    prompts (least recently used first) to make room; it returns the evicted sequence ids,
    which the caller must clear in llama.cpp, or ``None`` when the work must wait.
    """

    def __init__(self, kv_cells: int, n_seqs: int, max_retained: int) -> None:
        self.kv_cells = kv_cells
        self.n_seqs = n_seqs
        self.max_retained = max_retained
        self.free_seqs = list(range(n_seqs - 1, -1, -1))  # pop() gives the lowest id first
        self.reserved = 0
        self.prompts: dict[int, Held] = {}
        self._clock = 0

    # -------------------------------------------------------------- cells and ids

    @property
    def free_cells(self) -> int:
        return self.kv_cells - self.reserved

    def retained(self) -> list[Held]:
        """Retained prompts, least recently used first."""
        return sorted((h for h in self.prompts.values() if not h.live), key=lambda h: h.last_used)

    def reserve(
        self, cells: int, seqs: int, force: bool = False, protect: int = -1
    ) -> tuple[list[int], list[int]] | None:
        """Take ``cells`` and ``seqs`` sequence ids if they are free (after evicting retained
        prompts other than ``protect``); ``force`` takes them even past the cell budget (a
        request that runs alone must not wait forever). Returns ``(taken ids, evicted ids)``
        (clear the evicted ones in llama.cpp), or None when nothing was taken."""
        evict: list[int] = []
        free_cells, free_seqs = self.free_cells, len(self.free_seqs)
        for held in self.retained():
            if free_cells >= cells and free_seqs >= seqs:
                break
            if held.seq == protect:
                continue
            evict.append(held.seq)
            free_cells += len(held.tokens)
            free_seqs += 1
        if free_seqs < seqs or (free_cells < cells and not force):
            return None
        for seq in evict:
            self.drop(seq)
        self.reserved += cells
        return [self.free_seqs.pop() for _ in range(seqs)], evict

    def release(self, cells: int, seq: int | None = None) -> None:
        self.reserved -= cells
        if seq is not None:
            self.free_seqs.append(seq)

    # -------------------------------------------------------------- prompts on sequences

    def hold(self, seq: int, tokens: list[int], ready: int) -> None:
        """Sequence ``seq`` (live) will hold ``tokens``, the first ``ready`` already (its cells
        were reserved with it)."""
        self._clock += 1
        self.prompts[seq] = Held(seq, list(tokens), ready, True, self._clock)

    def filled(self, seq: int, ready: int) -> None:
        """The first ``ready`` tokens of ``seq``'s prompt are in the cache now."""
        self.prompts[seq].ready = ready

    def best_prefix(self, tokens: list[int]) -> tuple[int, int]:
        """The held prompt sharing the longest prefix with ``tokens``: ``(seq, length)``, or
        ``(-1, 0)``. The last token is never counted (its logits must be computed)."""
        best_seq, best = -1, 0
        for held in self.prompts.values():
            n = common_prefix(held.tokens[: held.ready], tokens)
            if n > best:
                best_seq, best = held.seq, n
        return best_seq, min(best, len(tokens) - 1)

    def coming_prefix(self, tokens: list[int]) -> int:
        """The longest prefix of ``tokens`` a live prompt will hold once it is decoded (its
        not-yet-decoded part counted): a request that waits for it copies instead of computing."""
        best = 0
        for held in self.prompts.values():
            if held.live and held.ready < len(held.tokens):
                best = max(best, common_prefix(held.tokens, tokens))
        return min(best, len(tokens) - 1)

    def touch(self, seq: int) -> None:
        self._clock += 1
        self.prompts[seq].last_used = self._clock

    def retire(self, seq: int, keep: int) -> list[int]:
        """The request owning ``seq`` finished: keep its first ``keep`` tokens as a retained
        prompt (its cells stay reserved), or free it when ``keep`` is 0. Returns the sequence
        ids evicted to stay within ``max_retained`` (clear them in llama.cpp)."""
        held = self.prompts[seq]
        keep = min(keep, held.ready)
        if keep <= 0 or self.max_retained <= 0:
            self.drop(seq)
            return [seq]
        self.reserved -= len(held.tokens) - keep
        held.tokens = held.tokens[:keep]
        held.ready = keep
        held.live = False
        self.touch(seq)
        evicted = []
        while len(retained := self.retained()) > self.max_retained:
            evicted.append(retained[0].seq)
            self.drop(retained[0].seq)
        return evicted

    def drop(self, seq: int) -> None:
        """Forget the prompt on ``seq`` and free its cells and id."""
        held = self.prompts.pop(seq)
        self.release(len(held.tokens), seq)

    def drop_retained(self) -> list[int]:
        """Evict every retained prompt (after a failed decode); returns their ids."""
        seqs = [h.seq for h in self.retained()]
        for seq in seqs:
            self.drop(seq)
        return seqs
