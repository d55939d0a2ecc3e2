"""Pure pieces of the llama.cpp decode loop: token sampling, log-probabilities, stop strings.

Sampling is done here in numpy rather than with llama.cpp's sampler chain so that every
candidate owns its random generator (seeded per candidate: same seed, same text, no state
shared between candidates) and so that the reported log-probabilities come from the same
logits the token was drawn from.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Logits = npt.NDArray[np.float32]
#: tokens examined before falling back to a full sort for top-p
TOP_P_WINDOW = 512


def log_softmax(logits: Logits) -> npt.NDArray[np.float64]:
    """Numerically stable log-softmax (float64 so tiny probabilities keep their digits)."""
    x = logits.astype(np.float64)
    m = float(x.max())
    return x - (m + float(np.log(np.exp(x - m).sum())))


def top_k_ids(values: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` largest values, largest first (argpartition keeps it O(V))."""
    k = min(k, values.shape[0])
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    part = np.argpartition(-values, k - 1)[:k]
    return part[np.argsort(-values[part], kind="stable")]


@dataclass
class TokenSampler:
    """Draws tokens for one candidate: greedy at temperature 0, else temperature + top-p."""

    seed: int
    temperature: float
    top_p: float = 1.0
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.Generator(np.random.PCG64(self.seed))

    def sample(self, logits: Logits) -> int:
        if self.temperature <= 0.0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / self.temperature
        p = np.exp(z - z.max())
        total = float(p.sum())
        u = float(self.rng.random())
        if self.top_p >= 1.0:
            idx = int(np.searchsorted(np.cumsum(p), u * total, side="right"))
            return min(idx, p.shape[0] - 1)
        ids = top_k_ids(p, TOP_P_WINDOW)
        cum = np.cumsum(p[ids]) / total
        if cum[-1] < self.top_p and ids.shape[0] < p.shape[0]:
            ids = np.argsort(-p, kind="stable")
            cum = np.cumsum(p[ids]) / total
        keep = int(np.searchsorted(cum, self.top_p, side="left")) + 1
        keep = min(keep, ids.shape[0])
        nucleus = cum[:keep]
        idx = int(np.searchsorted(nucleus, u * nucleus[-1], side="right"))
        return int(ids[min(idx, keep - 1)])


class StopScanner:
    """Accumulates decoded bytes of one candidate and finds stop strings in its text.

    Text is decoded incrementally (a UTF-8 character may span tokens). ``pending()`` returns
    the text that is safe to stream: it holds back the tail that could still turn out to be
    the start of a stop string, so a stop string is never streamed and then retracted.
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.holdback = max((len(s) for s in self.stops), default=1) - 1
        self.text = ""
        self.emitted = 0
        self.stopped = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, piece: bytes) -> bool:
        """Add a token's bytes; True when a stop string appeared (the text is cut before it)."""
        if self.stopped:
            return True
        start = max(0, len(self.text) - self.holdback)
        self.text += self._decoder.decode(piece)
        return self._check(start)

    def finish(self) -> None:
        """Flush a trailing partial character (end of generation)."""
        if not self.stopped:
            start = max(0, len(self.text) - self.holdback)
            self.text += self._decoder.decode(b"", final=True)
            self._check(start)

    def _check(self, start: int) -> bool:
        cut = -1
        for stop in self.stops:
            at = self.text.find(stop, start)
            if at != -1 and (cut == -1 or at < cut):
                cut = at
        if cut != -1:
            self.text = self.text[:cut]
            self.stopped = True
        return self.stopped

    def pending(self, final: bool = False) -> str:
        """Text not streamed yet that can no longer change."""
        end = len(self.text) if final or self.stopped else max(self.emitted, len(self.text) - self.holdback)
        chunk = self.text[self.emitted : end]
        self.emitted = end
        return chunk
