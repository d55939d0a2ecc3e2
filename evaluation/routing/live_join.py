"""Live configurations in the route fit: measured where they ran, imputed by a difference
estimator elsewhere (pure).

Live configurations (:mod:`evaluation.pricing.live_configs`) ran on a subset of the calibration problems, and
the fit lets a configuration compete in a group only when it has figures on every problem of
the group (:func:`~.route_fit.covering`). So on a problem it did not run, a live configuration's
figures are imputed from the reference configuration, one greedy sample (``GREEDY``), which is
priced everywhere: within the problem's family (else its task type) where the live
configuration ran on at least ``min_live`` problems that also have the reference,

- accuracy = the reference's accuracy there + the mean paired difference (live - reference)
  over those problems, clipped to [0, 1];
- generated and prompt tokens and latency = the reference's there x the ratio of the live
  configuration's mean to the reference's mean over those problems.

The caveat: this assumes the live configuration's gain over one greedy sample is the same on
every problem of a family, so a route that rests on imputation is only as good as that
assumption and the few problems the difference was measured on. Which (problem,
configuration) figures are imputed is returned so routes and reports can say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.pricing.pricer import Estimate
from evaluation.routing.types import ConfigStats, ProblemStats

MIN_LIVE = 3


@dataclass(frozen=True)
class LiveSet:
    """What the fit needs of the live runs: per configuration its measured per-problem
    estimates and the route that runs it; ``min_live``: the fewest measured problems of a group
    its difference may be taken over."""

    estimates: Mapping[str, Mapping[str, Estimate]]
    routes: Mapping[str, Mapping[str, Any]]
    min_live: int = MIN_LIVE
    source: str = "live records"
    label_sources: Mapping[str, str] = field(default_factory=dict)  # a label's own, where sets were merged

    def source_of(self, label: str) -> str:
        """Where ``label``'s measurements come from."""
        return self.label_sources.get(label, self.source)


def add_measured(
    stats: Sequence[ProblemStats], live: LiveSet, latency: dict[tuple[str, str], float], prefill_weight: float
) -> None:
    """Each live configuration's measured outcomes into ``stats`` and ``latency`` (in place)."""
    for st in stats:
        for name, per in live.estimates.items():
            e = per.get(st.problem_id)
            if e is not None:
                tokens = e.generated + prefill_weight * e.prompt
                st.configs[name] = ConfigStats(e.accuracy, tokens, 1, e.prompt, e.generated, e.candidates)
                latency[(st.problem_id, name)] = e.latency_s


def _scale(ref_value: float, live_mean: float, ref_mean: float) -> float:
    return ref_value * live_mean / ref_mean if ref_mean > 0 else live_mean


def impute(
    stats: Sequence[ProblemStats], labels: Sequence[str], reference: str, groups: Sequence[Mapping[str, str]],
    latency: dict[tuple[str, str], float], prefill_weight: float, min_live: int = MIN_LIVE,
) -> dict[str, dict[str, str]]:  # fmt: skip
    """Fill each label's figures on the problems it lacks (in place), from the first of
    ``groups`` (problem id -> group name: families, then task types) whose group holds at least
    ``min_live`` problems with both the label and ``reference``. Returns label -> problem id ->
    ``"<group>"`` it was imputed from; a problem no group imputes stays without the label."""
    done: dict[str, dict[str, str]] = {}
    for label in labels:
        measured = [s for s in stats if label in s.configs and reference in s.configs]
        for st in stats:
            if label in st.configs or reference not in st.configs:
                continue
            for group_of in groups:
                group = group_of.get(st.problem_id)
                paired = [m for m in measured if group_of.get(m.problem_id) == group]
                if group is None or len(paired) < min_live:
                    continue
                st.configs[label] = _imputed(st.configs[reference], paired, label, reference, prefill_weight)
                live_lat = [latency.get((m.problem_id, label), 0.0) for m in paired]
                ref_lat = [latency.get((m.problem_id, reference), 0.0) for m in paired]
                base = latency.get((st.problem_id, reference), 0.0)
                latency[(st.problem_id, label)] = _scale(base, float(np.mean(live_lat)), float(np.mean(ref_lat)))
                done.setdefault(label, {})[st.problem_id] = group
                break
    return done


def _imputed(ref: ConfigStats, paired: Sequence[ProblemStats], label: str, reference: str,
             prefill_weight: float) -> ConfigStats:  # fmt: skip
    live = [m.configs[label] for m in paired]
    base = [m.configs[reference] for m in paired]
    diff = float(np.mean([a.accuracy - b.accuracy for a, b in zip(live, base, strict=True)]))

    def scaled(attr: str) -> float:
        return _scale(getattr(ref, attr), float(np.mean([getattr(c, attr) for c in live])),
                      float(np.mean([getattr(c, attr) for c in base])))  # fmt: skip

    generated, prompt = scaled("generated_tokens"), scaled("prompt_tokens")
    return ConfigStats(accuracy=min(1.0, max(0.0, ref.accuracy + diff)), tokens=generated + prefill_weight * prompt,
                       requests=1, prompt_tokens=prompt, generated_tokens=generated)  # fmt: skip


def join(
    stats: Sequence[ProblemStats], live: LiveSet, reference: str, groups: Sequence[Mapping[str, str]],
    latency: dict[tuple[str, str], float], prefill_weight: float,
) -> dict[str, dict[str, str]]:  # fmt: skip
    """Measured figures, then imputed ones (see the module docstring); what was imputed."""
    add_measured(stats, live, latency, prefill_weight)
    return impute(stats, list(live.estimates), reference, groups, latency, prefill_weight, live.min_live)


def provenance(live: LiveSet, imputed: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """Per live configuration, on how many problems it was measured and imputed."""
    return {
        "source": live.source, "min_live": live.min_live, "estimator": "difference vs one greedy sample",
        "configs": {name: {"measured": len(per), "imputed": len(imputed.get(name, {}))}
                    for name, per in live.estimates.items()},
    }  # fmt: skip
