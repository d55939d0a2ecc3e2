"""Does the pool simulator predict live runs? The comparison, pure (issue 21, "Validate the
simulator").

The pricer (:mod:`~.pricing`) estimates a configuration's accuracy, tokens and latency on a
problem from the problem's pool. The validation sends the same configuration through the
gateway once per problem (:mod:`loadtests.pools.validate`) and this module compares the two
on the SAME problems:

- which gateway request runs a priced configuration (:func:`gateway_pin`): the strategy with
  the same ``n``, the pools' temperature and token caps, and the strategy's parameters set so
  it draws what the pricer replays (no early stop unless the name says ``:es``; no program
  resampling, which the pools do not model). A configuration it cannot map is refused;
- the newest live record per (problem, configuration), infrastructure errors excluded and
  counted (:func:`usable_records`): an error is never a wrong answer;
- per configuration (:func:`compare`): the live accuracy with its 95% Wilson interval, the
  priced accuracy on the same problems with its 95% interval (bootstrap over problems widened
  to Wilson, :func:`~.intervals.bootstrap_interval`, the interval every pricing table shows),
  the paired difference live minus priced with a 95% percentile-bootstrap interval over
  problems, and mean generated tokens, prompt tokens and latency live against priced.

The verdict is the test the issue names, interval inclusion: the configuration **agrees** when
the live accuracy lies inside the priced 95% interval. That interval is the pricer's statement
of how precisely it knows the accuracy on a problem set of this size, so inclusion says the
live run is one the estimate allows. It is lenient by design (the two share their problems, so
the between-problem spread in the priced interval is not noise between them); the paired
difference's interval is the stricter check, reported beside it (``paired_excludes_zero``): an
interval away from 0 says the simulator is biased on these problems even where the verdict
agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evaluation.intervals import BOOTSTRAP, bootstrap_interval, wilson
from evaluation.pricing import Config, Estimate


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


def paired_interval(differences: Sequence[float], *, seed: int = 0, resamples: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of paired per-problem differences."""
    if not differences:
        return (0.0, 0.0)
    data = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@dataclass(frozen=True)
class ConfigCheck:
    """One configuration's live run against its priced estimate on the same problems."""

    config: str
    problems: int  # problems with a usable live record and a priced estimate
    errors: int  # problems whose live request ended in an infrastructure error (excluded)
    unpriced: int  # problems with a live record the pricer has no estimate for (excluded)
    live_accuracy: float = 0.0
    live_low: float = 0.0
    live_high: float = 0.0
    priced_accuracy: float = 0.0
    priced_low: float = 0.0
    priced_high: float = 0.0
    difference: float = 0.0  # live minus priced, mean over the problems
    difference_low: float = 0.0
    difference_high: float = 0.0
    live_generated: float = 0.0
    priced_generated: float = 0.0
    live_prompt: float = 0.0
    priced_prompt: float = 0.0
    live_latency_s: float = 0.0
    priced_latency_s: float = 0.0
    agrees: bool = False  # live accuracy inside the priced 95% interval (the module's test)
    paired_excludes_zero: bool = False

    @property
    def verdict(self) -> str:
        if not self.problems:
            return "no data"
        return "agrees" if self.agrees else "disagrees"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


def compare(
    config: str, estimates: Mapping[str, Estimate], records: Iterable[LiveRecord], *, seed: int = 0
) -> ConfigCheck:
    """Compare ``config``'s live records with its per-problem estimates (problem id -> estimate)."""
    usable, errors = usable_records(records, config)
    paired = [(r, estimates[r.problem_id]) for r in usable if r.problem_id in estimates]
    unpriced = len(usable) - len(paired)
    m = len(paired)
    if not m:
        return ConfigCheck(config, 0, errors, unpriced)
    live = [1.0 if r.correct else 0.0 for r, _ in paired]
    priced = [e.accuracy for _, e in paired]
    live_acc, priced_acc = sum(live) / m, sum(priced) / m
    live_low, live_high = wilson(sum(live), m)
    priced_low, priced_high = bootstrap_interval(priced, seed=seed)
    diff_low, diff_high = paired_interval([a - b for a, b in zip(live, priced, strict=True)], seed=seed)

    def mean(values: Iterable[float]) -> float:
        return float(sum(values)) / m

    return ConfigCheck(
        config=config, problems=m, errors=errors, unpriced=unpriced,
        live_accuracy=live_acc, live_low=live_low, live_high=live_high,
        priced_accuracy=priced_acc, priced_low=priced_low, priced_high=priced_high,
        difference=live_acc - priced_acc, difference_low=diff_low, difference_high=diff_high,
        live_generated=mean(r.completion_tokens for r, _ in paired),
        priced_generated=mean(e.generated for _, e in paired),
        live_prompt=mean(r.prompt_tokens for r, _ in paired), priced_prompt=mean(e.prompt for _, e in paired),
        live_latency_s=mean(r.latency_s for r, _ in paired), priced_latency_s=mean(e.latency_s for _, e in paired),
        agrees=priced_low <= live_acc <= priced_high, paired_excludes_zero=diff_low > 0.0 or diff_high < 0.0,
    )  # fmt: skip


def report(configs: Sequence[str], priced: Mapping[str, Mapping[str, Estimate]], records: Sequence[LiveRecord],
           *, seed: int = 0) -> list[ConfigCheck]:  # fmt: skip
    """One :class:`ConfigCheck` per configuration, in the order given."""
    return [compare(name, priced.get(name, {}), records, seed=seed) for name in configs]


def markdown(checks: Sequence[ConfigCheck]) -> str:
    """The report as a Markdown table (what the command prints and the docs quote)."""
    lines = [
        "| configuration | problems | errors | live accuracy [95% CI] | priced [95% CI] | live - priced [95% CI] "
        "| generated tok live / priced | prompt tok live / priced | latency s live / priced | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        lines.append(
            f"| `{c.config}` | {c.problems} | {c.errors} | {c.live_accuracy:.3f} [{c.live_low:.3f}, {c.live_high:.3f}] "
            f"| {c.priced_accuracy:.3f} [{c.priced_low:.3f}, {c.priced_high:.3f}] "
            f"| {c.difference:+.3f} [{c.difference_low:+.3f}, {c.difference_high:+.3f}] "
            f"| {c.live_generated:.0f} / {c.priced_generated:.0f} | {c.live_prompt:.0f} / {c.priced_prompt:.0f} "
            f"| {c.live_latency_s:.1f} / {c.priced_latency_s:.1f} | {c.verdict} |"
        )
    return "\n".join(lines)
