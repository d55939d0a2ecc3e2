"""Pure pieces of the llama.cpp decode loop: log-probabilities and stop strings.

(Token sampling itself runs in llama.cpp's C sampler chains, one per candidate: a numpy
sampler over a 150k vocabulary cost milliseconds per token, as much as the decode step.)
"""

from __future__ import annotations

import codecs

import numpy as np
import numpy.typing as npt

Logits = npt.NDArray[np.float32]
#: the log-softmax normalizer sums only tokens whose logit is within this of the best one
#: (each left out has probability below e^-30 relative to it: under 1e-8 all together even
#: for a 150k vocabulary)
SPAN = 30.0


def log_softmax(logits: Logits) -> npt.NDArray[np.float64]:
    """Log-softmax in float64 (tiny probabilities keep their digits); the normalizer sums only
    the tokens within ``SPAN`` of the best one."""
    m = float(logits.max())
    near = logits[logits >= m - SPAN].astype(np.float64)
    lse = m + float(np.log(np.exp(near - m).sum()))
    return logits.astype(np.float64) - lse


def top_k_ids(values: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` largest values, largest first (argpartition keeps it O(V))."""
    k = min(k, values.shape[0])
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    part = np.argpartition(-values, k - 1)[:k]
    return part[np.argsort(-values[part], kind="stable")]


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

    def end(self) -> int:
        """Where the text of the bytes fed so far ends: a character still incomplete in the
        decoder counts as the next one, so a token that only began it ends after it."""
        return len(self.text) + (1 if self._decoder.getstate()[0] and not self.stopped else 0)

    def pending(self, final: bool = False) -> str:
        """Text not streamed yet that can no longer change."""
        end = len(self.text) if final or self.stopped else max(self.emitted, len(self.text) - self.holdback)
        chunk = self.text[self.emitted : end]
        self.emitted = end
        return chunk
