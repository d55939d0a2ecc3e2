"""The upstream OptiLLM is pointed at: our gateway pinned to plain sampling, with a ledger.

OptiLLM needs an OpenAI-compatible endpoint on the same engine our stack uses. Our gateway is
one, but unpinned it routes every request to a search; so this pass-through adds
``reasoning_effort: "none"`` and ``ttc: {"strategy": "single", "token_budget": n * max_tokens}``
to each request OptiLLM sends: one plain llama.cpp call per request, ``n`` samples at the
temperature OptiLLM asked for (``single`` without ``greedy``, so OptiLLM's own sampling is not
overridden; temperature 0 is greedy). Everything else is forwarded untouched, so what the gateway
rejects of OptiLLM's requests is rejected here too, and kept in the ledger with its message.

The ledger is the token count of record for OptiLLM: the gateway's own usage of every upstream
call, summed. ``GET /ledger`` returns the running totals; the driver reads them before and
after each OptiLLM request (requests run one at a time, so the difference is that request's).

``python -m loadtests.optillm.upstream --port P --gateway http://127.0.0.1:8000/v1``
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

DEFAULT_MAX_TOKENS = 1024
KEPT_REJECTIONS = 50


def pinned_body(body: dict[str, Any], default_max_tokens: int = DEFAULT_MAX_TOKENS) -> dict[str, Any]:
    """The request OptiLLM sent, pinned to one plain engine call (pure; the ledger's peer).

    A call without a token cap (OptiLLM's executecode plugin sends none) gets the run's
    ``max_tokens``, the cap every other configuration answers under."""
    pinned = dict(body)
    n = int(pinned.get("n") or 1)
    if not pinned.get("max_tokens") and not pinned.get("max_completion_tokens"):
        pinned["max_tokens"] = default_max_tokens
    per_answer = int(pinned.get("max_tokens") or pinned.get("max_completion_tokens") or default_max_tokens)
    pinned["reasoning_effort"] = "none"
    pinned.pop("reasoning", None)
    pinned["ttc"] = {"strategy": "single", "token_budget": max(1, n * per_answer), "stream_reasoning": False}
    return pinned


@dataclass
class Ledger:
    """Running totals of what the upstream engine was asked and decoded."""

    calls: int = 0
    rejected: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    samples: int = 0
    seconds: float = 0.0
    rejections: list[dict[str, Any]] = field(default_factory=list)

    def add(self, status: int, body: dict[str, Any], reply: Any, seconds: float) -> None:
        self.calls += 1
        self.seconds += seconds
        if status >= 400:
            self.rejected += 1
            error = reply.get("error") if isinstance(reply, dict) else None
            entry = {
                "call": self.calls,
                "status": status,
                "error": error if isinstance(error, dict) else str(reply)[:300],
                "fields": sorted(k for k in body if k not in ("messages", "model")),
            }
            self.rejections = [*self.rejections, entry][-KEPT_REJECTIONS:]
            return
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict):
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.samples += len(reply.get("choices") or []) if isinstance(reply, dict) else 0


def build_app(
    gateway: str, api_key: str = "none", max_tokens: int = DEFAULT_MAX_TOKENS, timeout_s: float = 1800.0
) -> FastAPI:
    app = FastAPI(title="ttc pinned upstream for OptiLLM")
    ledger = Ledger()
    base = gateway.rstrip("/")
    client = httpx.AsyncClient(timeout=timeout_s, headers={"Authorization": f"Bearer {api_key}"})

    @app.get("/ledger")
    async def read_ledger() -> dict[str, Any]:
        return asdict(ledger)

    @app.get("/v1/models")
    async def models() -> Response:
        reply = await client.get(f"{base}/models")
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        if body.get("stream"):
            # Every OptiLLM approach compared calls its upstream without streaming; a stream would
            # bypass the ledger, so it is refused loudly rather than counted wrong.
            ledger.add(400, body, {"error": {"message": "streaming upstream calls are not counted"}}, 0.0)
            return JSONResponse({"error": {"message": "stream is not supported by this pass-through"}}, 400)
        start = time.perf_counter()
        try:
            reply = await client.post(f"{base}/chat/completions", json=pinned_body(body, max_tokens))
        except httpx.HTTPError as exc:
            ledger.failed += 1
            return JSONResponse({"error": {"message": f"gateway unreachable: {exc}"}}, 502)
        try:
            data: Any = reply.json()
        except ValueError:
            data = reply.text
        ledger.add(reply.status_code, body, data, time.perf_counter() - start)
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")

    return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--gateway", default="http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default="none")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="cap for calls that send none")
    a = p.parse_args(argv)
    uvicorn.run(build_app(a.gateway, a.api_key, a.max_tokens), host="127.0.0.1", port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
