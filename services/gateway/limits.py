"""Per-key request-rate and token limits, counted in Redis so every gateway replica agrees.

Fixed one-minute windows: cheap, shared across replicas, and the ``Retry-After`` is simply the
time left in the window. The token limit counts prompt and completion tokens, reasoning
included - hidden compute is what the limit is for - and is kept in three steps:

1. ``check``, before planning: a key whose window is spent is refused (429 ``tokens_exceeded``)
   before any probe compute is spent on it.
2. ``reserve``, once the request is planned: one Lua script refuses a spent window or adds the
   request's budget to it (``budget_of``: what the job may spend), atomically, so concurrent
   requests of one key each see the others' reservations. A request is admitted only while the
   window holds less than the limit, so the admitted requests' reservations exceed the limit by
   at most the last one's budget: a burst overshoots by at most one request's budget.
3. ``settle``, when the job finishes (waited for, streamed, or followed in the background by
   the session): the window takes the real usage instead of the reservation (``usage.py``'s
   ``total_tokens``, the count the reply's ``usage`` shows). A reservation made in a window
   that has since ended settles only what the usage exceeds it by, into the current window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from services.gateway.errors import too_many
from services.gen.ttc.v1 import orchestrator_pb2

WINDOW_S = 60
# Tokens a chat template adds around the texts (role markers, a default system prompt) and per
# message; a byte-level tokenizer makes at most one token per UTF-8 byte of the texts themselves.
TEMPLATE_TOKENS = 64
TEMPLATE_TOKENS_PER_MESSAGE = 8

_RESERVE = """
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent >= tonumber(ARGV[1]) then
  return -1
end
local now = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return now
"""


def prompt_bound(job: orchestrator_pb2.SearchJob) -> int:
    """At most the prompt tokens one policy call of ``job`` reads: every byte of the texts the
    engine renders (messages, legacy prompt, tools, the output schema) plus the template's own."""
    texts = sum(m.ByteSize() for m in job.messages) + len(job.prompt.encode())
    texts += job.tools.ByteSize() + job.response_format.ByteSize()
    return texts + TEMPLATE_TOKENS + TEMPLATE_TOKENS_PER_MESSAGE * len(job.messages)


def budget_of(job: orchestrator_pb2.SearchJob, probe_tokens: int = 0) -> int:
    """The tokens a planned request is reserved: its search's generated-token budget (which the
    worker enforces), its prompt read once, and what the difficulty probe already spent.

    A strategy that reads the prompt in several policy calls, or whose verifier's judges prefill
    prompts, can spend prompt tokens past this; the settlement charges them when it finishes."""
    return int(job.budget.max_generated_tokens) + prompt_bound(job) + max(0, probe_tokens)


@dataclass(frozen=True)
class Reservation:
    """Tokens added to ``caller``'s window ``window`` when the request was admitted."""

    caller: str
    window: int
    tokens: int


def window_of(now: float) -> tuple[int, int]:
    """The window ``now`` falls in and the seconds until the next one (``Retry-After``)."""
    window = int(now // WINDOW_S)
    return window, max(1, int((window + 1) * WINDOW_S - now) + 1)


def settlement(reservation: Reservation, used: int, window_now: int) -> tuple[int, int] | None:
    """``(window, tokens to add)`` that replaces ``reservation`` by the real ``used`` tokens, or
    None when nothing changes. In its own window the difference is added (negative when the job
    spent less than reserved); after that window, only an excess, into the current window."""
    if window_now == reservation.window:
        delta = used - reservation.tokens
        return (reservation.window, delta) if delta else None
    excess = used - reservation.tokens
    return (window_now, excess) if excess > 0 else None


def _tokens_key(caller: str, window: int) -> str:
    return f"ttc:limit:tokens:{caller}:{window}"


class Limiter:
    def __init__(self, client: aioredis.Redis, requests_per_minute: int, tokens_per_minute: int) -> None:
        self.client = client
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._reserve = client.register_script(_RESERVE)

    def _spent(self, retry_after: int) -> Exception:
        return too_many(
            f"token limit of {self.tpm} tokens per minute spent for this API key", retry_after, "tokens_exceeded"
        )

    async def check(self, caller: str) -> None:
        """Count one request for ``caller``; raise 429 when its rate or its window's tokens are spent."""
        if not self.rpm and not self.tpm:
            return
        window, retry_after = window_of(time.time())
        if self.tpm:
            spent = int(await self.client.get(_tokens_key(caller, window)) or 0)
            if spent >= self.tpm:
                raise self._spent(retry_after)
        if self.rpm:
            key = f"ttc:limit:requests:{caller}:{window}"
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, 2 * WINDOW_S)
                count, _ = await pipe.execute()
            if int(count) > self.rpm:
                raise too_many(f"rate limit of {self.rpm} requests per minute reached for this API key", retry_after)

    async def reserve(self, caller: str, tokens: int) -> Reservation | None:
        """Add an admitted request's budget to its key's window (None without a token limit);
        429 ``tokens_exceeded`` when the window is spent, counting every earlier reservation."""
        if not self.tpm:
            return None
        window, retry_after = window_of(time.time())
        tokens = max(0, tokens)
        total = int(await self._reserve(keys=[_tokens_key(caller, window)], args=[self.tpm, tokens, 2 * WINDOW_S]))
        if total < 0:
            raise self._spent(retry_after)
        return Reservation(caller, window, tokens)

    async def settle(self, reservation: Reservation | None, used: int) -> None:
        """Replace a reservation by the tokens the request really used."""
        if reservation is None:
            return
        change = settlement(reservation, max(0, used), window_of(time.time())[0])
        if change is None:
            return
        window, delta = change
        key = _tokens_key(reservation.caller, window)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.incrby(key, delta)
            pipe.expire(key, 2 * WINDOW_S)
            await pipe.execute()
