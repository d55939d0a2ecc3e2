"""What a request in the llama.cpp batch loop (``tasks.py``) needs from around it: the model's
vocabulary, a candidate's sampler, and the loop that runs it (``Host``, which ``batch.py``'s
``BatchLoop`` is). Typed here so the requests never import the loop that imports them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from services.policy.engines.base import StreamDelta, TokenLogprob
from services.policy.engines.llamacpp.sampling import Logits
from services.policy.engines.llamacpp.slots import Slots

Emit = Callable[[StreamDelta], None]
#: a decode batch entry: (token, position, sequence, want logits)
Entry = tuple[int, int, int, bool]


class Vocab(Protocol):
    """What the loop needs from the engine's model: token text, log-probability records and
    end-of-generation tokens."""

    def piece(self, token: int) -> bytes: ...

    def token_logprob(self, lp: npt.NDArray[np.float64], token: int, top: int) -> TokenLogprob: ...

    def is_eog(self, token: int) -> bool: ...


class Sampler(Protocol):
    """One candidate's sampler (its seeded chain and any grammar), owned by the candidate."""

    def sample(self, ctx: Any, idx: int) -> int: ...

    def free(self) -> None: ...


class Occupant(Protocol):
    """A request as the loop's cache bookkeeping sees it: the sequence its prompt is on and how
    many prompt tokens it has fed there."""

    @property
    def seq(self) -> int: ...

    @property
    def fed(self) -> int: ...


class Host(Protocol):
    """What a request uses of the loop that runs it, on the loop's thread: the context and the
    last decode's logits, the model's vocabulary, the KV cache's sequences and reservations."""

    @property
    def ctx(self) -> Any: ...

    @property
    def vocab(self) -> Vocab: ...

    @property
    def kv_cells(self) -> int: ...

    @property
    def n_seqs(self) -> int: ...

    @property
    def slots(self) -> Slots: ...

    def logits(self, i: int) -> Logits:
        """A view of batch entry ``i``'s logits, valid until the next decode."""
        ...

    def seq_cp(self, src: int, dst: int) -> None:
        """Sequence ``dst`` becomes a copy of ``src``."""
        ...

    def seq_rm(self, seq: int, p0: int = -1) -> None:
        """Drop sequence ``seq``'s cells from position ``p0`` on (all of them by default)."""
        ...

    def reserve(self, cells: int, seqs: int, force: bool = False, protect: int = -1) -> list[int] | None:
        """Sequence ids with ``cells`` KV cells reserved, or None when they must wait."""
        ...

    def alone(self, task: Occupant) -> bool:
        """Whether ``task`` is the only request running."""
        ...

    def retire(self, task: Occupant) -> None:
        """``task`` is finished: its prompt stays cached on its sequence (or is evicted)."""
        ...
