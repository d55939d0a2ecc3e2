"""Does the pool simulator predict live runs? The comparison of priced and live figures on the
same problems (pure).

The pricer (:mod:`evaluation.pricing.pricer`) estimates a configuration's accuracy, tokens and
latency on a problem from the problem's pool. The validation (``python -m calibration
validate``) sends the same configuration through the gateway once per problem, pinned to the
request that runs it (:func:`evaluation.pricing.live_records.gateway_pin`), and this module
compares the two per configuration (:func:`compare`), on the problems whose newest record is
usable (infrastructure errors excluded and counted, never wrong): the live accuracy with its
95% Wilson interval, the priced accuracy on the same problems with its 95% interval (bootstrap
over problems widened to Wilson, :func:`evaluation.stats.intervals.bootstrap_interval`, the
interval every pricing table shows), the paired difference live minus priced with a 95%
percentile-bootstrap interval over problems, and mean generated tokens, prompt tokens and
latency live against priced.

The verdict is interval inclusion: the configuration **agrees** when the live accuracy lies
inside the priced 95% interval. That interval is the pricer's statement of how precisely it
knows the accuracy on a problem set of this size, so inclusion says the live run is one the
estimate allows. It is lenient by design (the two share their problems, so the between-problem
spread in the priced interval is not noise between them); the paired difference's interval is
the stricter check, reported beside it (``paired_excludes_zero``): an interval away from 0 says
the simulator is biased on these problems even where the verdict agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evaluation.pricing.live_records import LiveRecord, usable_records
from evaluation.pricing.pricer import Estimate
from evaluation.stats.intervals import BOOTSTRAP, bootstrap_interval, wilson


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
