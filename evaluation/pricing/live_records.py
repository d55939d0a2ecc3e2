"""Live requests that stand for priced configurations: the pinned gateway request that runs one
(:func:`gateway_pin`) and the record a live run keeps of its answer (:class:`LiveRecord`).

The pricer (:mod:`~.pricer`) estimates a configuration from a problem's pool; the live runs
(the simulator check, the sequential and tree strategies that pools cannot price) send it
through the gateway instead. Which request runs a priced configuration: the strategy with the
same ``n``, the pools' temperature and token caps, and the strategy's parameters set so it
draws what the pricer replays (no early stop unless the name says ``:es``; no program
resampling, which the pools do not model); a configuration it cannot map is refused. Of the
records, the newest per (problem, configuration) counts, and an infrastructure error is
excluded and counted (:func:`usable_records`), never a wrong answer. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evaluation.pricing.pricer import Config


class Unmappable(ValueError):
    """A priced configuration no pinned gateway request runs as the pricer replays it."""


@dataclass(frozen=True)
class GatewayPin:
    """The request that runs a priced configuration: the ``ttc`` extension (strategy, n,
    token budget, parameters) and the sampling the pools were drawn with."""

    strategy: str
    n: int
    token_budget: int
    temperature: float
    max_tokens: int
    params: dict[str, bool | int | float | str] = field(default_factory=dict)

    def extension(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "n": self.n, "token_budget": self.token_budget, "params": dict(self.params)}


def gateway_pin(config: Config, settings: Mapping[str, Any], *, confidence: float = 0.9,
                program_cap: int = 512) -> GatewayPin:  # fmt: skip
    """The pinned request for ``config`` given the pools' draw ``settings`` (a chunk header's
    ``settings``: ``temperature``, ``top_p``, ``cot_max_tokens``, ``program_max_tokens``).

    ``max_tokens`` is the chain-of-thought cap (it caps every answer; program-of-thought caps
    its programs at ``min(max_tokens, program_cap)``, so a pool whose program cap is not that
    cannot be replayed live and is refused). The token budget holds every draw at its cap plus
    the fallback chain of thought, so the budget never shortens a draw the pool made whole."""
    temperature = float(settings.get("temperature", 0.7))
    cot_cap = int(settings.get("cot_max_tokens", 1024))
    if float(settings.get("top_p", 1.0)) != 1.0:
        raise Unmappable(f"{config.name}: the pools were drawn with top_p={settings.get('top_p')}; requests use 1.0")
    if config.early_stop and config.first_wave != 3:
        raise Unmappable(f"{config.name}: first_wave {config.first_wave} (the strategies' waves start at 3)")
    stop: dict[str, bool | int | float | str] = {"early_stop": config.early_stop}
    if config.early_stop:
        stop |= {"first_wave": config.first_wave, "confidence": confidence}
    if config.family == "cot_greedy":
        return GatewayPin("single", 1, cot_cap, temperature, cot_cap, {"greedy": True})
    if config.family == "sc":
        return GatewayPin("self_consistency", config.n, config.n * cot_cap, temperature, cot_cap, stop)
    if config.family == "pot":
        program_max = int(settings.get("program_max_tokens", program_cap))
        if program_max != min(cot_cap, program_cap):
            raise Unmappable(
                f"{config.name}: the pools' programs were capped at {program_max} tokens; a request with "
                f"max_tokens={cot_cap} caps them at {min(cot_cap, program_cap)}"
            )
        params: dict[str, bool | int | float | str] = {"retries": 0, "fallback": True, **stop}
        if config.cot:
            params |= {"mode": "hybrid", "cot": config.cot, "cot_weight": config.cot_weight}
        else:
            params["mode"] = "program"
        budget = config.n * program_max + (config.cot + 1) * cot_cap
        return GatewayPin("program_of_thought", config.n, budget, temperature, cot_cap, params)
    raise Unmappable(
        f"{config.name}: family {config.family!r} has no pinned gateway request here "
        "(best-of-n and weighted votes need the pools' judge as a verifier; code configurations a sandbox check)"
    )


@dataclass(frozen=True)
class LiveRecord:
    """One live request's outcome, as the validation records it. ``correct`` is ``None`` when
    ``error`` is set: the gateway, the search or the check failed for an infrastructure reason."""

    problem_id: str
    config: str
    correct: bool | None
    completion_tokens: int = 0
    prompt_tokens: int = 0
    latency_s: float = 0.0
    error: str = ""
    error_kind: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LiveRecord:
        correct = data.get("correct")
        return cls(
            problem_id=str(data["problem_id"]), config=str(data["config"]),
            correct=None if correct is None else bool(correct),
            completion_tokens=int(data.get("completion_tokens") or 0),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            latency_s=float(data.get("latency_s") or 0.0), error=str(data.get("error") or ""),
            error_kind=str(data.get("error_kind") or ""),
        )  # fmt: skip

    @property
    def infrastructure_error(self) -> bool:
        return bool(self.error) or self.correct is None


def latest_records(records: Iterable[LiveRecord]) -> dict[tuple[str, str], LiveRecord]:
    """(problem, configuration) -> its newest record (records come oldest first)."""
    latest: dict[tuple[str, str], LiveRecord] = {}
    for r in records:
        latest[(r.problem_id, r.config)] = r
    return latest


def usable_records(records: Iterable[LiveRecord], config: str) -> tuple[list[LiveRecord], int]:
    """The configuration's newest records that answered and were checked, and how many of its
    problems ended in an infrastructure error instead (excluded, never counted wrong)."""
    mine = [r for (_, name), r in latest_records(records).items() if name == config]
    ok = [r for r in mine if not r.infrastructure_error]
    return ok, len(mine) - len(ok)
